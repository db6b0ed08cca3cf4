"""A recall's use recorded after its reply (``uses.py``): the hits are those of a use recorded
at once, and whatever reads or writes memories next sees the use."""

from __future__ import annotations

import threading

from atlas_mcp.service import MemoryService
from atlas_mcp.uses import Use, Uses


def _stored_uses(service: MemoryService, memory_id: str) -> int:
    (memory,) = service._stored.get("u", [memory_id])  # the engine itself: no settling on the way
    return memory.use_count


def test_a_use_handed_over_is_recorded_before_the_next_recall_reads(service: MemoryService) -> None:
    written = service.write("u", "I live in Lyon.", "semantic").id
    later: list[Use] = []
    (hit,) = service.recall("u", "where do I live?", uses_after=later)
    assert len(later) == 1 and hit.memory.id == written
    assert hit.memory.use_count == 1 and hit.memory.last_used_at is not None  # as the caller sees it
    assert _stored_uses(service, written) == 0  # not recorded yet
    (again,) = service.recall("u", "where do I live?")  # settles the first use, then records its own
    assert again.memory.use_count == 2
    assert _stored_uses(service, written) == 2
    assert again.memory.last_used_at is not None


def test_a_use_started_is_recorded_on_its_thread_and_settled_by_the_next_call(
    service: MemoryService,
) -> None:
    written = service.write("u", "My dentist is Dr. Okafor.", "semantic").id
    later: list[Use] = []
    service.recall("u", "who is my dentist?", uses_after=later)
    later[0].start()
    assert service.get("u", written).use_count == 1  # waited for, or recorded there if not begun
    service.write("u", "I cycle to work.", "semantic")
    assert _stored_uses(service, written) == 1  # once, not again by a later settle


def test_a_use_is_recorded_once_and_a_failure_is_only_logged() -> None:
    uses = Uses()
    ran: list[str] = []
    gate = threading.Event()

    def slow() -> None:
        gate.wait(5)
        ran.append("slow")

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("the disk is gone")

    first, second = uses.later(slow), uses.later(broken)
    first.start()  # on the uses' thread, held at the gate
    settling = threading.Thread(target=uses.settle)
    settling.start()
    gate.set()
    settling.join(5)
    second.record()
    uses.close()
    assert ran == ["slow", "broken"]  # each once: settle waited for the one under way
