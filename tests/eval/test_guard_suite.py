"""The write guard, measured: every attack in the suite is caught with its kind, no hard negative
trips it, and on real memories (the repository's suites; LoCoMo dev and MADial-Bench when the
shared folder is present) at most 0.1% are refused and 0.5% flagged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from atlas_mcp.eval import guard_suite

SHARED = Path(__file__).resolve().parents[2].parent / "shared/eval/data"
LOCOMO = SHARED / "locomo/locomo10-dev.json"
MADIAL = SHARED / "madial_bench"


def test_the_attack_suite_is_caught_in_every_language() -> None:
    result = guard_suite.attacks()
    assert result.missed == ()
    assert result.secrets >= 60 and result.instructions >= 40 and result.benign >= 40
    assert len(result.by_language) >= 12


def test_the_repositorys_suites_are_neither_refused_nor_flagged() -> None:
    for name, texts in guard_suite.scenario_texts().items():
        result = guard_suite.measure(name, texts)
        assert result.memories > 40, name
        assert result.examples == [], result.examples


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo dev split not present at {LOCOMO}")
def test_real_conversations_stay_under_the_false_positive_bars() -> None:
    corpora = {"LoCoMo dev": list(guard_suite.locomo_texts(LOCOMO))}
    if MADIAL.is_dir():
        corpora["MADial-Bench"] = guard_suite.madial_texts(MADIAL)
    for name, texts in corpora.items():
        result = guard_suite.measure(name, texts)
        assert result.memories > 300, name
        assert result.refused_rate <= guard_suite.MAX_REFUSED, result.examples
        assert result.flagged_rate <= guard_suite.MAX_FLAGGED, result.examples


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo dev split not present at {LOCOMO}")
def test_eval_guard_prints_the_table_and_exits_zero_under_the_bars() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "atlas_mcp", "eval", "guard", "--locomo", str(LOCOMO)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| LoCoMo dev |" in done.stdout and "attack suite: credentials" in done.stdout
