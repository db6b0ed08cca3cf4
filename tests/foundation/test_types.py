"""The static type check: mypy --strict over atlas_mcp/, configured in pyproject.toml
([tool.mypy]: strict, the pydantic plugin, the few libraries that ship no types). It runs here
so that every run of the suite, and so CI, checks it; mypy and the stubs it needs are in the
``test`` extra."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_type_checks_strictly():
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed here; it is in the test extra: .venv/bin/pip install -e '.[test]'")
    # The default cache (.mypy_cache/ in the checkout, ignored by git) makes a re-run take seconds.
    found = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert found.returncode == 0, found.stdout + found.stderr
