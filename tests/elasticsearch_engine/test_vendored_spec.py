"""The vendored spec subset is exactly what spec/vendor.py cuts from the full documents."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from .spec.vendor import FILES, subset
from .spec_oracle import spec_path

FULL = Path(__file__).resolve().parents[2].parent / "shared" / "es-spec"  # the repository's ../shared


@pytest.mark.parametrize("name", FILES)
def test_vendored_subset_matches_the_full_spec(name: str):
    if not (FULL / name).exists():
        pytest.skip(f"the full specification is not here ({FULL}); the vendored subset is used as is")
    vendored = json.loads(gzip.decompress(spec_path(name).read_bytes()))
    assert vendored == subset(json.loads((FULL / name).read_text()))
