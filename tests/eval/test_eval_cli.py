"""``atlas-mcp eval``: the commands end to end, on the real engine, with a toy LoCoMo-format file."""

from __future__ import annotations

import json

from click.testing import CliRunner

from atlas_mcp.cli import cli
from atlas_mcp.eval.ablation import ABLATIONS

from .test_locomo_loader import TOY


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_locomo_reports_every_group_and_writes_json(tmp_path):
    data, report = tmp_path / "toy.json", tmp_path / "out.json"
    data.write_text(json.dumps(TOY))
    result = invoke("eval", "locomo", str(data), "--k", "1,3", "--json", str(report), "--ablation-table")
    assert "| answerable (1-4) | 4 |" in result.output
    assert "R@3 with one technique switched off" in result.output
    payload = json.loads(report.read_text())
    assert payload["ks"] == [1, 3]
    assert set(payload["ablations"]) == set(ABLATIONS) >= {"bm25", "dense", "rerank", "decay"}
    # Three turns and a k of 3: every gold id is within reach of every question.
    assert payload["groups"]["answerable (1-4)"]["R@3"] == 1.0
    first = payload["questions"][0]
    assert first["gold"] == ["D1:1"] and sorted(first["ranked"]) == ["D1:1", "D1:2", "D2:5"]


def test_locomo_rejects_an_unknown_ablation(tmp_path):
    data = tmp_path / "toy.json"
    data.write_text(json.dumps(TOY))
    result = CliRunner().invoke(cli, ["eval", "locomo", str(data), "--ablate", "magic"])
    assert result.exit_code == 2 and "magic" in result.output


def test_scenarios_and_leaks_commands(tmp_path):
    result = invoke("eval", "scenarios", "--json", str(tmp_path / "s.json"))
    assert "| all | " in result.output
    assert json.loads((tmp_path / "s.json").read_text())["groups"]["all"]["R@5"] >= 0.95
    result = invoke("eval", "leaks")
    assert ": 0 leaks" in result.output
