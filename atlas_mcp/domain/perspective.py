"""Whose point of view: a question and the memory that answers it often name the same person
differently, and a sentence embedding reads the difference as a difference of meaning.

- A user asks "which city do I live in?"; the agent wrote "Nora has moved: she now rents a flat
  in Leith". MiniLM puts the two at cosine 0.29 and e5 ranks the fact 107th among the user's
  memories; asked "which city does Nora live in?" both rank it first.
- A transcript turn is in its speaker's first person ("Caroline: I went to the support group");
  the question names her ("when did Caroline go to the support group?").

So recall also reads the question from the memory's side: a *view* is the question reworded
(first-person words replaced by the user's name, or a speaker's name by first-person words) and
the memories it applies to (those naming the user; that speaker's turns). Nothing here guesses
who the user is from outside: the name is the one most of the user's own memories start with.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from .lexical import detect_language
from .model import Memory, MemoryType
from .openings import POSSESSIVE, Opening, opening, turn_head, written_inside
from .vocabulary import SPEAKERS

MIN_SUBJECT_STARTS = 3  # memories that must start with the name before it is taken as the user's

# First-person words per language and what the user's name replaces them with. Grammar is left
# as it falls ("which city do Nora live in"): both models rank by content, and the ungrammatical
# form found the same memories as the grammatical one on every test question.
_FIRST_PERSON: dict[str, dict[str, str]] = {
    "en": {
        "i": "{n}",
        "me": "{n}",
        "my": "{n}'s",
        "mine": "{n}'s",
        "myself": "{n}",
        "i'm": "{n} is",
        "i've": "{n} has",
        "i'd": "{n} would",
        "i'll": "{n} will",
    },
    "de": {w: "{n}" for w in ("ich", "mich", "mir")}
    | {w: "{n}s" for w in ("mein", "meine", "meinen", "meinem", "meiner", "meines")},
    "es": {w: "{n}" for w in ("yo", "mi", "mis", "mí", "me", "conmigo")},
    "fr": {w: "{n}" for w in ("je", "moi", "mon", "ma", "mes", "me")} | {"j'": "{n} ", "m'": "{n} "},
    "it": {w: "{n}" for w in ("io", "mio", "mia", "miei", "mie", "mi")},
    "pt": {w: "{n}" for w in ("eu", "meu", "minha", "meus", "minhas", "me")},
    "nl": {w: "{n}" for w in ("ik", "mij", "me", "mijn")},
}
# The possessive first-person words: a question saying "my partner" may be answered by "Priya,
# Nora's partner, ...", one saying only "I" or "me" is about the user herself.
_MY: dict[str, frozenset[str]] = {
    "en": frozenset(("my", "mine")),
    "de": frozenset(("mein", "meine", "meinen", "meinem", "meiner", "meines")),
    "es": frozenset(("mi", "mis")),
    "fr": frozenset(("mon", "ma", "mes")),
    "it": frozenset(("mio", "mia", "miei", "mie")),
    "pt": frozenset(("meu", "minha", "meus", "minhas")),
    "nl": frozenset(("mijn",)),
}
# Whom "<user>'s ..." makes a memory about instead of the user: "Nora's brother Callum lives in
# Aberdeen" answers where her brother lives, not "which city do I live in?". Only the English
# possessive needs them ("Nora's" is also "Nora is/has": "Nora's allergic to penicillin").
_SOMEONE_ELSE = frozenset(
    "brother brothers sister sisters mum mom mother dad father parents son sons daughter "
    "daughters kid kids child children partner husband wife boyfriend girlfriend fiance fiancee "
    "friend friends colleague colleagues boss manager neighbour neighbor cousin aunt uncle "
    "grandma grandmother grandpa grandfather niece nephew dog dogs cat cats pet pets".split()
)
_TOKENS = re.compile(r"[\w'’]+|[^\w'’]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class View:
    """The query as seen from some memories' side, and which memories (indices) it applies to;
    ``name``: the user's name where the view wrote it into the query (``name_discounts``);
    ``speaker``: the speaker whose turns a speaker's view is for."""

    text: str
    members: tuple[int, ...]
    name: str | None = None
    speaker: str | None = None


def user_name(texts: Iterable[str]) -> str | None:
    """The name the user's memories are written about, if one stands out: the proper name at
    least ``MIN_SUBJECT_STARTS`` of them start with as their subject, twice as often as any
    other. Transcript turns ("Name: ...") are left out: their speaker is not the user. Only
    first words are read (``openings.opening``), then the few candidates are looked for inside
    sentences. A word some text starts with as an owner ("Nora's car is ...") is a name too:
    no verb takes a possessive, and an agent that writes every fact as "Nora ..." may never
    write her name mid-sentence."""
    texts = list(texts)
    return named_user([opening(text) for text in texts], texts)


def named_user(
    openings: Sequence[Opening], texts: Sequence[str], inner: Sequence[frozenset[str]] | None = None
) -> str | None:
    """``user_name`` of ``texts``, which open as ``openings`` say (a recall's pool keeps them);
    ``inner``: each text's ``openings.inner_names``, if known (a pool keeps them too): then no
    text is searched for the names."""
    subjects = Counter([o.subject for o in openings if o.subject is not None])
    owners = {o.owner for o in openings if o.owner is not None}  # "Nora's car": proper nouns
    candidates = subjects.most_common(5)
    if inner is not None:
        inside = frozenset().union(*[w for w, o in zip(inner, openings, strict=True) if w and not o.turn])
        ranked = [(name, count) for name, count in candidates if name in owners or name in inside]
    else:
        joined = (
            "\n".join([t for t, o in zip(texts, openings, strict=True) if not o.turn]) if candidates else ""
        )
        ranked = [
            (name, count) for name, count in candidates if name in owners or written_inside(name, joined)
        ]
    if not ranked or ranked[0][1] < MIN_SUBJECT_STARTS:
        return None
    if len(ranked) > 1 and ranked[0][1] < 2 * ranked[1][1]:
        return None
    return ranked[0][0]


def as_user(query: str, name: str) -> str | None:
    """``query`` with its first-person words replaced by ``name`` (None if it has none)."""
    language = detect_language(query)
    table = _FIRST_PERSON["en"] | _FIRST_PERSON.get(language, {})
    out, changed = [], False
    for token in _TOKENS.findall(query):
        key = token.lower().replace("’", "'")
        if key in table:
            out.append(table[key].format(n=name))
            changed = True
        else:
            out.append(token)
    return "".join(out) if changed else None


def as_speaker(query: str, name: str) -> str | None:
    """``query`` in ``name``'s own first person ("Caroline's" → "my", "Caroline" → "I")."""
    spoken = re.sub(rf"\b{re.escape(name)}['’]s\b", "my", query)
    spoken = re.sub(rf"\b{re.escape(name)}\b", "I", spoken)
    return spoken if spoken != query else None


def views(
    query: str,
    memories: Sequence[Memory],
    heads: Sequence[str | None] | None = None,
    openings: Sequence[Opening] | Callable[[], Sequence[Opening]] | None = None,
    catalog: np.ndarray | None = None,
    inner: Sequence[frozenset[str]] | Callable[[], Sequence[frozenset[str]]] | None = None,
    head_codes: np.ndarray | None = None,
) -> list[View]:
    """The rewordings of ``query`` worth a second look, each with the memories it applies to:
    the one speaker the query names (their turns), and the user's name where the query speaks
    in the first person (the memories that name the user). Cheap tests come first: most
    queries name no speaker and the user's name is only looked for when "I" or "my" is there.
    ``heads`` and ``openings``: each memory's ``openings.turn_head`` and ``openings.opening``,
    if known (a pool keeps them: a recall gathers them, it does not work them out again);
    ``catalog``, ``inner``, ``head_codes``: which memories are catalog entries, each one's
    ``openings.inner_names`` and its head's ``vocabulary.SPEAKERS`` code, if known (a pool's
    columns: then the heads are compared as codes, not read). ``openings`` and ``inner`` may be
    given as functions that make them: they are read only for a query in the first person."""
    out = []
    written = dict.fromkeys(POSSESSIVE.sub("", w) for w in _CAPITALISED.findall(query))
    if head_codes is None:
        heads = _turn_heads(memories) if heads is None else heads
        present = set(heads)
        named = [name for name in written if name in present]
        if len(named) == 1 and (text := as_speaker(query, named[0])):
            out.append(
                View(text, tuple(i for i, head in enumerate(heads) if head == named[0]), speaker=named[0])
            )
    else:
        turns = {name: head_codes == code for name in written if (code := SPEAKERS.code(name)) is not None}
        named = [name for name, theirs in turns.items() if theirs.any()]
        if len(named) == 1 and (text := as_speaker(query, named[0])):
            out.append(View(text, tuple(np.flatnonzero(turns[named[0]]).tolist()), speaker=named[0]))
    if _in_first_person(query):
        if catalog is None:
            users = [i for i, m in enumerate(memories) if m.memory_type is not MemoryType.CATALOG]
        else:
            users = np.flatnonzero(~catalog).tolist()
        openings = openings() if callable(openings) else openings
        inner = inner() if callable(inner) else inner
        if openings is None or inner is None:
            texts = [memories[i].text for i in users]
            opened = [opening(t) for t in texts] if openings is None else [openings[i] for i in users]
            name = named_user(opened, texts)
        else:  # the pool's columns say all that is read: no text is
            name = named_user([openings[i] for i in users], (), [inner[i] for i in users])
        if name and (text := as_user(query, name)):
            about = _about_user(name, possessive=_says_my(query))
            members = tuple(i for i in users if about(memories[i].text))
            out.append(View(text, members, name))
    return [v for v in out if v.members]


def _about_user(name: str, possessive: bool) -> Callable[[str], bool]:
    """Does a memory name the user as what it is about? Asked "my ..." any mention will do;
    asked only "I"/"me", a memory that names her only as someone's relative or pet owner
    ("Nora's brother Callum lives in Aberdeen") is about that someone."""
    mention = re.compile(rf"\b{re.escape(name)}\b(?:['’]s\s+(\w+))?")

    def about(text: str) -> bool:
        if name not in text:  # no mention at all: the common case, without the expression
            return False
        found = [m.group(1) for m in mention.finditer(text)]
        return bool(found) and (possessive or any(w is None or w.lower() not in _SOMEONE_ELSE for w in found))

    return about


def _says_my(query: str) -> bool:
    mine = _MY["en"] | _MY.get(detect_language(query), frozenset())
    return any(t.lower() in mine for t in _TOKENS.findall(query))


_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")


def _turn_heads(memories: Sequence[Memory]) -> list[str | None]:
    """Per memory, what an event's text says before its first ": " (``openings.turn_head``).
    A name the query writes (no colon, no space) speaks a turn (``_speaks``) exactly when it
    is that turn's head: one pass over the pool instead of one per name."""
    return [turn_head(m) for m in memories]


def _speaks(memory: Memory, name: str) -> bool:
    """Is ``memory`` a turn ``name`` speaks ("Caroline: ...")? (The definition ``_turn_heads``
    answers for a whole pool at once; a property test holds them to each other.)"""
    return (
        memory.memory_type is MemoryType.EPISODIC
        and memory.text.startswith(name)
        and memory.text[len(name) : len(name) + 2] == ": "
    )


def _in_first_person(query: str) -> bool:
    table = _FIRST_PERSON["en"] | _FIRST_PERSON.get(detect_language(query), {})
    return any(t.lower().replace("’", "'") in table for t in _TOKENS.findall(query))


def blended(cosine: float, seen: float, weight: float) -> float:
    """A member's cosine once its view is heard: the mean of both readings (``weight`` for the
    view). The mean, not the better of the two: on LoCoMo dev the max gained +0.001 R@10, the
    mean +0.009 (a speaker's turns about the topic gain, the rest of their chatter does not)."""
    return (cosine + weight * seen) / (1.0 + weight)


def hear(
    cosine: np.ndarray,
    heard: np.ndarray,
    own: np.ndarray,
    members: Sequence[int],
    view: np.ndarray,
    has: np.ndarray,
    discounts: np.ndarray,
    weight: float,
) -> None:
    """One view heard, in place, over the pool's columns: each of ``members`` (distinct) with
    a cosine and a view cosine (``view``, per member, read where ``has``: the engine has one)
    gets the ``blended`` cosine of its own and the view's, less its ``discounts``. Relevance
    asks whether the memory bears on the question at all, so where it still reads the member's
    own cosine (``own``) it reads the better of the two readings (``heard``); the mean, less the
    name's own pull, is for ordering. The same float operations as ``blended`` per member, as
    arrays."""
    at = np.asarray(members, dtype=np.int64)
    mine = cosine[at]
    hears = has & ~np.isnan(mine)
    first = hears & own[at]
    heard[at] = np.where(first, np.where(view > mine, view, mine), heard[at])  # max(mine, view)
    own[at] &= ~hears
    mean = (mine + weight * (view - discounts)) / (1.0 + weight)
    cosine[at] = np.where(hears, mean, mine)


def name_discounts(named: Sequence[float]) -> list[float]:
    """What to take off each member's view cosine for the name the view wrote into the query:
    how much closer the member is to the bare name (``named``: its cosine with it) than the
    members' median. MiniLM reads a short text that starts with the name as mostly the name, so
    "Where did Sarah travel recently?" is nearer "Sarah lives in a terraced house in Leeds" than
    "Sarah asked for the away mode schedule while she was on holiday in Lisbon": every member
    names her, and the view should order them by the rest of the question. The median's share
    stays: it is what sets the user's memories above those not about her."""
    if not named:
        return []
    middle = median(named)
    return [value - middle for value in named]


def foreseen(query: str, speakers: Collection[str], user: str | None) -> list[str]:
    """The texts the views of ``query`` embed (each view's rewording; the bare name for the
    first-person view's ``name_discounts``) when the pool holds turns of ``speakers`` and names
    ``user`` as ``views`` would find it: known before the pool is, so the model can run beside
    the recall's first stages. The same tests as ``views``, on names instead of a pool."""
    out = []
    named = [
        name
        for name in dict.fromkeys(POSSESSIVE.sub("", w) for w in _CAPITALISED.findall(query))
        if name in speakers
    ]
    if len(named) == 1 and (text := as_speaker(query, named[0])):
        out.append(text)
    if user and _in_first_person(query) and (text := as_user(query, user)):
        out += [text, user]
    return out


class Acquaintances:
    """Per user, whom recent views were about: the speakers whose turns a view read, and the
    user's name. A recall's views depend on its pool, which is only known once the candidates
    are fetched; the people a user's questions name are the same from one recall to the next,
    so these predict the views (``foreseen``). A wrong guess costs a model run, never a result:
    the cosines are still taken for the views the pool gives."""

    def __init__(self, users: int = 256, speakers: int = 64) -> None:
        self._users, self._speakers = users, speakers
        self._known: OrderedDict[str, tuple[OrderedDict[str, None], list[str | None]]] = OrderedDict()
        self._lock = threading.Lock()

    def learn(self, user_id: str, seen: Sequence[View]) -> None:
        """Remember who ``seen`` (a recall's views) were about."""
        if not seen:
            return
        with self._lock:
            speakers, user = self._entry(user_id)
            for view in seen:
                if view.speaker is not None:
                    speakers[view.speaker] = None
                    speakers.move_to_end(view.speaker)
                    while len(speakers) > self._speakers:
                        speakers.popitem(last=False)
                if view.name is not None:
                    user[0] = view.name

    def foreseen(self, user_id: str, query: str) -> list[str]:
        """``foreseen`` with what ``user_id``'s recent views were about."""
        with self._lock:
            known = self._known.get(user_id)
            speakers, user = (set(known[0]), known[1][0]) if known else (set(), None)
        return foreseen(query, speakers, user)

    def _entry(self, user_id: str) -> tuple[OrderedDict[str, None], list[str | None]]:
        if user_id not in self._known:
            self._known[user_id] = (OrderedDict(), [None])
            while len(self._known) > self._users:
                self._known.popitem(last=False)
        self._known.move_to_end(user_id)
        return self._known[user_id]
