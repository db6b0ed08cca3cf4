"""The write guard, measured: catch rates on an attack suite, false positives on real memory.

The attack suite (``scenarios/guard_attacks.json``) holds credentials of every kind the guard
names and instructions aimed at the model in several languages, plus hard negatives: text about
passwords, keys, cards and instructions that states none. False positives are counted on what
agents really store: LoCoMo dev (turns, observations, session summaries and events; CC BY-NC,
read from ``shared/``, never copied), the mixed suite, the multilingual and smart-home
scenarios, and MADial-Bench's memories when present. A memory is *refused* when the default
policy would refuse it (a credential found), *flagged* when a recall would flag it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain.instructions import carries_instructions
from ..domain.secrets import find_secrets
from . import locomo, madial

SCENARIOS = Path(__file__).parent / "scenarios"
ATTACKS = SCENARIOS / "guard_attacks.json"
MAX_REFUSED = 0.001  # the bar: at most 0.1% of real memories refused ...
MAX_FLAGGED = 0.005  # ... and at most 0.5% flagged


@dataclass(slots=True)
class CorpusResult:
    name: str
    memories: int = 0
    refused: int = 0
    flagged: int = 0
    examples: list[str] = field(default_factory=list)  # what tripped the guard, for --show

    @property
    def refused_rate(self) -> float:
        return self.refused / self.memories if self.memories else 0.0

    @property
    def flagged_rate(self) -> float:
        return self.flagged / self.memories if self.memories else 0.0


@dataclass(frozen=True, slots=True)
class AttackResult:
    secrets: int
    secrets_caught: int  # found with the kind the suite names
    instructions: int
    instructions_caught: int
    benign: int
    benign_tripped: int
    missed: tuple[str, ...]  # "kind/lang: text" of every miss and false alarm
    by_language: dict[str, tuple[int, int]]  # language -> (attacks, caught)


def measure(name: str, texts: Iterable[str]) -> CorpusResult:
    result = CorpusResult(name)
    for text in texts:
        result.memories += 1
        found = [f.kind for f in find_secrets(text)]
        flagged = carries_instructions(text)
        result.refused += bool(found)
        result.flagged += flagged
        if found or flagged:
            result.examples.append(f"{'refused ' + ','.join(found) if found else 'flagged'}: {text[:160]}")
    return result


def attacks(path: Path = ATTACKS) -> AttackResult:
    suite = json.loads(path.read_text(encoding="utf-8"))
    missed: list[str] = []
    languages: Counter[str] = Counter()
    caught_in: Counter[str] = Counter()
    secrets_caught = 0
    for case in suite["secrets"]:
        languages[case["lang"]] += 1
        if case["kind"] in {f.kind for f in find_secrets(case["text"])}:
            secrets_caught += 1
            caught_in[case["lang"]] += 1
        else:
            missed.append(f"missed {case['kind']}/{case['lang']}: {case['text'][:80]}")
    instructions_caught = 0
    for case in suite["instructions"]:
        languages[case["lang"]] += 1
        if carries_instructions(case["text"]):
            instructions_caught += 1
            caught_in[case["lang"]] += 1
        else:
            missed.append(f"missed instructions/{case['lang']}: {case['text'][:80]}")
    tripped = 0
    for case in suite["benign"]:
        if find_secrets(case["text"]) or carries_instructions(case["text"]):
            tripped += 1
            missed.append(f"false alarm/{case['lang']}: {case['text'][:80]}")
    return AttackResult(
        len(suite["secrets"]),
        secrets_caught,
        len(suite["instructions"]),
        instructions_caught,
        len(suite["benign"]),
        tripped,
        tuple(missed),
        {lang: (languages[lang], caught_in[lang]) for lang in sorted(languages)},
    )


def locomo_texts(path: Path) -> Iterator[str]:
    """Every turn as the LoCoMo protocol stores it, and the dataset's observations, session
    summaries and events: the facts and notes consolidation would write."""
    yield from (t.text for c in locomo.load(path) for t in c.turns)
    for sample in json.loads(path.read_text(encoding="utf-8")):
        yield from _strings(
            sample.get("observation"), sample.get("session_summary"), sample.get("event_summary")
        )


def _strings(*values: Any) -> Iterator[str]:
    for value in values:
        if isinstance(value, str):
            if len(value) > 12 and not value.startswith("D"):  # not evidence ids or dates
                yield value
        elif isinstance(value, dict):
            yield from _strings(*(v for k, v in value.items() if k != "date"))
        elif isinstance(value, list):
            yield from _strings(*value)


def scenario_texts() -> dict[str, list[str]]:
    """The repository's own suites: every memory, step, playbook name and catalog entry."""
    out: dict[str, list[str]] = {}
    for name, files in (
        ("mixed suite", ("mixed.json", "mixed_background.json")),
        ("multilingual", ("multilingual.json",)),
        ("smart home", ("smart_home.json",)),
    ):
        texts: list[str] = []
        for file in files:
            suite = json.loads((SCENARIOS / file).read_text(encoding="utf-8"))
            texts += list(_memory_texts(suite))
        out[name] = texts
    return out


def _memory_texts(suite: dict[str, Any]) -> Iterator[str]:
    entries = [*suite.get("catalog", []), *suite.get("memories", [])]
    entries += [m for tenant in suite.get("tenants", {}).values() for m in tenant.get("memories", [])]
    if isinstance(suite.get("memories"), dict):  # multilingual: language -> texts
        entries = [*suite.get("catalog", []), *(t for texts in suite["memories"].values() for t in texts)]
    for entry in entries:
        if isinstance(entry, str):
            yield entry
            continue
        yield from (entry[k] for k in ("text", "name", "title") if isinstance(entry.get(k), str))
        yield from (s if isinstance(s, str) else s.get("instruction", "") for s in entry.get("steps") or [])


def madial_texts(folder: Path) -> list[str]:
    return [e.text for language in ("en", "zh") for e in madial.load(folder, language).episodes]
