"""Credentials stated as such: "my Gmail password is hunter2", "PIN: 4821", "Passwort lautet ...",
"我的密码是 abc123", "api key = 9f3b...". Pure, no I/O.

A keyword names the credential; up to a few words later ("for the wifi at my parents'") comes a
connector ("is", ":", "=", "ist", "est", "是", "は" ...) and then the value. The value must look
chosen, not like the rest of a sentence: "my password is stored in 1Password", "the password was
compromised", "change the password to something stronger" state none. Each connector after the
keyword is tried in turn, so "the password to my bank is Tr0ub4dor" finds the value after "is".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .stopwords import STOP_WORDS

QUOTES_OPEN = "\"'`«“‘„"
QUOTES_CLOSE = "\"'`»”’“"
SENTENCE_END = ".,;!?)。，！？"
MAX_OWNER_WORDS = 7  # "for the wifi at my parents' house"
WINDOW = 120  # characters after the keyword searched for a connector

# Words that follow "password is" in talk about a password rather than in stating one.
_TALK = frozenset(
    """stored saved kept written hidden shared required needed wrong incorrect invalid expired weak
    strong long short same different new old changed reset correct right secure safe easy hard
    simple complex complicated random unique case sensitive protected encrypted visible managed
    set updated there here on in at under inside taped somewhere lost forgotten missing ready ok
    okay fine too very also still now being not never always just only really pretty mine yours
    his hers theirs ours mandatory optional known unknown printed noted listed available generated
    sent emailed texted attached below above included something nothing anything everything great
    good bad terrible awful fun funny annoying impossible useless stronger weaker longer shorter
    better worse easier harder safer""".split()
)
_GRAMMAR_ENDINGS = ("ed", "ing", "ly", "ble", "ful", "ous", "ive", "less", "ment", "ish", "tion")
_ALL_STOP_WORDS = frozenset().union(*STOP_WORDS.values())
# Words that end the phrase naming whose credential it is: past one, "is" belongs to another clause.
_CLAUSE_WORDS = frozenset(
    "and but or so because then which that who when if since while und et y e и aber mais pero".split()
)


def varied(value: str) -> bool:
    """A key-like value: long, and mixing letters with digits (not a word or a number)."""
    return len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def chosen_password(value: str) -> bool:
    """Is this the password itself (not "stored", "weak", "in", "compromised")?"""
    if len(value) < 4:
        return False
    if any(not c.isalpha() for c in value) or value != value.lower():
        return True  # digits, symbols or capitals: chosen, not a word of the sentence
    return not (value in _TALK or value in _ALL_STOP_WORDS or value.endswith(_GRAMMAR_ENDINGS))


def chosen_strictly(value: str) -> bool:
    """For words that also mean something else ("clave", "pw"): only a value with digits,
    symbols or capitals counts."""
    return len(value) >= 4 and (any(not c.isalpha() for c in value) or value != value.lower())


def _quoted_or(valid: Callable[[str], bool]) -> Callable[[str, bool], bool]:
    return lambda value, quoted: quoted and len(value) >= 4 or valid(value)


@dataclass(frozen=True, slots=True)
class Statement:
    kind: str
    keyword: re.Pattern[str]
    value: re.Pattern[str]
    valid: Callable[[str, bool], bool]  # (value without quotes, was it quoted)
    bare: bool = False  # the value may follow the keyword with only a space ("PIN 4821")
    group: int | str = 0  # the part of ``value``'s match that is the secret


def _words(alternatives: str, unspaced: str = "") -> re.Pattern[str]:
    """Words of spaced scripts, bounded; words of scripts written without spaces (Chinese,
    Japanese, Korean: "我的密码是", "비밀번호는"), found anywhere."""
    spaced = r"(?<!\w)(?:" + alternatives + r")(?!\w)"
    return re.compile(spaced + (f"|{unspaced}" if unspaced else ""), re.IGNORECASE)


_PASSWORD_WORDS = (
    r"pass(?:word|phrase|code)|pwd|passwort|kennwort|mot de passe|mdp|contraseña|contrasena|senha"
    r"|parola d'ordine|wachtwoord|lösenord|losenord|adgangskode|passord|salasana|heslo|hasło|haslo"
    r"|jelszó|jelszava|parolă|şifre|şifrem|sifre|sifrem|пароль|паролем|كلمة المرور|كلمة السر|סיסמה"
    r"|पासवर्ड|mật khẩu|kata sandi"
)
_PASSWORD_UNSPACED = r"密码|密碼|口令|パスワード|暗証番号|비밀번호|암호|รหัสผ่าน"
_CJK = r"\u3000-\u9fff\uac00-\ud7af\uff00-\uffef"
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "password",
        _words(_PASSWORD_WORDS, _PASSWORD_UNSPACED),
        re.compile(r"[^\s\"'`«»“”‘’„" + _CJK + r"]{4,64}"),
        _quoted_or(chosen_password),
    ),
    Statement(
        "password",
        _words(r"pw|pass|clave|contraseña wifi|code d'accès|código de acceso|zugangscode|ключ доступа"),
        re.compile(r"[^\s\"'`«»“”‘’„" + _CJK + r"]{4,64}"),
        _quoted_or(chosen_strictly),
    ),
    Statement(
        "password",
        _words(r"login|log-in|sign[- ]in|credentials|account|anmeldung|identifiants|acceso|conta"),
        re.compile(r"\S{1,80}\s*/\s*(?P<v>[^\s\"'`]{4,64})"),
        lambda value, quoted: chosen_strictly(value),
        group="v",
    ),
    Statement(
        "PIN",
        _words(
            r"pin(?:[ -]?(?:code|nummer|number|numéro|número))?|geheimzahl|пин(?:-?код)?", r"PIN码|PIN 코드"
        ),
        re.compile(r"\d{4,8}(?![\d.,:/-]?\d)"),
        lambda value, _quoted: True,
        bare=True,
    ),
    Statement(
        "card security code",
        _words(r"cvv2?|cvc2?|card security code|código de seguridad|prüfnummer|cryptogramme"),
        re.compile(r"\d{3,4}(?![\d.,:/-]?\d)"),
        lambda value, _quoted: True,
        bare=True,
    ),
    Statement(
        "API token",
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?:api|access|auth|bearer|secret|private|client|personal access|app)[ _-]?"
            r"(?:key|token|secret)s?|clé (?:d'\s*)?api|clave (?:de )?(?:la )?api|chave (?:de )?api|api[- ]?schlüssel"
            r"|ключ api|api[- ]?ключ|токен(?: доступа)?|zugangstoken|jeton(?: d'accès)?)(?![A-Za-z0-9])"
            r"|api\s*(?:キー|密钥|密鑰|키|トークン)",
            re.IGNORECASE,
        ),
        re.compile(r"[A-Za-z0-9_\-.=+/]{16,512}"),
        lambda value, _quoted: varied(value),
    ),
    Statement(
        "secret setting",
        re.compile(
            r"(?<![A-Za-z0-9])[A-Z][A-Z0-9_]*(?:TOKEN|SECRET|API_?KEY|ACCESS_?KEY|PASSWORD|PASSWD|PWD)\b"
        ),
        re.compile(r"[^\s\"']{8,200}"),
        lambda value, _quoted: _setting_value(value),
    ),
)
_CONNECTOR = re.compile(
    r"\s*(?:(?<!\w)(?:is|was|ist|war|lautet|est|était|es|era|é|è|to|jest|är|er|on|это|равен)(?!\w)"
    r"|[:=：]|是|为|為|は|는|은|=>|->|[-–—](?=\s))\s*(?::\s*)?"
)
_SENTENCE_BREAK = re.compile(r"[.!?。！？](?:\s|$)|\n")


def _setting_value(value: str) -> bool:
    """A secret assigned to a variable, not a placeholder (``<your key>``, ``xxxxxxxx``, ``${VAR}``)."""
    if len(value) < 8 or len(set(value.lower())) < 5 or value[0] in "<${%":
        return False
    return any(c.isdigit() for c in value) or not value.isalnum() or value != value.lower()


def stated_secrets(text: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of each credential stated in ``text``; the span is the value only."""
    for statement in STATEMENTS:
        for keyword in statement.keyword.finditer(text):
            span = _value_after(text, keyword.end(), statement)
            if span is not None:
                yield statement.kind, *span


def _value_after(text: str, at: int, statement: Statement) -> tuple[int, int] | None:
    window = text[at : at + WINDOW]
    connectors = [m.span() for m in _CONNECTOR.finditer(window)]
    if statement.bare and window[:1].isspace():
        connectors.insert(0, (0, len(window) - len(window.lstrip())))
    for before, start in connectors:
        if not _owner(window[:before]):
            return None
        if (span := _value(window, start, statement)) is not None:
            return at + span[0], at + span[1]
    return None


def _owner(between: str) -> bool:
    """The words between the keyword and a connector name whose credential it is ("for the
    wifi"), within one clause."""
    if _SENTENCE_BREAK.search(between):
        return False
    words = re.findall(r"[\w'’.-]+", between)
    return len(words) <= MAX_OWNER_WORDS and not any(w.lower() in _CLAUSE_WORDS for w in words)


def _value(window: str, start: int, statement: Statement) -> tuple[int, int] | None:
    quoted = window[start : start + 1] in tuple(QUOTES_OPEN)
    begin = start + quoted
    match = statement.value.match(window, begin)
    if match is None:
        return None
    begin, end = match.span(statement.group)
    while end > begin and window[end - 1] in QUOTES_CLOSE + SENTENCE_END:
        end -= 1
    value = window[begin:end]
    return (begin, end) if value and statement.valid(value, quoted) else None
