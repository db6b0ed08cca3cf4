from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("elasticsearch", reason="the elasticsearch extra is not installed")

from .fake_es import FakeElasticsearch
from .harness import bootstrapped_engine


@pytest.fixture
def fake_es() -> Iterator[FakeElasticsearch]:
    fake = FakeElasticsearch().start()
    yield fake
    fake.stop()


@pytest.fixture
def es_engine(fake_es: FakeElasticsearch, tmp_path: Path):
    engine = bootstrapped_engine(fake_es, tmp_path / "es-keys.json")
    yield engine
    engine.close()
