"""Imports and the core profile behave the same on every engine: ids derived from the source make
a second import a no-op, a failure mid-way leaves nothing behind, and the profile holds only the
caller's current key facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas_mcp.domain.profile import ProfilePolicy
from atlas_mcp.importers import apply, read_source
from atlas_mcp.service import MemoryService

FIXTURES = Path(__file__).resolve().parents[1] / "importers" / "fixtures"


class Interrupted(RuntimeError):
    pass


def _import(
    service: MemoryService, user: str, fmt: str = "mcp-memory", relative: str = "mcp-memory/memory.jsonl"
):
    source = read_source(fmt, FIXTURES / relative)
    return apply.write(service, user, apply.plan(service, user, source, "t"))


def test_a_second_import_adds_nothing_and_users_stay_apart(contract_service: MemoryService):
    first = _import(contract_service, "sarah")
    assert (first.added, first.present) == (14, 0)
    again = _import(contract_service, "sarah")
    assert (again.added, again.present) == (0, 14)
    assert _import(contract_service, "bob").added == 14
    sarah = {m.id for m in contract_service.list("sarah")}
    bob = {m.id for m in contract_service.list("bob")}
    assert len(sarah) == len(bob) == 14 and not sarah & bob


def test_history_from_the_source_arrives_superseded(contract_service: MemoryService):
    outcome = _import(contract_service, "sarah", "mcp-memory-service", "mcp-memory-service/export.json")
    assert outcome.added == 6
    live = {m.text for m in contract_service.list("sarah", include_superseded=False)}
    assert "Sarah moved to Porto in May" in live and "Sarah's home city is Lisbon" not in live


def test_a_failure_mid_way_takes_back_what_was_written(contract_service: MemoryService, monkeypatch):
    source = read_source("mcp-memory", FIXTURES / "mcp-memory/memory.jsonl")
    planned = apply.plan(contract_service, "sarah", source, "t")
    real, calls = contract_service.store, []

    def failing(prepared, **options):
        calls.append(1)
        if len(calls) == 9:
            raise Interrupted("lost the store")
        return real(prepared, **options)

    monkeypatch.setattr(contract_service, "store", failing)
    with pytest.raises(Interrupted):
        apply.write(contract_service, "sarah", planned)
    assert contract_service.list("sarah") == []


def test_the_profile_is_the_callers_current_key_facts(contract_service: MemoryService):
    _import(contract_service, "sarah")
    old = contract_service.write("sarah", "Sarah is vegetarian", fact_type="constraint")
    contract_service.write("sarah", "Sarah eats fish again", fact_type="constraint", supersedes_id=old.id)
    contract_service.write("bob", "Bob is allergic to shellfish", fact_type="constraint")
    contract_service.load_catalog([{"id": "cat-1", "title": "Hub", "text": "Prefers nothing", "tags": []}])
    texts = [m.text for m in contract_service.profile("sarah", ProfilePolicy())]
    assert "User: Is allergic to peanuts" in texts and "Sarah eats fish again" in texts
    assert "Sarah is vegetarian" not in texts  # superseded
    assert not any("Bob" in t or "Hub" in t or "Kenji" in t for t in texts)
    assert contract_service.profile("alice", ProfilePolicy()) == []
