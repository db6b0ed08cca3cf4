"""Who a fact is about: a relative, friend or pet named with a possessive, or the user.

"Nora's sister Claire", "my son", "Lukas' Tochter", "Birgits Bruder", "la hermana de Lucía,
Carmen", "健二の娘の花", "伟的儿子": the relation, and the name it goes by. A name given with
"called"/"named" ("Mira's cat is called Pickle") is what the fact says, its value, not who it
is about. Names that open a fact ("Arjun started at ...", "Biscuit's vet") are kept too: two
facts opening with different names are about different people.
"""

from __future__ import annotations

import re

from .attributes import CHANGE_WORDS, POSSESSIVES, RELATION_OF, USER_WORDS
from .lexical import has_cjk
from .stopwords import STOP_WORDS
from .wording import POSSESSIVE_SUFFIXES, Token
from .wording import is_name as _is_name

_CJK_SUBJECT = re.compile(r"^(.*?)[はが]")
_CJK_RELATION = re.compile(r"[の的]([\u4e00-\u9fff]{1,2})")
# "called", "named": the relation's name follows within a few words.
NAMING_WORDS = frozenset(
    "called named call name heißt heisst genannt llama llamado llamada appelle appelé appelée "
    "chiama chiamato chiamata".split()
)
NAMING_REACH = 4
OWNER_POSITION = 4  # "la kiné de Claire": an owner after "de" is named within the first words


def subject_of(
    tokens: list[Token], text: str, cue_tokens: set[int]
) -> tuple[frozenset[str], frozenset[str], set[int]]:
    """Relations the fact is about, their names (or the fact's opening names), and the
    positions of those tokens (left out of the content words)."""
    if has_cjk(text):
        return _cjk_subject(text)
    relations, names, skipped = set(), set(), set()
    for i, token in enumerate(tokens):
        relation = RELATION_OF.get(token.word)
        if relation is None or not _possessed(tokens, i, text):
            continue
        relations.add(relation)
        skipped.add(i)
        if i > 0 and tokens[i - 1].name:  # the owner ("Birgits Bruder"): not who the fact is about
            skipped.add(i - 1)
        name = _attached_name(tokens, i, text)
        if name is not None and tokens[name - 1].word not in NAMING_WORDS:
            names.add(tokens[name].word)  # "sister Claire": who the fact is about
            skipped.add(name)  # ("the cat is called Pickle": Pickle is what it says, its value)
    for i, token in enumerate(tokens):
        possessor = token.text.endswith(POSSESSIVE_SUFFIXES) or _followed_by_relation_of(tokens, i, text)
        opening = token.initial and token.word not in CHANGE_WORDS
        if possessor and relations:  # "Nora's sister Claire": the fact is about Claire
            skipped.add(i)
            continue
        if _is_name(token) and (possessor or opening) and i not in skipped and i not in cue_tokens:
            if token.word in USER_WORDS or token.word in STOP_WORDS.get("en", ()):
                continue
            if opening and not possessor and _is_common_opening(tokens, i):
                continue
            names.add(token.word)
            if possessor:  # "Biscuit's vet": the owner; an opening word may be a noun ("Gym sessions")
                skipped.add(i)
    return frozenset(relations), frozenset(names), skipped


def naming(tokens: list[Token]) -> int | None:
    """Where a fact that only names someone names them ("... is called Pickle")."""
    return next(
        (i for i in range(len(tokens) - 1) if tokens[i].word in NAMING_WORDS and _is_name(tokens[i + 1])),
        None,
    )


def _is_common_opening(tokens: list[Token], i: int) -> bool:
    """An opening capitalised word that is not a name: an article, or a noun ("Router firmware")."""
    word = tokens[i].word
    return any(word in stop for stop in STOP_WORDS.values()) or word in CHANGE_WORDS


def _possessed(tokens: list[Token], i: int, text: str) -> bool:
    """ "Nora's sister", "my sister", "Lukas' Tochter", "la hermana de Lucía", "twin nephews",
    "a cat named Pickle"."""
    if _attached_name(tokens, i, text) is not None and any(
        t.word in NAMING_WORDS for t in tokens[i + 1 : i + 1 + NAMING_REACH]
    ):
        return True
    if i > 0:
        before = tokens[i - 1]
        if before.word in POSSESSIVES or before.text.endswith(POSSESSIVE_SUFFIXES):
            return True
        if before.name and before.word.endswith("s") and tokens[i].text[:1].isupper():
            return True  # German: "Birgits Bruder", "Anjas Sohn"
        if i > 1 and tokens[i - 2].text.endswith(POSSESSIVE_SUFFIXES):  # "Hannah's twin nephews"
            return True
    after = tokens[i + 1 : i + 3]
    return len(after) == 2 and after[0].word in ("de", "di", "von") and _is_name(after[1])


def _followed_by_relation_of(tokens: list[Token], i: int, text: str) -> bool:
    """ "la hermana de Lucía", "el cumpleaños de Diego": the owner named at the start."""
    return 1 < i <= OWNER_POSITION and tokens[i - 1].word in ("de", "di", "von", "du", "del")


def _attached_name(tokens: list[Token], i: int, text: str) -> int | None:
    """The name right after a relation noun ("sister Claire", "nephews: Oscar", "la hermana de
    Lucía, Carmen,")."""
    j = i + 1
    if j + 1 < len(tokens) and tokens[j].word in ("de", "di", "von") and _is_name(tokens[j + 1]):
        j += 2  # the owner; a name may follow after a comma
        if j < len(tokens) and text[tokens[j - 1].start :].find(",") == len(tokens[j - 1].text):
            return j if _is_name(tokens[j]) else None
        return None
    if j < len(tokens) and _is_name(tokens[j]) and tokens[j].word not in RELATION_OF:
        return j
    # "Mira's cat is called Pickle", "a cat named Pickle", "Le chien d'Élise s'appelle Filou"
    for k in range(j, min(j + NAMING_REACH, len(tokens) - 1)):
        if tokens[k].word in NAMING_WORDS and _is_name(tokens[k + 1]):
            return k + 1
    return None


def _cjk_subject(text: str) -> tuple[frozenset[str], frozenset[str], set[int]]:
    """A relation named with の/的 ("健二の娘の花は", "伟的儿子"), and the name it is known by:
    in Japanese the topic before は/が, in Chinese the owner before 的."""
    relations = {RELATION_OF[m.group(1)] for m in _CJK_RELATION.finditer(text) if m.group(1) in RELATION_OF}
    head = _CJK_SUBJECT.match(text)
    if head is None:
        owner = text.split("的")[0] if "的" in text else ""
        return frozenset(relations), frozenset([owner] if owner and not relations else []), set()
    parts = [p for p in head.group(1).split("の") if p]
    if relations:
        at = next((i for i, p in enumerate(parts) if p in RELATION_OF), len(parts) - 1)
        names = set(parts[at + 1 :][-1:])
    else:
        names = set(parts[-1:])
    return frozenset(relations), frozenset(names), set()
