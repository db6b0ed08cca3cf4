"""Engines under contract: every engine must pass tests/contract against one definition of correct.

To add an engine, add a param to ``engine_factory`` that yields a ready Engine for a fresh store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from atlas_mcp.engines.base import Engine
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.service import MemoryService


def _embedded(tmp_path: Path) -> Engine:
    return EmbeddedEngine(tmp_path / "contract" / "atlas.db", default_embedder())


ENGINE_FACTORIES: dict[str, Callable[[Path], Engine]] = {"embedded": _embedded}

try:  # the Elasticsearch engine, through the real client, against a loopback fake cluster
    import elasticsearch  # noqa: F401
    from elasticsearch_engine.harness import fake_cluster_engine
except ImportError:  # the elasticsearch extra is not installed
    pass
else:
    ENGINE_FACTORIES["elasticsearch-fake"] = fake_cluster_engine


@pytest.fixture(params=sorted(ENGINE_FACTORIES))
def contract_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    return ENGINE_FACTORIES[request.param](tmp_path)


@pytest.fixture
def contract_service(contract_engine: Engine) -> Iterator[MemoryService]:
    """The service in front of ``contract_engine`` (the same engine within a test)."""
    service = MemoryService(contract_engine)
    yield service
    service.close()
