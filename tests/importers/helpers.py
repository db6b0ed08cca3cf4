"""Shared by the importer tests: run the CLI on a data folder, read back what a store holds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from atlas_mcp.domain.model import Memory
from atlas_mcp.engines.embedded.engine import EmbeddedEngine
from atlas_mcp.inference.embedder import default_embedder
from atlas_mcp.portability import iter_memories, owners

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run(monkeypatch: pytest.MonkeyPatch, data_dir: Path, *args: str) -> Result:
    from atlas_mcp.cli import cli

    monkeypatch.setenv("ATLAS_DATA_DIR", str(data_dir))
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def stored(data_dir: Path) -> dict[str, Memory]:
    """Every memory in the store, every owner, superseded ones included."""
    if not (data_dir / "atlas.db").exists():
        return {}
    engine = EmbeddedEngine(data_dir / "atlas.db", default_embedder())
    try:
        return {m.id: m for owner in owners(engine.stats()) for m in iter_memories(engine, owner)}
    finally:
        engine.close()


def copy_fixture(relative: str, into: Path) -> Path:
    """A fixture copied where a test may touch it (its mtime is the copy's: undated records
    are dated by it)."""
    source = FIXTURES / relative
    target = into / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)
    return target
