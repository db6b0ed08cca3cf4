"""Render a benchmark report: a text table, a JSON file, and a latency-vs-size plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

# (heading, how to read it from one size's result)
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("corpus", lambda r: r.get("corpus", "template")),
    ("memories/tenant", lambda r: f"{r['memories_per_tenant']:,}"),
    ("total rows", lambda r: f"{r['total_memories']:,}"),
    ("recall p50", lambda r: _ms(r["recall_ms"]["p50"])),
    ("recall p95", lambda r: _ms(r["recall_ms"]["p95"])),
    ("recall p99", lambda r: _ms(r["recall_ms"]["p99"])),
    (
        "server CPU/recall",
        lambda r: _ms(r["recall_server_cpu_ms"]) if r.get("recall_server_cpu_ms") else "n/a",
    ),
    (
        "server's wait for a core/recall",
        lambda r: _ms(r["recall_server_runqueue_ms"]) if "recall_server_runqueue_ms" in r else "n/a",
    ),
    ("recall after write p95", lambda r: _ms(r["recall_after_write_ms"]["p95"])),
    ("write p50", lambda r: _ms(r["write_ms"]["p50"])),
    ("write p95", lambda r: _ms(r["write_ms"]["p95"])),
    ("recalls/s", lambda r: f"{r['stdio_recalls_per_s']:.0f}"),
    ("cold start", lambda r: f"{r['cold_start_s']:.2f} s"),
    ("start-up CPU", lambda r: f"{r['start_cpu_s']:.2f} s" if r.get("start_cpu_s") is not None else "n/a"),
    ("RSS", lambda r: "n/a" if r["rss_mb"] is None else f"{r['rss_mb']:.0f} MB"),
    ("disk/memory", lambda r: f"{r['disk_bytes_per_memory'] / 1024:.1f} KiB"),
)


def _ms(value: float) -> str:
    return f"{value:.1f} ms"


def table(report: dict[str, Any]) -> str:
    """A Markdown table (readable on a terminal, pastable into docs/performance.md)."""
    heads = [h for h, _ in COLUMNS]
    rows = [[cell(r) for _, cell in COLUMNS] for r in report["sizes"]]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---:|" * len(heads)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def stage_table(report: dict[str, Any]) -> str:
    """CPU ms per recall by stage (``stages.py``, in process), one column per corpus and size."""
    runs = [r for r in report["sizes"] if r.get("profile")]
    if not runs:
        return ""
    heads = [
        "stage (CPU ms/recall)",
        *(f"{r.get('corpus', 'template')} {r['memories_per_tenant']:,}" for r in runs),
    ]
    stages = list(runs[0]["profile"]["stages_ms"])
    lines = ["| " + " | ".join(heads) + " |", "|---|" + "---:|" * len(runs)]
    for stage in stages:
        lines.append(
            f"| {stage} | " + " | ".join(f"{r['profile']['stages_ms'][stage]:.2f}" for r in runs) + " |"
        )
    lines.append(
        "| **in-process recall** | " + " | ".join(f"{r['profile']['recall_cpu_ms']:.2f}" for r in runs) + " |"
    )
    return "\n".join(lines)


def client_lines(report: dict[str, Any]) -> list[str]:
    """The same recalls through the TypeScript client (``--ts-client``) beside the Python
    client's, one line per corpus and size that has them."""
    lines = []
    for r in report["sizes"]:
        ts = r.get("typescript")
        if not ts:
            continue
        python = r["recall_ms"]
        server = (
            f", server CPU {_ms(ts['recall_server_cpu_ms'])}/recall" if "recall_server_cpu_ms" in ts else ""
        )
        own = f" ({_ms(r['recall_client_cpu_ms'])})" if "recall_client_cpu_ms" in r else ""
        lines.append(
            f"TypeScript client, {r.get('corpus', 'template')} {r['memories_per_tenant']:,}: recall p50 "
            f"{_ms(ts['recall_ms']['p50'])}, p95 {_ms(ts['recall_ms']['p95'])} (Python client "
            f"{_ms(python['p50'])}, {_ms(python['p95'])}){server}, the client's own CPU "
            f"{_ms(ts['client_cpu_ms'])}/recall{own}"
        )
    return lines


def burst_lines(report: dict[str, Any]) -> list[str]:
    """The write-burst scenarios, one line each."""
    found = report.get("bursts") or {}
    lines = []
    for b in found.get("bursts", []):
        lines.append(
            f"burst of {b['writes']:,} writes: acknowledged {b['acknowledged_per_s']:.0f}/s, "
            f"{b['writes_per_s_with_embeddings']:.0f}/s with embeddings, write p95 {b['write_ms']['p95']:.1f} ms, "
            f"recall right after {b['recall_right_after_ms']:.0f} ms"
            + (
                f", server CPU {b['server_cpu_ms_per_write']:.1f} ms/write"
                if "server_cpu_ms_per_write" in b
                else ""
            )
        )
    if kill := found.get("kill"):
        lines.append(
            f"kill halfway through {kill['burst']:,} writes: {kill['pending_at_kill']} rows left unembedded; "
            f"next start answered initialize in {kill['initialize_s']:.2f} s, first recall at "
            f"{kill['start_and_first_recall_s']:.2f} s, repair done at {kill['repair_done_s']:.1f} s"
        )
    return lines


def conditions_line(report: dict[str, Any]) -> str:
    c, cfg = report["conditions"], report["config"]
    return (
        f"{c['cpus']} CPUs ({c.get('cpu_model') or 'unknown CPU'}), load average "
        f"{c.get('load_average_before')} before / {c.get('load_average_after')} after; "
        f"Python {c['python']}, SQLite {c['sqlite']}, onnxruntime {c['onnxruntime']}; "
        f"{cfg['tenants']} tenants, {cfg['queries']} recalls, {cfg['writes']} writes, "
        f"{cfg['clients']} concurrent clients for recalls/s; {c['date']}"
    )


def es_line(report: dict[str, Any]) -> str:
    es = report.get("elasticsearch_client")
    if not es:
        return "Elasticsearch client overhead: not measured (install the 'elasticsearch' extra)"
    return (
        f"Elasticsearch client overhead per recall (no cluster): build request p50 "
        f"{es['build_request_ms']['p50']:.3f} ms, parse 80 hits p50 {es['parse_80_hits_ms']['p50']:.3f} ms"
    )


def write_json(report: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def plot(report: dict[str, Any], path: Path) -> None:
    """Latency and memory against corpus size, both axes logarithmic: linear cost is a slope of 1."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigurationError("--plot needs matplotlib: pip install 'atlas-mcp[plot]'") from exc
    sizes = [r["memories_per_tenant"] for r in report["sizes"]]
    figure, (latency, memory) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, key, stat, style in (
        ("recall p50", "recall_ms", "p50", "o-"),
        ("recall p95", "recall_ms", "p95", "s-"),
        ("recall p99", "recall_ms", "p99", "^-"),
        ("recall right after a write, p95", "recall_after_write_ms", "p95", "d--"),
        ("write p95", "write_ms", "p95", "x--"),
    ):
        latency.plot(sizes, [r[key][stat] for r in report["sizes"]], style, label=label)
    if all(r.get("recall_server_cpu_ms") for r in report["sizes"]):
        cpu = [r["recall_server_cpu_ms"] for r in report["sizes"]]
        latency.plot(sizes, cpu, "*:", label="server CPU per recall (contention-free cost)")
    latency.set(
        xscale="log", yscale="log", xlabel="memories per tenant", ylabel="ms (through a stdio MCP client)"
    )
    latency.set_title("Latency vs. corpus size")
    latency.grid(True, which="both", alpha=0.3)
    top = max(line.get_ydata().max() for line in latency.get_lines())
    latency.set_ylim(top=top * 6)  # headroom above the lines for the legend
    latency.legend(fontsize=8, loc="upper left")
    memory.plot(sizes, [r["rss_mb"] or 0 for r in report["sizes"]], "o-", label="server RSS (MB)")
    memory.plot(sizes, [r["cold_start_s"] * 1000 for r in report["sizes"]], "s--", label="cold start (ms)")
    memory.set(xscale="log", xlabel="memories per tenant")
    memory.set_title("Resident memory and cold start")
    memory.grid(True, which="both", alpha=0.3)
    memory.legend(fontsize=8)
    figure.suptitle(f"atlas-mcp embedded engine, {report['conditions']['cpus']} CPUs", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
