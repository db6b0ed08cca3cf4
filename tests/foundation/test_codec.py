"""The one memory codec: every representation round-trips and agrees with the result schema."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from atlas_mcp.domain import codec
from atlas_mcp.domain.model import Memory, MemoryType, Step, iso
from atlas_mcp.domain.multipliers import Multipliers
from atlas_mcp.engines.elasticsearch import documents
from atlas_mcp.engines.elasticsearch.mappings import mapping
from atlas_mcp.engines.embedded import rows
from atlas_mcp.mcp.results import MemoryOut, RecallOut
from atlas_mcp.portability import from_record, to_record
from atlas_mcp.service import Explanation
from atlas_mcp.views import memory_view, recalled_view

T0 = datetime(2026, 5, 8, 13, 56, 1, 123456, tzinfo=UTC)


def _full(kind: MemoryType) -> Memory:
    """A memory with every field its type stores set to something non-default."""
    base = Memory(
        id=f"{kind.value}-1",
        memory_type=kind,
        user_id=None if kind is MemoryType.CATALOG else "alice",
        text="Lives in Lyon — près du Rhône",
        created_at=T0,
        metadata={"source": "chat", "nested": {"n": 1}},
    )
    if kind is MemoryType.CATALOG:
        return base.evolve(title="Hub 2.5", category="firmware", tags=("matter", "zigbee"))
    return base.evolve(
        occurred_at=T0 - timedelta(days=1) if kind is MemoryType.EPISODIC else None,
        fact_type="identity",
        confidence=0.8,
        source_episodes=("e1", "e2"),
        supersedes=("old-1",),
        superseded_by="new-1",
        superseded_at=T0 + timedelta(hours=1),
        last_used_at=T0 + timedelta(days=2),
        use_count=4,
        name="Reset the hub" if kind is MemoryType.PROCEDURAL else None,
        steps=(Step(1, "unplug"), Step(2, "hold reset", "timer")) if kind is MemoryType.PROCEDURAL else (),
        success_count=3,
        failure_count=1,
        last_success_at=T0 + timedelta(days=3),
    )


def test_the_codec_declares_every_memory_field_in_order():
    assert codec.NAMES == tuple(f.name for f in fields(Memory))


def test_every_shown_field_has_its_own_place_in_the_views():
    shown = [f for f in (*codec.FIELDS, *codec.VIEW_ONLY.values()) if f.shown]
    assert [f.name for f in shown if f.view is None] == []
    assert len({f.view for f in shown}) == len(shown), "two fields share a view rank"
    assert set(codec.VIEW_ORDER) == {f.name for f in shown}
    for kind in MemoryType:
        assert {f.name for f in codec.view_fields(kind)} == {f.name for f in shown if kind in f.shown}


def test_a_shown_field_without_a_view_rank_is_refused_at_import():
    unranked = codec.Field("importance", index=codec.Index.FLOAT)
    with pytest.raises(ValueError, match="'importance' is shown in views but has no view rank"):
        codec._view_rank(unranked)


@pytest.mark.parametrize("kind", list(MemoryType))
def test_a_row_an_export_line_and_a_document_round_trip(kind):
    memory = _full(kind)
    row = rows.to_row(memory)
    assert rows.from_row([row[c] for c in rows.READ_COLUMNS]) == memory
    assert from_record(to_record(memory, "model-a")) == memory
    stored = documents.to_source(memory)
    assert documents.from_source(memory.id, stored) == memory


@pytest.mark.parametrize("kind", list(MemoryType))
def test_a_document_holds_only_fields_its_index_maps(kind):
    mapped = mapping(kind, "inference").get("properties", {})
    assert documents.to_source(_full(kind)).keys() <= mapped.keys()
    assert set(codec.stored_names(kind)) <= mapped.keys()


def test_the_mapping_indexes_each_field_as_the_codec_declares():
    mapped = (
        mapping(MemoryType.SEMANTIC, "inference")["properties"]
        | mapping(MemoryType.CATALOG, "i")["properties"]
    )
    searched_as = {"keyword": codec.Index.EXACT, "text": codec.Index.WORDS, "integer": codec.Index.INTEGER}
    for name in ("user_id", "fact_type", "tags", "name", "title", "use_count"):
        assert searched_as[mapped[name]["type"]] is codec.BY_NAME[name].index
    assert mapped["confidence"] == {"type": "float"} and mapped["occurred_at"] == {"type": "date"}
    assert mapped["text"] == {"type": "text", "index": False}
    assert mapped["steps"] == mapped["metadata"] == {"type": "object", "enabled": False}


@pytest.mark.parametrize("kind", list(MemoryType))
def test_every_view_matches_the_declared_result_schema(kind):
    why = Explanation(
        1,
        2,
        0.03,
        0.7,
        0.9,
        "context",
        Multipliers(decay=0.5, decay_reference=T0, use_boost=1.2, track_record=1.1, time_fit=0.5),
        0.6,
    )
    view = recalled_view(_full(kind), 0.6, why)
    parsed = RecallOut.model_validate({"memories": [view]})
    assert parsed.model_dump(mode="json", exclude_unset=True) == {"memories": [view]}
    assert set(memory_view(_full(kind))) <= set(MemoryOut.model_fields)


def _view_by_the_rule(memory: Memory) -> dict[str, object]:
    """A view as first written: each field's encoder looked up by its kind, in view order,
    optional fields only when set (``codec.view`` keeps a plan per type instead)."""
    out: dict[str, object] = {}
    for f in codec.view_fields(memory.memory_type):
        value = codec.ENCODERS[f.kind](getattr(memory, f.name))
        if f.always or value not in (None, [], {}):
            out[f.name] = value
    return out


@pytest.mark.parametrize("kind", list(MemoryType))
@pytest.mark.parametrize("full", [True, False], ids=["every field set", "the required ones"])
def test_a_view_is_the_rule_field_by_field_and_in_order(kind, full):
    owner = None if kind is MemoryType.CATALOG else "alice"
    memory = (
        _full(kind) if full else Memory(id="m-1", memory_type=kind, user_id=owner, text="t", created_at=T0)
    )
    rule = _view_by_the_rule(memory)
    assert list(codec.view(memory).items()) == list(rule.items())
    head = {name: rule.pop(name) for name in ("id", "memory_type", "text")}
    assert list(memory_view(memory, 0.1234567).items()) == list((head | {"score": 0.123457} | rule).items())


def test_a_playbook_view_shows_its_last_success():
    view = memory_view(_full(MemoryType.PROCEDURAL))
    assert view["last_success_at"] == (T0 + timedelta(days=3)).isoformat()
    assert "last_success_at" in MemoryOut.model_fields


def test_an_engine_reranked_hit_explains_itself_without_a_fusion_score():
    why = Explanation(None, None, None, None, 0.9, "engine", Multipliers(), 0.9)
    view = recalled_view(_full(MemoryType.SEMANTIC), 0.9, why)
    assert view["explain"]["rrf_score"] is None
    assert RecallOut.model_validate({"memories": [view]}).memories[0].explain.rrf_score is None


def test_a_views_times_are_isos_text_whatever_was_viewed_before():
    """``view`` remembers UTC times' texts: each must still be the one ``iso`` gives, for the
    same instant in other zones and for equal wall times that are two instants (a fold)."""
    paris = ZoneInfo("Europe/Paris")
    times = [
        T0,
        T0.astimezone(timezone(timedelta(hours=2))),
        T0 + timedelta(microseconds=1),
        datetime(2026, 10, 25, 2, 30, tzinfo=paris),
        datetime(2026, 10, 25, 2, 30, tzinfo=paris, fold=1),
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    ]
    for when in times + times[::-1]:
        memory = Memory("e", MemoryType.EPISODIC, "alice", "t", created_at=when, occurred_at=when)
        shown = codec.view(memory)
        assert shown["created_at"] == shown["occurred_at"] == iso(when)
