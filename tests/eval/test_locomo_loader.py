"""LoCoMo parsing: the evidence quirks the protocol names, on a small hand-written file."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from atlas_mcp.eval import locomo

TOY = [
    {
        "sample_id": "toy-x",  # hand-written; LoCoMo itself is read from ../shared only
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a photo of a puppy"},
            ],
            "session_2_date_time": "9:05 am on 1 June, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:5", "text": "We went hiking."}],
            "session_3_date_time": "10:00 am on 2 June, 2023",  # a date with no session (conv-26 quirk)
        },
        "qa": [
            {"question": "What pet?", "answer": "dog", "evidence": ["D1:1"], "category": 4},
            {"question": "Packed", "answer": "x", "evidence": ["D1:1; D2:5"], "category": 1},
            {"question": "Malformed", "answer": "x", "evidence": ["D:1:2", "D2:05"], "category": 2},
            {"question": "Unknown id", "answer": "x", "evidence": ["D", "D9:9", "D1:2"], "category": 3},
            {"question": "No evidence", "answer": "x", "evidence": [], "category": 3},
            {"question": "Premise?", "adversarial_answer": "x", "evidence": ["D2:5"], "category": 5},
        ],
    }
]


def test_turns_sessions_and_evidence_are_normalised(tmp_path):
    path = tmp_path / "toy.json"
    path.write_text(json.dumps(TOY))
    [conversation] = locomo.load(path)

    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D1:2", "D2:5"]
    assert conversation.turns[1].text == "Bo: Look! [shares an image: a photo of a puppy]"
    assert conversation.turns[0].occurred_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conversation.turns[2].occurred_at == datetime(2023, 6, 1, 9, 5, tzinfo=UTC)
    evidence = {q.text: q.evidence for q in conversation.questions}
    assert evidence == {
        "What pet?": ("D1:1",),
        "Packed": ("D1:1", "D2:5"),
        "Malformed": ("D1:2", "D2:5"),
        "Unknown id": ("D1:2",),
        "Premise?": ("D2:5",),
    }  # "No evidence" is skipped
    assert [q.category for q in conversation.questions] == [4, 1, 2, 3, 5]
