"""A synthetic agent-memory corpus: deterministic, realistic in shape, cheap to regenerate.

The corpus is an endless, seeded *stream* of memory specs: short preferences and identity
facts, events of very different lengths (a one-line note to a long meeting write-up), playbooks
with steps, and supersession chains (a fact replaced one to three times, like a user who moved
twice). Item ``i`` depends only on the seed and ``i``, so the first 1,000 items of a
100,000-item corpus are the 1,000-item corpus, and embeddings computed once can be reused.

Every tenant draws its memories from the same stream (each tenant from its own offset), so the
FTS index sees many tenants' postings for the same words, which is what a shared store holds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..domain.model import FactType, Memory, MemoryType, Step

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # corpora are dated relative to this, never to "now"
HISTORY_DAYS = 3 * 365

PEOPLE = (
    "Maya", "Tom", "Priya", "Jonas", "Aiko", "Lucas", "Fatima", "Sven", "Elena", "Kwame",
    "Olga", "Diego", "Hannah", "Ravi", "Chloe", "Mateo", "Ingrid", "Yusuf", "Nora", "Ben",
)  # fmt: skip
CITIES = (
    "Lisbon", "Berlin", "Austin", "Osaka", "Toronto", "Nairobi", "Melbourne", "Oslo", "Denver",
    "Porto", "Seoul", "Dublin", "Lyon", "Bogota", "Krakow", "Chennai",
)  # fmt: skip
THINGS = (
    "standing desk", "espresso machine", "mechanical keyboard", "road bike", "e-reader",
    "noise-cancelling headphones", "3D printer", "home router", "smart thermostat", "camera",
    "sourdough starter", "electric kettle", "mesh Wi-Fi hub", "drone", "NAS box", "projector",
)  # fmt: skip
TOPICS = (
    "the quarterly planning", "the database migration", "the onboarding docs", "the API redesign",
    "the billing outage", "the mobile release", "the hiring loop", "the security review",
    "the offsite agenda", "the data pipeline", "the customer escalation", "the budget review",
    "the search latency regression", "the design system", "the incident retro", "the roadmap",
)  # fmt: skip
FOODS = (
    "ramen", "tacos", "pho", "falafel", "sushi", "dal", "paella", "pierogi", "bibimbap",
    "margherita pizza", "green curry", "shakshuka", "poke", "gnocchi",
)  # fmt: skip
TOOLS = (
    "Neovim", "VS Code", "Postgres", "Kubernetes", "Terraform", "Grafana", "Rust", "Go",
    "Python", "Figma", "Notion", "Linear", "Docker", "Redis", "Kafka", "Elasticsearch",
)  # fmt: skip
FILLER = (
    "We went through the open questions one by one and agreed to revisit the rest next week.",
    "Nobody had a strong opinion at first, but the numbers made the choice fairly obvious.",
    "It took longer than planned because the staging environment was down for an hour.",
    "There was some back and forth about ownership, which we settled by splitting the work.",
    "The follow-up email went out the same afternoon with notes and action items attached.",
    "Afterwards we grabbed coffee and talked about the conference in the spring.",
    "A couple of edge cases came up that nobody had thought about before the demo.",
    "The vendor promised a fix in their next release, though without a firm date.",
    "I wrote down the main risks so that we can check them again before the deadline.",
    "Everyone agreed the first prototype was too slow, so we profiled it together.",
)  # fmt: skip
ATTRIBUTES = (
    ("lives in", CITIES),
    ("prefers to drink", ("oat flat white", "green tea", "black coffee", "sparkling water", "chai")),
    ("uses as main editor", ("Neovim", "VS Code", "Emacs", "JetBrains IDEs", "Zed", "Sublime Text")),
    ("has a manager named", PEOPLE),
    ("works out at", ("the climbing gym", "the pool", "home", "the park", "the CrossFit box")),
    ("runs the home server on", ("Debian", "Ubuntu", "NixOS", "Proxmox", "TrueNAS", "Fedora")),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """One stream item, before it is given to a tenant (no id, no owner yet)."""

    kind: MemoryType
    text: str
    age_days: float
    fact_type: str | None = None
    steps: tuple[str, ...] = ()
    name: str | None = None
    chain: int | None = None  # items of one supersession chain share this, oldest first


def _rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def _episode(r: random.Random) -> str:
    person, topic, city = r.choice(PEOPLE), r.choice(TOPICS), r.choice(CITIES)
    opening = r.choice((
        f"Met {person} in {city} to talk about {topic}.",
        f"Had a call with {person} about {topic}; ticket ATL-{r.randint(100, 9999)} was the main blocker.",
        f"Dinner with {person} at a {r.choice(FOODS)} place in {city}.",
        (f"Fixed error E{r.randint(1000, 9999)} on the {r.choice(THINGS)} after updating to "
         f"v{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}."),
        f"Presented {topic} to the team; {person} asked about the {r.choice(TOOLS)} setup.",
    ))  # fmt: skip
    # Lengths vary a lot, as real notes do: mostly short, a tail of long write-ups.
    sentences = r.choices((0, 1, 2, 4, 8, 16), weights=(40, 28, 16, 9, 5, 2))[0]
    return " ".join([opening, *(r.choice(FILLER) for _ in range(sentences))])


def _fact(r: random.Random) -> tuple[str, str]:
    fact_type = r.choice([f.value for f in FactType])
    text = r.choice((
        f"Prefers {r.choice(FOODS)} over {r.choice(FOODS)} for quick lunches.",
        f"Is allergic to {r.choice(('peanuts', 'shellfish', 'penicillin', 'cats', 'pollen'))}.",
        f"Owns a {r.choice(THINGS)} bought in {r.choice(CITIES)}.",
        f"Their {r.choice(THINGS)} runs firmware {r.randint(1, 5)}.{r.randint(0, 30)}.",
        f"Wants meetings with {r.choice(PEOPLE)} kept under {r.choice((15, 25, 30, 45))} minutes.",
        f"Writes most services in {r.choice(TOOLS)} and deploys with {r.choice(TOOLS)}.",
        f"Never schedules calls before {r.choice(('8', '9', '10'))} am {r.choice(CITIES)} time.",
    ))  # fmt: skip
    source = r.choice((
        "", f" Since {r.randint(2015, 2025)}.", f" Mentioned by {r.choice(PEOPLE)}.",
        f" Came up during {r.choice(TOPICS)}.", f" Confirmed on a trip to {r.choice(CITIES)}.",
    ))  # fmt: skip
    return text + source, fact_type


def _playbook(r: random.Random) -> tuple[str, str, tuple[str, ...]]:
    tool, thing = r.choice(TOOLS), r.choice(THINGS)
    name = r.choice((f"Restart the {thing}", f"Roll back a {tool} deploy", f"Rotate {tool} credentials"))
    trigger = f"When the {thing} or {tool} misbehaves after an update (error E{r.randint(1000, 9999)})."
    steps = tuple(
        f"{verb} {obj}"
        for verb, obj in zip(
            r.sample(("Check", "Stop", "Back up", "Restart", "Verify", "Notify", "Re-run"), k=4),
            r.sample(
                (
                    "the logs",
                    "the service",
                    "the config",
                    "the on-call channel",
                    "the health check",
                    "the last deploy",
                    "the disk space",
                ),
                k=4,
            ),
            strict=True,
        )
    )[: r.randint(2, 4)]
    return name, trigger, steps


def stream(seed: int) -> Iterator[MemorySpec]:
    """The endless corpus; chains are emitted oldest first, as one user would have lived them."""
    index = 0
    while True:
        r = _rng(seed, index)
        age = r.uniform(0, HISTORY_DAYS)
        roll = r.random()
        if roll < 0.45:
            yield MemorySpec(MemoryType.EPISODIC, _episode(r), age)
        elif roll < 0.82:
            text, fact_type = _fact(r)
            yield MemorySpec(MemoryType.SEMANTIC, text, age, fact_type=fact_type)
        elif roll < 0.92:
            name, trigger, steps = _playbook(r)
            yield MemorySpec(MemoryType.PROCEDURAL, trigger, age, steps=steps, name=name)
        else:  # a fact that changed one to three times
            attribute, values = r.choice(ATTRIBUTES)
            picked = r.sample(values, k=r.randint(2, 4))
            for step, value in enumerate(picked):
                when = age * (len(picked) - step) / len(picked)
                yield MemorySpec(MemoryType.SEMANTIC, f"The user {attribute} {value}.", when,
                                 fact_type=FactType.IDENTITY.value, chain=index)  # fmt: skip
        index += 1


def specs(seed: int, count: int) -> list[MemorySpec]:
    out: list[MemorySpec] = []
    for spec in stream(seed):
        if len(out) == count:
            return out
        out.append(spec)
    raise AssertionError("unreachable: the stream is endless")


def tenant_id(number: int) -> str:
    return f"bench-user-{number}"


def memory_id(tenant: int, position: int) -> str:
    return f"b{tenant:04x}{position:027x}"


def tenant_memories(tenant: int, items: list[MemorySpec]) -> list[Memory]:
    """Give ``items`` to one tenant: ids, owner, dates, and supersession links within the tenant."""
    owner = tenant_id(tenant)
    out: list[Memory] = []
    open_chain: dict[int, int] = {}  # chain -> position in out of its newest member so far
    for position, spec in enumerate(items):
        memory = _memory(spec, memory_id(tenant, position), owner)
        if spec.chain is not None:
            previous = open_chain.get(spec.chain)
            if previous is not None:
                old = out[previous]
                out[previous] = old.evolve(superseded_by=memory.id, superseded_at=memory.created_at)
                memory = memory.evolve(supersedes=(old.id,))
            open_chain[spec.chain] = len(out)
        out.append(memory)
    return out


def _memory(spec: MemorySpec, memory_id: str, owner: str) -> Memory:
    when = EPOCH - timedelta(days=spec.age_days)
    memory = Memory(id=memory_id, memory_type=spec.kind, user_id=owner, text=spec.text, created_at=when)
    if spec.kind is MemoryType.EPISODIC:
        return memory.evolve(occurred_at=when)
    if spec.kind is MemoryType.SEMANTIC:
        return memory.evolve(fact_type=spec.fact_type, confidence=1.0, last_used_at=when)
    steps = tuple(Step(order=i, instruction=s) for i, s in enumerate(spec.steps, start=1))
    return memory.evolve(name=spec.name, steps=steps)


def queries(seed: int, count: int) -> list[str]:
    """Recall queries in the voice of an agent passing the user's message verbatim."""
    r = _rng(seed + 1, 0)
    forms = (
        lambda: f"what did {r.choice(PEOPLE)} say about {r.choice(TOPICS)}?",
        lambda: "where does the user live now?",
        lambda: f"how do I fix error E{r.randint(1000, 9999)} on my {r.choice(THINGS)}",
        lambda: f"which firmware is my {r.choice(THINGS)} on",
        lambda: f"restart the {r.choice(THINGS)} after the {r.choice(TOOLS)} update broke it",
        lambda: f"book lunch, something like {r.choice(FOODS)}",
        lambda: f"when was I last in {r.choice(CITIES)} with {r.choice(PEOPLE)}",
        lambda: f"what editor do I use for {r.choice(TOOLS)} work",
        lambda: "any allergies I should mention?",
        lambda: f"summarise the notes on {r.choice(TOPICS)} and ticket ATL-{r.randint(100, 9999)}",
    )
    return [r.choice(forms)() for _ in range(count)]


def new_writes(seed: int, count: int) -> list[dict[str, Any]]:
    """``write_memory`` arguments for the write-latency phase (all three writable types)."""
    out = []
    for number, spec in enumerate(specs(seed + 2, count)):
        args: dict[str, Any] = {"text": spec.text, "memory_type": spec.kind.value}
        if spec.kind is MemoryType.SEMANTIC:
            args["fact_type"] = spec.fact_type
        elif spec.kind is MemoryType.PROCEDURAL:
            args["steps"] = list(spec.steps)
        elif spec.kind is MemoryType.EPISODIC:
            args["occurred_at"] = (EPOCH - timedelta(days=spec.age_days)).isoformat()
        args["metadata"] = {"bench": number}
        out.append(args)
    return out
