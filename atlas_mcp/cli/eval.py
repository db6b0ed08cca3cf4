"""``atlas-mcp eval``: recall quality on LoCoMo and the scenario suite, the leak sweep, and the
write guard's catch and false-positive rates.

Every evaluation runs on a throw-away store in a temporary directory, through the same
service the MCP tools use; progress goes to stderr, the table to stdout, JSON to ``--json``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ..domain.calibration import FITTED
from ..eval import (
    ablation,
    calibrate,
    guard_suite,
    leaks,
    locomo,
    locomo_run,
    madial,
    mixed_suite,
    multilingual,
    naive_suite,
    scenario_suite,
)
from ..eval.harness import scratch_service
from ..eval.metrics import table
from .options import OutputFile, config_option, settings_from
from .tables import progress

LEAK_EXIT_CODE = 2
GUARD_EXIT_CODE = 3


def _ks(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(v) for v in value.split(",") if v.strip()}))
    except ValueError:
        raise click.BadParameter("a comma-separated list of cut-offs, e.g. 5,10") from None
    if not ks or min(ks) < 1 or max(ks) > 100:
        raise click.BadParameter("cut-offs must be between 1 and 100")
    return ks


def _write_json(path: Path | None, payload: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        click.echo(f"wrote {path}", err=True)


@click.group("eval")
def eval_() -> None:
    """Measure recall quality and tenant isolation."""


@eval_.command("locomo")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--k", "ks", default="5,10", callback=_ks, show_default=True, help="Cut-offs for R@k and Hit@k."
)
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@click.option(
    "--ablate",
    multiple=True,
    type=click.Choice(sorted(ablation.ABLATIONS)),
    help="Switch a technique off (repeatable: all named are switched off together).",
)
@click.option(
    "--ablation-table",
    is_flag=True,
    help="Also score every single ablation on the same store and print R@k per category.",
)
@config_option
def locomo_command(
    path: Path,
    ks: tuple[int, ...],
    json_file: Path | None,
    ablate: tuple[str, ...],
    ablation_table: bool,
    config_file: str | None,
) -> None:
    """Run the LoCoMo retrieval protocol on PATH (e.g. locomo10.json); see docs/quality.md."""
    conversations = locomo.load(path)
    steps = sum(len(c.turns) + len(c.questions) for c in conversations)
    with (
        scratch_service(settings_from(config_file)) as (service, clock),
        progress(steps, "locomo", show_pos=True) as bar,
    ):
        result = locomo_run.run(ablation.ablated(service, ablate), clock, conversations, ks, bar.update)
        variants = {}
        if ablation_table:
            for name in ablation.ABLATIONS:
                variant = ablation.ablated(service, [*ablate, name])
                variants[name] = locomo_run.rescore(variant, clock, conversations, result, ks)
    columns = [f"{m}@{k}" for m in ("R", "Hit") for k in ks]
    click.echo(table(result.groups, columns))
    latencies = sorted(result.recall_latencies_ms)
    click.echo(
        f"\ningest {result.ingest_seconds:.1f} s for {sum(len(c.turns) for c in conversations)} turns; "
        f"recall p50 {statistics.median(latencies):.1f} ms, p95 {latencies[int(0.95 * len(latencies))]:.1f} ms"
    )
    click.echo(locomo_run.floor_line(result, service.policy.calibration.relevance_floor))
    if variants:
        click.echo("\n" + locomo_run.ablation_table(result, variants, ks))
    _write_json(json_file, locomo_run.to_json(result, variants, list(ablate)))


@eval_.command("madial")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--k", "ks", default="5,10", callback=_ks, show_default=True, help="Cut-offs for R@k and Hit@k."
)
@click.option(
    "--language",
    "languages",
    multiple=True,
    type=click.Choice(madial.LANGUAGES),
    help="Only this language (repeatable); default: both.",
)
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@config_option
def madial_command(
    folder: Path,
    ks: tuple[int, ...],
    languages: tuple[str, ...],
    json_file: Path | None,
    config_file: str | None,
) -> None:
    """MADial-Bench dev split (FOLDER) in English and Chinese: R@k per language and zh/en ratio."""
    splits = [madial.load(folder, language) for language in languages or madial.LANGUAGES]
    results = {}
    for split in splits:  # one store per language: BM25 statistics stay within a language
        steps = len(split.episodes) + len(split.questions)
        with (
            scratch_service(settings_from(config_file)) as (service, clock),
            progress(steps, split.language, show_pos=True) as bar,
        ):
            results[split.language] = madial.run(service, clock, split, ks, bar.update)
    columns = [f"{m}@{k}" for m in ("R", "Hit") for k in ks] + ["MRR"]
    click.echo(table({lang: r.metrics for lang, r in results.items()}, columns))
    for lang, r in results.items():
        latencies = sorted(r.recall_latencies_ms)
        click.echo(
            f"{lang}: recall p50 {statistics.median(latencies):.1f} ms, "
            f"p95 {latencies[int(0.95 * len(latencies))]:.1f} ms"
        )
    if {"en", "zh"} <= results.keys():
        for k in ks:
            en, zh = results["en"].metrics[f"R@{k}"], results["zh"].metrics[f"R@{k}"]
            click.echo(f"zh/en R@{k}: {zh / en if en else 0.0:.3f}")
    _write_json(json_file, {lang: r.metrics for lang, r in results.items()})


@eval_.command("scenarios")
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@config_option
def scenarios_command(json_file: Path | None, config_file: str | None) -> None:
    """Run the built-in smart-home scenario suite; reports R@1, Hit@1, R@5 and MRR per kind."""
    with scratch_service(settings_from(config_file)) as (service, clock):
        result = scenario_suite.run(service, clock)
    _report_suite(result, scenario_suite.COLUMNS, json_file)


@eval_.command("mixed")
@click.option(
    "--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), help="Write results here."
)
@click.option(
    "--ablation-table", is_flag=True, help="Also run the suite once per ablation and print Hit@1 / kept."
)
@config_option
def mixed_command(json_file: Path | None, ablation_table: bool, config_file: str | None) -> None:
    """Run the mixed suite (the memory agents keep; docs/quality.md): ranking, floor, drift."""
    with scratch_service(settings_from(config_file)) as (service, clock):
        result = mixed_suite.run(service, clock)
    click.echo(mixed_suite.table(result))
    click.echo(
        f"\ntop 5 changed by {mixed_suite.SMALL_TALK_AFTER} small-talk recalls per user: {len(result.drift)}"
    )
    for line in [*result.drift, *mixed_suite.misses(result)]:
        click.echo(f"  {line}")
    variants = {}
    if ablation_table:
        for name in ablation.ABLATIONS:
            with scratch_service(settings_from(config_file)) as (service, clock):
                variants[name] = mixed_suite.run(ablation.ablated(service, [name]), clock).groups()
        click.echo("\n" + mixed_suite.ablation_table(result.groups(), variants))
    _write_json(
        json_file,
        {
            "groups": result.groups(),
            "small_talk_empty": result.small_talk_empty,
            "drift": list(result.drift),
            "misses": mixed_suite.misses(result),
            "ablations": variants,
        },
    )


@eval_.command("calibrate")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
def calibrate_command(path: Path, config_file: str | None) -> None:
    """Refit calibrated relevance on PATH (LoCoMo, also asked of the wrong conversation) and the
    mixed suite; print weights and the floor sweep."""
    settings = settings_from(config_file)
    with scratch_service(settings) as (service, clock):
        questions = calibrate.mixed_questions(mixed_suite.run(service, clock))
    with scratch_service(settings) as (service, clock):
        conversations = locomo.load(path)
        questions += calibrate.locomo_questions(service, clock, conversations)
        questions += calibrate.locomo_elsewhere(service, clock, conversations)
    model = calibrate.fit(questions, service.policy.calibration)
    refitted = calibrate.rescored(questions, model)
    click.echo(f"fitted [scoring.calibration]: { {name: getattr(model, name) for name in FITTED} }\n")
    click.echo(calibrate.reliability_table(refitted))
    click.echo("\n" + calibrate.sweep_table(refitted))


@eval_.command("multilingual")
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@config_option
def multilingual_command(json_file: Path | None, config_file: str | None) -> None:
    """One household in en, de, es, fr and ja: R@1, R@3 and MRR per language and kind."""
    with scratch_service(settings_from(config_file)) as (service, clock):
        result = multilingual.run(service, clock)
    _report_suite(result, multilingual.COLUMNS, json_file)


def _report_suite(
    result: scenario_suite.ScenarioResult | multilingual.MultilingualResult,
    columns: Sequence[str],
    json_file: Path | None,
) -> None:
    """A scenario suite's table, its misses, and the JSON file if one was asked for."""
    click.echo(table(result.groups, columns))
    for line in result.failures:
        click.echo(f"miss: {line}")
    _write_json(json_file, {"groups": result.groups, "failures": list(result.failures)})


@eval_.command("leaks")
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@config_option
def leaks_command(json_file: Path | None, config_file: str | None) -> None:
    """Ask for every user's memories as every other user over MCP; exit 2 on any leak."""
    with scratch_service(settings_from(config_file)) as (service, clock):
        stored = scenario_suite.populate(service, clock, scenario_suite.load(), clock())
        users = {m.user_id for m in stored if m.user_id}
        asked = sum(1 for m in stored if m.user_id) * (len(users) - 1)  # by every other user
        with progress(asked, "leak sweep", show_pos=True) as bar:
            report = leaks.sweep(service, stored, bar.update)
    click.echo(
        f"{report.queries} recalls as {report.tenants} users over {report.memories} memories: "
        f"{len(report.leaks)} leaks"
    )
    for leak in report.leaks:
        click.echo(f"LEAK: as {leak.asked_as!r} got {leak.owner!r}'s {leak.memory_id} for {leak.query!r}")
    _write_json(json_file, asdict(report))
    if report.leaks:
        sys.exit(LEAK_EXIT_CODE)


@eval_.command("guard")
@click.option("--locomo", "locomo_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--madial", "madial_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--show", is_flag=True, help="Print every real memory the guard would refuse or flag.")
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
def guard_command(
    locomo_file: Path | None, madial_dir: Path | None, show: bool, json_file: Path | None
) -> None:
    """The write guard: catch rates on the attack suite, false positives on real memories
    (LoCoMo dev with --locomo, MADial with --madial, and the repository's suites); exit 3 when
    more than 0.1% are refused or 0.5% flagged, or an attack is missed."""
    corpora = guard_suite.scenario_texts()
    if locomo_file is not None:
        corpora = {"LoCoMo dev": list(guard_suite.locomo_texts(locomo_file))} | corpora
    if madial_dir is not None:
        corpora["MADial-Bench"] = guard_suite.madial_texts(madial_dir)
    results = [guard_suite.measure(name, texts) for name, texts in corpora.items()]
    total = guard_suite.measure("all", [])
    for r in results:
        total.memories, total.refused, total.flagged = (
            total.memories + r.memories,
            total.refused + r.refused,
            total.flagged + r.flagged,
        )
    rows = {
        r.name: {"n": r.memories, "refused": r.refused_rate, "flagged": r.flagged_rate}
        for r in [*results, total]
    }
    click.echo(table(rows, ["refused", "flagged"]))
    attack = guard_suite.attacks()
    click.echo(
        f"\nattack suite: credentials {attack.secrets_caught}/{attack.secrets} caught with their kind, "
        f"instructions {attack.instructions_caught}/{attack.instructions} flagged, "
        f"{attack.benign_tripped}/{attack.benign} hard negatives tripped"
    )
    click.echo("per language: " + ", ".join(f"{k} {c}/{n}" for k, (n, c) in attack.by_language.items()))
    for line in attack.missed:
        click.echo(line)
    for r in results if show else []:
        for example in r.examples:
            click.echo(f"{r.name}: {example}", err=True)
    _write_json(json_file, {"corpora": rows, "attacks": asdict(attack)})
    worst = max((r for r in results), key=lambda r: r.refused_rate, default=None)
    over = total.refused_rate > guard_suite.MAX_REFUSED or total.flagged_rate > guard_suite.MAX_FLAGGED
    if over or attack.missed or (worst is not None and worst.refused_rate > guard_suite.MAX_REFUSED):
        sys.exit(GUARD_EXIT_CODE)


@eval_.command("naive")
@click.option(
    "--split",
    type=click.Choice(["dev", "holdout", "all"]),
    default="all",
    show_default=True,
    help="dev: the stories the rules were tuned on; holdout: those they never saw.",
)
@click.option("--json", "json_file", type=OutputFile(), help="Write results here.")
@config_option
def naive_command(split: str, json_file: Path | None, config_file: str | None) -> None:
    """Naive-agent histories (updates never superseded, repeats, look-alikes) through the MCP
    tools: stale-fact rate, copies of a repeated fact in the top 5, false merges."""
    results = {}
    for name in ("dev", "holdout") if split == "all" else (split,):
        with scratch_service(settings_from(config_file)) as (service, clock):
            results[name] = naive_suite.run(service, clock, name)
        result = results[name]
        click.echo(f"\n{name} split\n" + naive_suite.table(result))
        click.echo(
            f"background facts taken for another or marked outdated: {len(result.background_merged)} "
            f"of {result.background_facts}"
        )
        for line in results[name].failures() + list(results[name].background_merged):
            click.echo(f"  {line}")
    _write_json(json_file, {name: naive_suite.to_json(r) for name, r in results.items()})
