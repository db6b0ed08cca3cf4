"""The pool heard from its members' side (``domain.perspective``): each view's rewording of the
query measured against the members it applies to, and their cosines moved by what it hears.

An engine measures another wording either by memory id (``cosines``, any engine) or, where it
gave the pool its own measure (``Pool.measure``), by the pool's row handles in the snapshot the
candidates were read from: no second read of the store, no id looked up per member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from . import perspective
from .pool import CATALOG, Measure, Pool
from .scoring import ScoringPolicy

if TYPE_CHECKING:
    from .ranking import RecallPlan

Cosines = Callable[["RecallPlan", str, Sequence[str]], Mapping[str, float]]


def from_their_side(
    policy: ScoringPolicy,
    plan: RecallPlan,
    pool: Pool,
    cosines: Cosines,
    learn: Callable[[Sequence[perspective.View]], None] | None = None,
) -> Pool:
    """Each candidate's cosine, heard also with the query reworded from its side
    (``domain.perspective``: a speaker's turns, facts that name the user); ``cosines`` is the
    engine's measure of another wording against some of the pool, unless the pool carries its
    own (``Pool.measure``); ``learn`` is told the views."""
    weight = policy.retrieval.perspective_weight
    if not weight or not len(pool):
        return pool
    # a pool's heads are compared as codes; its openings and inner names are read for a view of
    # the user only (when asked: each is a list made of the facts)
    columns = (None, lambda: pool.openings, pool.kind == CATALOG, lambda: pool.inner, pool.head_codes)
    found = perspective.views(plan.query, pool.memories, *columns)  # what it reads of the pool, kept
    if learn is not None:
        learn(found)
    if not found:  # most questions (~45% of a chat's): the pool as it is, not a copy of it
        return pool
    cosine, heard = pool.cosine.copy(), pool.relevance_cosine.copy()
    own = pool.unstretched  # relevance reads the cosine as it is, until a view is heard
    for view in found:
        if pool.measure is not None and pool.handles is not None:
            seen, has, discounts = _measured(pool.measure, view, pool.handles[list(view.members)])
        else:
            seen, has, discounts = _by_ids(plan, cosines, view, [pool.memories[i].id for i in view.members])
        perspective.hear(cosine, heard, own, view.members, seen, has, discounts, weight)
    return replace(pool, cosine=cosine, relevance_cosine=heard)


def _measured(
    measure: Measure, view: perspective.View, handles: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The view cosine of each member (NaN where none), whether it has one, and its name
    discount (``perspective.name_discounts``: 0 for a view that wrote no name in), by the
    pool's own measure: the values ``_by_ids`` gives, as columns."""
    seen, has = measure(view.text, handles)
    discounts = np.zeros(len(handles), dtype=np.float64)
    if view.name is not None:
        named, known = measure(view.name, handles)
        if known.any():
            discounts[known] = perspective.name_discounts(named[known].tolist())
    return seen, has, discounts


def _by_ids(
    plan: RecallPlan, cosines: Cosines, view: perspective.View, ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_measured`` by the engine's ``cosines`` of the members' ids."""
    seen = cosines(plan, view.text, ids)
    discount = _name_discounts(plan, view, ids, cosines)
    others = list(map(seen.get, ids))
    values = np.array([np.nan if s is None else s for s in others], dtype=np.float64)
    has = np.array([s is not None for s in others], dtype=bool)
    discounts = [discount.get(i, 0.0) for i in ids] if discount else [0.0] * len(ids)
    return values, has, np.asarray(discounts, dtype=np.float64)


def _name_discounts(
    plan: RecallPlan, view: perspective.View, ids: Sequence[str], cosines: Cosines
) -> dict[str, float]:
    """Per member, the share of its view cosine owed to the user's name alone
    (``perspective.name_discounts``); nothing for a view that wrote no name in."""
    if view.name is None:
        return {}
    named = cosines(plan, view.name, ids)
    heard = [id_ for id_ in ids if id_ in named]
    return dict(zip(heard, perspective.name_discounts([named[id_] for id_ in heard]), strict=True))
