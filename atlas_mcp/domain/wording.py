"""A fact's words as ``domain.gist`` reads them: each with its case, place and whether it
looks like a name.

Capitals mark names in most languages, not in German, where every noun has one: a German
capitalised word after an article ("der Termin", "die neue Adresse") is a noun. An acronym
is a name ("TC Blau-Weiß"); an opening light word is not ("Uses a standing desk").
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from .attributes import CHANGE_WORDS, LIGHT_WORDS, TITLES
from .lexical import _TOKEN, has_cjk

# A version, time or amount stays one token ("4.0.1", "9:30", "07700-900412"); else as indexed.
_WORD = re.compile(r"\d+(?:[.,:/-]\d+)+[a-z]*|" + _TOKEN.pattern)
_SENTENCE_MARK = re.compile(r"[.!?;:]")  # between two words: the second opens a sentence or clause
POSSESSIVE_SUFFIXES = ("'s", "’s", "'", "’")
GERMAN_ARTICLES = frozenset(
    "der die das den dem des ein eine einen einem einer eines beim im am zum zur vom ins kein keine "
    "mein meine meinen meinem meiner sein seine seinen seinem ihr ihre ihren ihrem unser unsere".split()
)


@lru_cache(maxsize=1 << 16)  # asked of every word of every fact read, and words recur
def has_digit(word: str) -> bool:
    """Does ``word`` hold a digit (``str.isdigit``: superscripts and other scripts' digits too)?"""
    return any(c.isdigit() for c in word)


class Token(NamedTuple):  # a tuple: a text's tokens are made ~3x faster than frozen dataclasses
    text: str  # as written
    word: str  # lower-cased, possessive dropped
    start: int  # character offset
    initial: bool  # opens a sentence or a clause
    name: bool  # capitalised as a name is (not as a German noun or an opening verb)


def tokens_of(text: str, language: str) -> list[Token]:
    out: list[Token] = []
    previous_end = 0
    for match in _WORD.finditer(text):
        raw = match.group()
        if text[match.end() : match.end() + 1] in ("'", "’"):  # "Lukas' Tochter"
            raw += "'"
        between = text[previous_end : match.start()]
        word = raw.lower()
        if word.endswith(POSSESSIVE_SUFFIXES):  # most words end otherwise: one test for all four
            for suffix in POSSESSIVE_SUFFIXES:
                if word.endswith(suffix) and len(word) > len(suffix) + 1:
                    word = word[: -len(suffix)]
                    break
        # A full stop after a title ("Dr. Hale") or an ordinal ("am 3. Dezember") ends nothing.
        not_an_end = (
            bool(out) and between.strip() == "." and (out[-1].word in TITLES or out[-1].word.isdigit())
        )
        initial = not out or (bool(_SENTENCE_MARK.search(between)) and not not_an_end)
        out.append(Token(raw, word, match.start(), initial, _name_like(raw, word, initial, out, language)))
        previous_end = match.end()
    return out


def _name_like(raw: str, word: str, initial: bool, before: list[Token], language: str) -> bool:
    """Is the word ``raw`` (read as ``word``) written as a name is, after the tokens ``before``?"""
    if not raw[:1].isupper() or has_cjk(raw) or word in TITLES:
        return False
    if len(raw) > 1 and raw.isupper():
        return True  # an acronym ("TC Altona", "IKEA")
    if language == "de" and not _after_article(before).isdisjoint(GERMAN_ARTICLES):
        return False  # "der Termin", "die neue Adresse": a noun, not a name
    # "Uses a standing desk", "Now ...": an opening word, not a name
    return not (initial and (word in LIGHT_WORDS or word in CHANGE_WORDS))


def _after_article(before: list[Token]) -> set[str]:
    """The words that may be the article before a noun: the previous word, and the one before
    it when the previous is not capitalised (the adjective in "die neue Adresse")."""
    previous = {before[-1].word} if before else set()
    if len(before) > 1 and not before[-1].text[:1].isupper():
        previous.add(before[-2].word)
    return previous


def is_name(token: Token) -> bool:
    return token.name
