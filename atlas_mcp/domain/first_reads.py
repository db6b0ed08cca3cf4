"""What recall works out the first time it shows a memory, read ahead while the server is idle.

A recall shows ~10 memories. For each it reads the flags of its texts (``guard.flags``: ~40
pattern searches, 0.1-0.3 ms a text) and, for a fact, the keys resolution groups it by (its
gist, ~0.3 ms); both depend on the text alone and are kept per text for as many texts as the
embedded engine keeps memories, so a recall meeting a memory again reads them, it does not
work them out. Read ahead for a store's memories (the engine's preload, after the first
recall), a recall meets none for the first time. Nothing is stored: they are still worked out
from the text, by the same functions, in this process.
"""

from __future__ import annotations

from collections.abc import Sequence

from .guard import flags
from .model import Memory
from .resolution import grouping_keys


def read_ahead(memories: Sequence[Memory]) -> None:
    """Work out what a recall showing each of ``memories`` would work out first."""
    for memory in memories:
        flags(memory)
        grouping_keys(memory)


def read_ahead_facts(memories: Sequence[Memory]) -> None:
    """Work out what resolution and a write's settling read of each fact among ``memories``
    (its grouping keys, from its gist), for a store too large to read ahead whole: a recall
    and a write meet many facts there for the first time (~0.1 ms each: ~4 ms a recall at
    100k memories), and up to ``resolution.KEPT_FACTS`` facts the answers stay kept."""
    for memory in memories:
        grouping_keys(memory)
