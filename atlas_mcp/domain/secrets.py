"""Credentials in text: which kinds, where, and the text with them replaced. Pure, no I/O.

A memory is kept for years, recalled into prompts and exported; a credential in it leaks every
time it is. Each detector here is a shape credentials of that kind really have: a provider's
token prefix, a PEM armour line, a checksum random digits rarely pass (Luhn for cards, mod 97
for IBANs). Credentials *stated as such* ("my password is ...", in several languages) are found
by ``stated.py``. Ordinary talk about passwords, tokens or cards ("I reset my password", "design
tokens", "the card ending in 4242") is left alone. A finding names a kind and a span, never the
value: callers report the kind and drop the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .stated import stated_secrets
from .stated import varied as _varied


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # what was found, as a person would name it ("AWS access key")
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Shape:
    kind: str
    pattern: re.Pattern[str]
    group: int | str = 0  # the part of the match that is the secret
    valid: Callable[[str], bool] = lambda _value: True  # a checksum or shape test on that part


def _token(*alternatives: str) -> re.Pattern[str]:
    """A token shape that is not glued to other token characters on either side."""
    return re.compile(r"(?<![\w/+-])(?:" + "|".join(alternatives) + r")(?![\w/+=-])")


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


# Issuer prefixes and lengths of the card networks (Visa, Mastercard, Amex, Discover, JCB,
# Diners, UnionPay, Maestro): Luhn alone passes one random number in ten.
_CARD = re.compile(
    r"^(?:4\d{12}(?:\d{3}){0,2}|5[1-5]\d{14}|2(?:2[2-9]\d|[3-6]\d\d|7[01]\d|720)\d{12}|3[47]\d{13}"
    r"|6(?:011|5\d\d|4[4-9]\d)\d{12,15}|35(?:2[89]|[3-8]\d)\d{12,15}|3(?:0[0-5]|[689]\d)\d{11,16}"
    r"|62\d{14,17}|(?:5[06-9]|6\d)\d{10,17})$"
)


def card_number(value: str) -> bool:
    digits = re.sub(r"[ -]", "", value)
    return bool(_CARD.match(digits)) and len(set(digits)) > 1 and luhn(digits)


# Country -> IBAN length (the ISO 13616 registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18,
    "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def iban(value: str) -> bool:
    compact = re.sub(r"\s", "", value).upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact[2:4].isdigit():
        return False
    rotated = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rotated)) % 97 == 1


SHAPES: tuple[Shape, ...] = (
    Shape(
        "private key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*-----|$)"
            r"|PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC:\s*\S+|$)"
        ),
    ),
    Shape(
        "AWS access key", _token(r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}")
    ),
    Shape(
        "AWS secret access key",
        re.compile(
            r"(?i:aws|secret)[^\n]{0,60}?"
            r"(?<![A-Za-z0-9/+=])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        "v",
        _varied,
    ),
    Shape("Google API key", _token(r"AIza[0-9A-Za-z_\-]{35}")),
    Shape(
        "Google OAuth credential",
        _token(r"GOCSPX-[A-Za-z0-9_\-]{28}", r"ya29\.[0-9A-Za-z_\-]{20,}", r"1//0[0-9A-Za-z_\-]{40,}"),
    ),
    Shape(
        "Azure storage key",
        re.compile(r"(?i:AccountKey|SharedAccessKey)\s*=\s*(?P<v>[A-Za-z0-9+/]{40,}={0,2})"),
        "v",
    ),
    Shape("Azure SAS token", re.compile(r"[?&]sig=(?P<v>[A-Za-z0-9%+/]{30,}={0,2})"), "v"),
    Shape("Azure client secret", _token(r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}")),
    Shape(
        "GitHub token",
        _token(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}", r"github_pat_[A-Za-z0-9_]{60,255}"),
    ),
    Shape("GitLab token", _token(r"glpat-[A-Za-z0-9_\-]{20,}")),
    Shape("Slack token", _token(r"xox[abposr]-[A-Za-z0-9-]{10,}", r"xapp-\d-[A-Za-z0-9-]{20,}")),
    Shape(
        "Slack webhook URL",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}"),
    ),
    Shape("Anthropic API key", _token(r"sk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_\-]{40,}")),
    Shape(
        "OpenAI-style API key",
        _token(
            r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,}",
            r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}",
            r"sk-[A-Za-z0-9]{40,}",
        ),
    ),
    Shape("Stripe key", _token(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}", r"whsec_[A-Za-z0-9]{24,}")),
    Shape("Hugging Face token", _token(r"hf_[A-Za-z0-9]{30,}")),
    Shape("npm token", _token(r"npm_[A-Za-z0-9]{36}")),
    Shape("PyPI token", _token(r"pypi-AgE[A-Za-z0-9_\-]{50,}")),
    Shape("SendGrid key", _token(r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}")),
    Shape("Twilio key", _token(r"SK[0-9a-f]{32}")),
    Shape("Discord bot token", _token(r"[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,38}")),
    Shape("JSON Web Token", _token(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    Shape(
        "password in a URL",
        re.compile(r"\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@]{1,64}:(?P<v>[^\s@/]{3,128})@[\w.\-]+"),
        "v",
    ),
    Shape("card number", re.compile(r"(?<![\d-])(?P<v>\d(?:[ -]?\d){12,18})(?![\d-])"), "v", card_number),
)
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Z]{2})\d{2}(?=[ A-Z0-9]{11,40})")


def _ibans(text: str) -> Iterator[Finding]:
    """IBANs, grouped in fours or not: the country fixes the length, mod 97 checks the rest."""
    for match in _IBAN_START.finditer(text):
        length = IBAN_LENGTHS.get(match.group(1))
        if length is None:
            continue
        end, taken = match.start(), 0
        while end < len(text) and taken < length and _iban_char(text[end], taken):
            taken += text[end] != " "
            end += 1
        if taken == length and not text[end : end + 1].isalnum() and iban(text[match.start() : end]):
            yield Finding("IBAN", match.start(), end)


def _iban_char(ch: str, taken: int) -> bool:
    return ch.isascii() and (ch.isalnum() or (ch == " " and taken % 4 == 0))


def find_secrets(text: str) -> list[Finding]:
    """Every credential in ``text``, in order, without overlaps (the earlier, longer one wins)."""
    found = sorted(_all_findings(text), key=lambda f: (f.start, -(f.end - f.start)))
    kept: list[Finding] = []
    for finding in found:
        if not kept or finding.start >= kept[-1].end:
            kept.append(finding)
    return kept


def _all_findings(text: str) -> Iterator[Finding]:
    yield from _ibans(text)
    for shape in SHAPES:
        for match in shape.pattern.finditer(text):
            value = match.group(shape.group)
            if value and shape.valid(value):
                yield Finding(shape.kind, *match.span(shape.group))
    for kind, start, end in stated_secrets(text):
        yield Finding(kind, start, end)


def kinds(findings: list[Finding]) -> list[str]:
    """The kinds found, each once, in order of first appearance."""
    return list(dict.fromkeys(f.kind for f in findings))


def redact(text: str, findings: list[Finding]) -> str:
    """``text`` with each finding replaced by ``[redacted <kind>]``."""
    out, at = [], 0
    for finding in sorted(findings, key=lambda f: f.start):
        out += [text[at : finding.start], f"[redacted {finding.kind}]"]
        at = finding.end
    return "".join(out) + text[at:]
