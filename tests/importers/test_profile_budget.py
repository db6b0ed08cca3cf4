"""The profile's token budget holds for real tokenizers: the server's estimate is never below
OpenAI's o200k nor Anthropic's Claude tokenizer (both from npm, installed by
scripts/install_peers.sh), on the facts the importers produce and on other scripts than Latin.

    pytest tests/importers/test_profile_budget.py -s     # prints the measured numbers
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from atlas_mcp.domain.model import Memory, MemoryType
from atlas_mcp.domain.profile import ProfilePolicy, estimate_tokens, render, select
from atlas_mcp.importers import read_source

from .helpers import FIXTURES
from .peers import peers_dir

COUNTER = """
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import { countTokens } from "@anthropic-ai/tokenizer";
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  console.log(JSON.stringify(JSON.parse(input).map((t) => [encode(t).length, countTokens(t)])));
});
"""
OTHER_SCRIPTS = [
    "私は東京に住んでいて、毎朝六時に起きます",
    "我对花生过敏，不吃海鲜",
    "Живёт в Москве с 2019 года, работает врачом",
    "إنه يعمل في شركة أكمي منذ عام ٢٠٢١",
    "Je préfère le café noir, sans sucre, à 8 h",
    "Ich bin allergisch gegen Erdnüsse und Schalentiere",
    "Prefers meetings after 2 pm; never before 10:00 (CET), e.g. 14:00-16:30",
    "Uses pnpm@9.12.3 with Node v20.20.2 on macOS 15.1 (arm64)",
    "https://github.com/acme/robots/issues/4411 tracks the charger bug",
    "저는 서울에 살고 매운 음식을 좋아해요",
    "हिंदी और अंग्रेज़ी बोलती है",
]


def _counter() -> Path | None:
    script = peers_dir() / "node" / "count_tokens.mjs"
    modules = peers_dir() / "node" / "node_modules"
    if shutil.which("node") is None or not (modules / "gpt-tokenizer").exists():
        return None
    if not (modules / "@anthropic-ai" / "tokenizer").exists():
        return None
    script.write_text(COUNTER, encoding="utf-8")
    return script


def real_counts(texts: list[str]) -> list[tuple[int, int]]:
    script = _counter()
    if script is None:
        pytest.skip("the npm tokenizers are not installed: bash scripts/install_peers.sh")
    out = subprocess.run(
        ["node", str(script)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [tuple(pair) for pair in json.loads(out.stdout)]


def _imported_texts(tmp_path: Path) -> list[str]:
    texts = []
    for fmt, relative in (
        ("mcp-memory", "mcp-memory/memory.jsonl"),
        ("mcp-memory-service", "mcp-memory-service/export.json"),
        ("mem0", "mem0/get_all.json"),
    ):
        texts += [d.text for d in read_source(fmt, FIXTURES / relative).drafts]
    return texts


def _facts(texts: list[str]) -> list[Memory]:
    kinds = ("identity", "constraint", "preference")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        Memory(
            id=f"f{i}",
            memory_type=MemoryType.SEMANTIC,
            user_id="u",
            text=text,
            created_at=start + timedelta(hours=i),
            fact_type=kinds[i % 3],
            use_count=i % 5,
        )
        for i, text in enumerate(texts)
    ]


def test_the_estimate_is_never_below_a_real_tokenizer(tmp_path):
    lines = [f"- {t}" for t in _imported_texts(tmp_path) + OTHER_SCRIPTS]
    for text, (o200k, claude) in zip(lines, real_counts(lines), strict=True):
        assert estimate_tokens(text) >= max(o200k, claude), text


def test_a_full_profile_measures_within_its_budget(tmp_path, capsys):
    texts = (_imported_texts(tmp_path) + OTHER_SCRIPTS) * 12  # more than fits: the budget decides
    texts = [f"{t} ({i})" for i, t in enumerate(texts)]
    rows = []
    for budget in (150, 350, 1000):
        profile = render(select(_facts(texts), ProfilePolicy(max_tokens=budget), "u"))
        ((o200k, claude),) = real_counts([profile])
        estimate = estimate_tokens(profile)
        assert max(o200k, claude) <= estimate <= budget
        rows.append((budget, estimate, o200k, claude, profile.count("\n- ") + profile.startswith("- ")))
    with capsys.disabled():
        print("\nbudget  estimate  o200k  claude  facts")
        for row in rows:
            print("{:>6}  {:>8}  {:>5}  {:>6}  {:>5}".format(*row))
