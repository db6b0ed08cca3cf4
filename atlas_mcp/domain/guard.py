"""The write guard: what a memory may carry into the store, and the flags it carries out. Pure.

Every field a person or model wrote is screened (text, a playbook's name and steps, a catalog
entry's title and tags, metadata strings). Credentials are refused by default, or replaced by
``[redacted <kind>]`` under ``secrets = "redact"``; a refusal names the kinds and fields, never
the value. Text that instructs the reading model is stored and flagged on every recall, or
refused under ``instructions = "refuse"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import InvalidInput
from .instructions import INSTRUCTIONS, carries_instructions
from .model import Memory
from .secrets import find_secrets, kinds, redact


class GuardPolicy(BaseModel):
    """The ``[guard]`` settings table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    secrets: Literal["refuse", "redact"] = Field(
        "refuse",
        description="a write holding a credential (key, token, password, card, IBAN): refuse it, "
        "or store it with each credential replaced by [redacted <kind>]",
    )
    instructions: Literal["flag", "refuse"] = Field(
        "flag",
        description="a write holding instructions aimed at the model: store it and flag it "
        'on every recall (flags: ["instructions"]), or refuse it',
    )


def _texts(memory: Memory) -> Iterator[tuple[str, str]]:
    """(field, text) for every piece of a memory that a person or a model wrote."""
    yield "text", memory.text
    for name in ("name", "title"):
        if value := getattr(memory, name):
            yield name, value
    for step in memory.steps:
        yield "steps", step.instruction
    for tag in memory.tags:
        yield "tags", tag
    yield from (("metadata", value) for value in _strings(memory.metadata))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def secret_kinds(memory: Memory) -> dict[str, list[str]]:
    """Field -> the kinds of credential found in it (empty: none)."""
    found: dict[str, list[str]] = {}
    for field, text in _texts(memory):
        for kind in kinds(find_secrets(text)):
            found.setdefault(field, [])
            if kind not in found[field]:
                found[field].append(kind)
    return found


def screen(memory: Memory, policy: GuardPolicy) -> tuple[Memory, tuple[str, ...]]:
    """The memory as it may be stored, and the kinds of credential redacted from it.

    Raises ``InvalidInput`` when the policy refuses what it carries."""
    if policy.instructions == "refuse" and flags(memory):
        raise InvalidInput(INSTRUCTIONS_REFUSED)
    found = secret_kinds(memory)
    if not found:
        return memory, ()
    if policy.secrets == "refuse":
        raise InvalidInput(secrets_refused(found))
    redacted = tuple(dict.fromkeys(k for ks in found.values() for k in ks))
    return _map_texts(memory, lambda text: redact(text, find_secrets(text))), redacted


def screen_batch(memories: Sequence[Memory], policy: GuardPolicy, unit: str) -> list[Memory]:
    """Screen many memories (an import) before any is stored: a refusal names every ``unit``
    (e.g. "record 12") the policy refuses and why, so one pass finds them all."""
    screened, refused = [], []
    for number, memory in enumerate(memories, start=1):
        if policy.instructions == "refuse" and flags(memory):
            refused.append(f"{unit} {number}: instructions addressed to an AI model")
        elif policy.secrets == "refuse" and (found := secret_kinds(memory)):
            refused.append(f"{unit} {number}: a credential ({_where(found)})")
        else:
            screened.append(screen(memory, policy)[0])
    if refused:
        more = f" (and {len(refused) - 20} more)" if len(refused) > 20 else ""
        raise InvalidInput(
            f"nothing imported: {len(refused)} {unit}(s) hold what the write guard refuses: "
            f'{"; ".join(refused[:20])}{more}. Remove them, or set [guard] secrets = "redact" '
            "(ATLAS_GUARD__SECRETS=redact) to store them with each credential replaced by [redacted <kind>]."
        )
    return screened


def flags(memory: Memory) -> tuple[str, ...]:
    """What a recall says about a memory's content: ``("instructions",)`` when some of it
    addresses the reading model."""
    return (INSTRUCTIONS,) if any(carries_instructions(text) for _, text in _texts(memory)) else ()


def _where(found: dict[str, list[str]]) -> str:
    return "; ".join(f"{', '.join(ks)} in {field}" for field, ks in found.items())


def secrets_refused(found: dict[str, list[str]]) -> str:
    example = next(iter(found.values()))[0]
    return (
        f"not stored: the memory contains a credential ({_where(found)}). Credentials are never kept "
        "in memory: it is recalled into prompts and exported. Write it again without the value, e.g. "
        f"say where it is kept ('the {example} is in the team password manager') or put "
        f"[{example}] in its place. Nothing was stored."
    )


INSTRUCTIONS_REFUSED = (
    "not stored: the memory contains instructions addressed to an AI model (e.g. 'ignore previous "
    "instructions', a 'system note', a request to send secrets somewhere). Memories are data about "
    "the user, never instructions; this server refuses them. Write down what happened instead, "
    "e.g. 'an email asked the assistant to forward passwords'. Nothing was stored."
)


def _map_texts(memory: Memory, change: Callable[[str], str]) -> Memory:
    """The memory with ``change`` applied to every text ``_texts`` screens."""
    return memory.evolve(
        text=change(memory.text),
        name=change(memory.name) if memory.name else memory.name,
        title=change(memory.title) if memory.title else memory.title,
        steps=tuple(replace(s, instruction=change(s.instruction)) for s in memory.steps),
        tags=tuple(change(t) for t in memory.tags),
        metadata=_map_strings(memory.metadata, change),
    )


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(k) if isinstance(k, str) else k: _map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_map_strings(v, change) for v in value)
    return value
