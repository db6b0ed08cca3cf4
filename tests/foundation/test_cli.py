"""The atlas-mcp command, run in-process with click's runner against a real store."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from atlas_mcp.app import open_service
from atlas_mcp.cli import cli
from atlas_mcp.config import load_settings


def test_catalog_load_is_idempotent_and_shared(tmp_path: Path):
    catalog = tmp_path / "catalog.jsonl"
    rows = [
        {
            "id": "cat-e42",
            "title": "Error E42",
            "text": "E42 means the hub lost its Zigbee radio",
            "category": "errors",
        },
        {"title": "Firmware 2.5", "text": "Firmware 2.5 adds Matter support", "tags": ["firmware"]},
    ]
    catalog.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    runner = CliRunner()
    first = runner.invoke(cli, ["catalog", "load", str(catalog)])
    assert first.exit_code == 0, first.output
    assert "loaded 2" in first.output
    service = open_service(load_settings())
    try:
        hits = service.recall("anyone", "what does E42 mean")
        assert hits[0].memory.id == "cat-e42" and hits[0].memory.category == "errors"
        assert len(service.list(None)) == 2
    finally:
        service.close()


def test_catalog_load_reports_bad_lines_and_loads_nothing(tmp_path: Path):
    catalog = tmp_path / "bad.jsonl"
    catalog.write_text('{"title": "ok", "text": "fine"}\n{not json}\n')
    result = CliRunner().invoke(cli, ["catalog", "load", str(catalog)])
    assert result.exit_code != 0 and "bad.jsonl:2" in result.output
    service = open_service(load_settings())
    try:
        assert service.list(None) == []
    finally:
        service.close()


def test_every_command_has_help():
    runner = CliRunner()
    for args in (["--help"], ["serve", "--help"], ["catalog", "load", "--help"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0 and "Usage" in result.output
    assert "--transport" in runner.invoke(cli, ["serve", "--help"]).output
