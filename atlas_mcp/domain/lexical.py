"""Lexical analysis for every language: one analysis for what is indexed and what is asked.

A text is cut into Latin-like words and CJK runs. Words keep their surface form (lowercased by
the index) in ``terms``, and their Snowball stem, in the language the text is written in, in
``stems``; stop words of that language never reach ``stems``, so they cannot make matches.
Recall matches on ``stems``; ``terms`` only breaks ties towards the exact word. Chinese and
Japanese have no spaces: each run of one script becomes overlapping character bigrams, plus
single Han characters in ``stems``, which match whole words without a segmenter
(Elasticsearch's ``cjk`` analyzer does the same). A mixed text ("Atlas 帮我重置了 Halo Hub")
gets both, so it matches from either side.

The language is chosen from the text itself in microseconds: kana means Japanese, Hangul
Korean, Han Chinese; Latin-script words vote by their stop words and telltale letters
(ß, ñ, ç, …), English when nothing votes.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import filterfalse
from typing import Protocol

from .stopwords import CJK_STOP_CHARACTERS, STOP_WORDS

DEFAULT_LANGUAGE = "en"
SNOWBALL = {"en": "english", "de": "german", "es": "spanish", "fr": "french", "it": "italian",
            "pt": "portuguese", "nl": "dutch"}  # fmt: skip
LATIN_LANGUAGES = tuple(SNOWBALL)
# A Chinese or Japanese word is about 1.5 characters: a CJK character counts 2/3 of a word.
CJK_WORDS_PER_CHARACTER = 2 / 3

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HIRAGANA = "\u3040-\u309f"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_CJK = _HAN + _HIRAGANA + _KATAKANA
CJK_CHARACTERS = _CJK  # as a regex character class body: Han, hiragana, katakana
# One token: a run of one CJK script, a Hangul word, or a word (apostrophes inside kept, so
# "what's" and "l'homme" can be split by language, not into a stray "s" or "l").
_TOKEN = re.compile(
    rf"[{_HAN}]+|[{_HIRAGANA}]+|[{_KATAKANA}ー]+|[{_HANGUL}]+|[^\W_{_CJK}{_HANGUL}]+(?:['’][^\W_{_CJK}{_HANGUL}]+)*"
)
_CJK_RUN = re.compile(rf"[{_CJK}]")
_LETTER_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits, in text without CJK or Hangul
_LATIN_RUN = re.compile(rf"[^\W_{_CJK}{_HANGUL}]+")  # one that CJK and Hangul characters end
_HIRAGANA_RUN = re.compile(rf"[{_HIRAGANA}]+")
_HAN_CHAR = re.compile(rf"[{_HAN}]")
_KANA = re.compile(rf"[{_HIRAGANA}{_KATAKANA}]")
_HANGUL_CHAR = re.compile(rf"[{_HANGUL}]")
_TELLTALES = {"de": "ßäöü", "es": "ñ¿¡", "fr": "çœèêëîûù", "pt": "ãõ", "it": "ìò"}
_ANY_TELLTALE = re.compile("[" + "".join(_TELLTALES.values()) + "]")
_ELISIONS = frozenset(
    [
        "l",
        "d",
        "j",
        "m",
        "n",
        "s",
        "t",
        "c",
        "qu",
        "lorsqu",
        "puisqu",
        "jusqu",
        "quoiqu",
        "un",
        "dell",
        "all",
        "dall",
        "nell",
        "sull",
        "col",
    ]
)
_ENGLISH_CLITICS = frozenset(["s", "re", "ve", "ll", "d", "m", "t"])


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one text contributes to the index (or asks of it)."""

    language: str
    terms: tuple[str, ...]  # surface words and CJK bigrams
    stems: tuple[str, ...]  # stems of content words, CJK bigrams and Han characters


@lru_cache(maxsize=256)  # a recall reads its query's language three times
def detect_language(text: str) -> str:
    """ISO 639-1 code of the text's main language (see the module docstring for how)."""
    return _detect_language(text)


def stemmed_forms(text: str) -> frozenset[str]:
    """The Snowball stems, in ``text``'s language, of its words, less the words themselves
    ("camping" → "camp", "researching" → "research"); Chinese, Japanese and Korean words are
    not stemmed. Worked out for every memory a recall meets, so without a Python step per word
    (the language is read from the same runs of letters, and without the cache: a recall
    reading its rows would push its query's language out of it)."""
    lowered = text.lower()
    if _CJK_RUN.search(lowered) or _HANGUL_CHAR.search(lowered):
        language = _latin_language_for(_detect_language(text))
        runs = set(_LATIN_RUN.findall(lowered))
    else:
        found = _LETTER_RUN.findall(lowered)
        language, runs = _voted(found, lowered), set(found)
    known = _STEMS.setdefault(language, {})
    if len(known) > _STEMS_KEPT:
        # A new dictionary, not ``clear()``: another thread (a recall beside the preload) may
        # be between filling the old one and reading its words back from it.
        known = _STEMS[language] = {}
    for word in list(filterfalse(known.__contains__, runs)):
        known[word] = _stem(language, word)
    return frozenset(map(known.__getitem__, runs)) - runs


_STEMS: dict[str, dict[str, str]] = {}  # language → word → stem, for ``stemmed_forms``
_STEMS_KEPT = 200_000  # words per language (~20 MB at most); a vocabulary is rarely larger


def stem(word: str, language: str) -> str:
    """A lower-case word's Snowball stem in ``language`` (English for one without a stemmer);
    a CJK word as it is."""
    return word if has_cjk(word) else _stem(_latin_language_for(language), word)


def _detect_language(text: str) -> str:
    if _KANA.search(text):
        return "ja"
    if _CJK_RUN.search(text):
        return "zh" if _cjk_share(text) >= 0.5 else _latin_language(text)
    if _HANGUL_CHAR.search(text):
        return "ko"
    return _latin_language(text)


def analyse(text: str, language: str | None = None, *, drop_stop_words: bool = False) -> Analysis:
    """Index-side analysis (stop words stay in ``terms``); a query drops them everywhere."""
    language = language or detect_language(text)
    words = _latin_language_for(language)
    stop = STOP_WORDS.get(words, frozenset())
    terms: list[str] = []
    stems: list[str] = []
    for token in _TOKEN.findall(text):
        if _CJK_RUN.match(token):
            bigrams = list(_bigrams(token))
            terms.extend(bigrams)
            stems.extend(bigrams)
            if _HAN_CHAR.match(token):  # kana runs are mostly endings and particles
                stems.extend(c for c in token if c not in CJK_STOP_CHARACTERS)
            continue
        word = _strip_clitics(token.lower(), words)
        if not word:
            continue
        if word in stop and not _shouted(token):
            if not drop_stop_words:
                terms.append(word)
            continue
        terms.append(word)
        stems.append(_stem(words, word))
    return Analysis(language, tuple(terms), tuple(stems))


def content_words(text: str) -> list[str]:
    """The words of ``text`` without its language's stop words, in order (CJK runs whole)."""
    return list(_content_words(text))


@lru_cache(maxsize=256)  # a recall's plan and its relevance both read the query's
def _content_words(text: str) -> tuple[str, ...]:
    language = _latin_language_for(detect_language(text))
    stop = STOP_WORDS.get(language, frozenset())
    out = []
    for token in _TOKEN.findall(text):
        word = token if _CJK_RUN.match(token) else _strip_clitics(token, language)
        if word and (_CJK_RUN.match(word) or _shouted(word) or word.lower() not in stop):
            out.append(word)
    return tuple(out)


def word_count(text: str) -> float:
    """Length in words, fair to scripts without spaces: whitespace-separated words as ever,
    but a CJK character counts 2/3 of a word (so a Chinese sentence is not "one word")."""
    if _CJK_RUN.search(text) is None:  # recall counts ~200 candidates' words: skip the per-word scan
        return float(len(text.split()))
    count = 0.0
    for chunk in text.split():
        cjk = len(_CJK_RUN.findall(chunk))
        count += cjk * CJK_WORDS_PER_CHARACTER + (1.0 if len(chunk) > cjk else 0.0)
    return count


def _latin_language(text: str) -> str:
    lowered = text.lower()
    return _voted(_TOKEN.findall(lowered), lowered)


def _voted(tokens: Iterable[str], lowered: str) -> str:
    """The Latin-script language ``tokens`` (of the lower-cased text ``lowered``) vote for."""
    counted = Counter(tokens)
    votes = dict.fromkeys(LATIN_LANGUAGES, 0.0)
    for word in counted.keys() & _STOP_WORD_VOTES.keys():  # a Python step per stop word only
        for language in _STOP_WORD_VOTES[word]:
            votes[language] += counted[word]
    # Most texts hold no telltale letter: one scan says so instead of a search per letter
    # (8.2 -> 6.4 us a LoCoMo turn; recall votes once for every memory it meets first).
    if _ANY_TELLTALE.search(lowered):
        present = set(lowered)
        for language, letters in _TELLTALES.items():
            if not present.isdisjoint(letters):
                votes[language] += 1.5
    best = max(votes, key=lambda lang: (votes[lang], lang == DEFAULT_LANGUAGE))
    return best if votes[best] > votes[DEFAULT_LANGUAGE] else DEFAULT_LANGUAGE


def _stop_word_votes() -> dict[str, tuple[str, ...]]:
    """The languages a stop word votes for. A word English shares ("a", "in") or chat uses
    ("see ya", "get 'em") is no evidence of another language: counted for it, "Owns a e-reader
    bought in Austin" was Italian, and one such row gives an English owner a second vector
    space, so a second query embedding on every recall (~10 ms of CPU). One look-up a word,
    since every memory's language is read when recall first ranks it."""
    english = STOP_WORDS[DEFAULT_LANGUAGE]
    words = set().union(*(STOP_WORDS[language] for language in LATIN_LANGUAGES))
    return {
        word: (DEFAULT_LANGUAGE,)
        if word in english
        else tuple(language for language in LATIN_LANGUAGES if word in STOP_WORDS[language])
        for word in words
    }


_STOP_WORD_VOTES = _stop_word_votes()


def _latin_language_for(language: str) -> str:
    """The language whose stop words and stemmer apply to the Latin words of a text."""
    return language if language in SNOWBALL else DEFAULT_LANGUAGE


def has_cjk(text: str) -> bool:
    """Does ``text`` hold a Chinese or Japanese character (Han, hiragana, katakana)?"""
    return _CJK_RUN.search(text) is not None


def cjk_words(token: str) -> list[str]:
    """What a token holding Chinese or Japanese says, as words: each Han or katakana run cut
    into its bigrams (a one-character run kept whole), as the index cuts it; other-script runs
    whole, lower-cased; hiragana runs dropped (mostly particles and endings: の, は, している)."""
    out: list[str] = []
    for run in _TOKEN.findall(token):
        if not _CJK_RUN.match(run):
            out.append(run.lower())
        elif not _HIRAGANA_RUN.fullmatch(run):
            out.extend(_bigrams(run))
    return out


def _cjk_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(1 for c in letters if _CJK_RUN.match(c)) / len(letters) if letters else 0.0


def _bigrams(run: str) -> Iterable[str]:
    if len(run) == 1:
        return (run,)
    return (run[i : i + 2] for i in range(len(run) - 1))


def _strip_clitics(word: str, language: str) -> str:
    """ "what's" → "what", "don't" → "do", "l'homme" → "homme", "dell'arte" → "arte"."""
    if "'" not in word and "’" not in word:  # most words: no split (a query has ~12, a text more)
        return word
    parts = re.split(r"['’]", word)
    if len(parts) == 1:
        return word
    head, tail = parts[0], parts[-1]
    if head.lower() in _ELISIONS and language != "en":
        return tail
    if tail.lower() in _ENGLISH_CLITICS:
        return head[:-1] if tail.lower() == "t" and head.lower().endswith("n") else head
    return "".join(parts)  # "o'clock", "rock'n'roll": one word


def _shouted(token: str) -> bool:
    """ "IT", "US": an acronym that spells a stop word is not one."""
    return len(token) > 1 and token.isupper()


@lru_cache(maxsize=1 << 16)
def _stem(language: str, word: str) -> str:
    return _stemmer(language).stemWord(unicodedata.normalize("NFC", word))


class _Stemmer(Protocol):
    def stemWord(self, word: str) -> str: ...


_STEMMERS = threading.local()


def _stemmer(language: str) -> _Stemmer:
    """This thread's stemmer for ``language``. A snowball stemmer keeps the word it is working
    on in itself: two threads sharing one (a recall, and the preload reading facts ahead, or
    two HTTP sessions' recalls) garble each other's stems, or fail mid-word."""
    kept: dict[str, _Stemmer] | None = getattr(_STEMMERS, "by_language", None)
    if kept is None:
        kept = _STEMMERS.by_language = {}
    stemmer = kept.get(language)
    if stemmer is None:
        import snowballstemmer  # uses PyStemmer's C stemmers when installed

        stemmer = kept[language] = snowballstemmer.stemmer(SNOWBALL[language])
    return stemmer
