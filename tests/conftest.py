"""Shared fixtures: every test gets its own data directory and a clean ATLAS_* environment."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from atlas_mcp.config import Settings, load_settings
from atlas_mcp.engines.embedded import migrations
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.engines.embedded.store import Transaction
from atlas_mcp.inference.embedder import OnnxMiniLM, default_embedder
from atlas_mcp.service import MemoryService

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def pytest_report_header(config: pytest.Config) -> str:
    return f"sqlite {sqlite3.sqlite_version}; shared/ {'present' if SHARED.exists() else 'absent'}"


@pytest.fixture(autouse=True)
def _clean_atlas_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("ATLAS_") and key != "ATLAS_ES_URL":
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path / "data")


@pytest.fixture
def engine(tmp_path: Path):
    engine = EmbeddedEngine(tmp_path / "data" / "atlas.db", default_embedder())
    yield engine
    engine.close()


@pytest.fixture
def service(engine) -> MemoryService:
    return MemoryService(engine)


def legacy_store(path: Path, version: int) -> sqlite3.Connection:
    """A store as atlas-mcp wrote it before its migrations had names: the first ``version``
    steps applied, counted in ``PRAGMA user_version`` (open; the caller closes it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in migrations.MIGRATIONS[:version]:
        migration.apply(Transaction(conn))
    conn.execute(f"PRAGMA user_version={version}")
    conn.execute("COMMIT")
    return conn


@pytest.fixture(name="legacy_store")
def _legacy_store():
    return legacy_store


@pytest.fixture
def paired_minilm() -> OnnxMiniLM:
    """The default MiniLM once its pair session (``embed_pair`` in one run) is built."""
    embedder = default_embedder()
    deadline = time.monotonic() + 120  # the first time on a machine, the pair graph is derived
    while not embedder.pairs_ready():
        assert time.monotonic() < deadline, "the pair session was never built"
        time.sleep(0.05)
    return embedder
