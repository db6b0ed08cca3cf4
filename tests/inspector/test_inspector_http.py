"""The inspector's access rules over real HTTP: same tokens as MCP, own memory only, CSRF-safe forms."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest

from atlas_mcp.domain.explain import declared
from atlas_mcp.domain.multipliers import Multipliers
from atlas_mcp.domain.ranking import FORMULA
from atlas_mcp.mcp.http import build_http_app
from atlas_mcp.mcp.server import build_server

from .conftest import BOB_TEXT, TOKENS, XSS_TEXT, Inspected

SARAH = {"Authorization": f"Bearer {TOKENS['sarah']}"}


def get(inspected: Inspected, path: str, **kwargs) -> httpx2.Response:
    return httpx2.get(inspected.url + path, timeout=30, **kwargs)


def form_token(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def sign_in(client: httpx2.Client, token: str) -> httpx2.Response:
    """Sign in through the login form, as a browser would: fetch it, echo its CSRF token, post."""
    csrf = form_token(client.get("/inspect/login").text)
    return client.post("/inspect/login", data={"csrf": csrf, "token": token})


@contextmanager
def signed_in(inspected: Inspected, token: str) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=inspected.url, timeout=30) as client:
        assert sign_in(client, token).status_code == 303
        yield client


def test_without_credentials_pages_redirect_to_the_sign_in_form(inspected: Inspected):
    response = get(inspected, "/inspect/search?q=hub")
    assert response.status_code == 303 and response.headers["location"].endswith("/inspect/login")
    login = get(inspected, "/inspect/login")
    assert login.status_code == 200 and 'name="token"' in login.text
    assert get(inspected, "/inspect/", cookies={"atlas_inspect": "bm90LWEtdG9rZW4="}).status_code == 303


def test_a_bearer_header_works_like_for_mcp_and_a_wrong_one_is_refused(inspected: Inspected):
    page = get(inspected, "/inspect/", headers=SARAH)
    assert page.status_code == 200 and 'id="whoami">sarah<' in page.text
    assert get(inspected, "/inspect/", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_the_sign_in_cookie_is_httponly_strict_and_scoped_to_the_inspector(inspected: Inspected):
    with httpx2.Client(base_url=inspected.url, timeout=30) as client:
        response = sign_in(client, TOKENS["sarah"])
    cookie = next(v for k, v in response.headers.multi_items() if k == "set-cookie" and "atlas_inspect=" in v)
    assert {"HttpOnly", "SameSite=strict", "Path=/inspect"} <= {p.strip() for p in cookie.split(";")}
    assert TOKENS["sarah"] not in cookie  # encoded, and never in a URL or a page


def test_sign_in_rejects_a_wrong_token_and_forged_forms(inspected: Inspected):
    with httpx2.Client(base_url=inspected.url, timeout=30) as client:
        csrf = form_token(client.get("/inspect/login").text)
        wrong = client.post("/inspect/login", data={"csrf": csrf, "token": "guess"})
        assert wrong.status_code == 401 and "not valid" in wrong.text
        no_csrf = client.post("/inspect/login", data={"token": TOKENS["sarah"]})
        assert no_csrf.status_code == 403
        cross_site = client.post(
            "/inspect/login", data={"csrf": csrf, "token": TOKENS["sarah"]},
            headers={"Origin": "https://evil.example"},
        )  # fmt: skip
        assert cross_site.status_code == 403
        assert "atlas_inspect=" not in cross_site.headers.get("set-cookie", "")


def test_a_signed_in_user_sees_only_their_own_memory(inspected: Inspected):
    with signed_in(inspected, TOKENS["sarah"]) as sarah:
        assert sarah.get("/inspect/").status_code == 200
        foreign = sarah.get(f"/inspect/memories/{inspected.bobs}")
        assert foreign.status_code == 404 and BOB_TEXT not in foreign.text
        ignored = sarah.get("/inspect/memories", params={"type": "semantic", "user": "bob"})
        assert "Bob" not in ignored.text and "firmware 3.0" in ignored.text
        search = sarah.get("/inspect/search", params={"q": "Bob bank PIN hint"})
        assert "cat&#39;s birthday" not in search.text and inspected.bobs not in search.text
        assert sarah.get("/mcp").status_code == 401  # the cookie opens the inspector, not MCP
    with signed_in(inspected, TOKENS["bob"]) as bob:
        assert BOB_TEXT.replace("'", "&#39;") in bob.get(f"/inspect/memories/{inspected.bobs}").text


def test_stored_text_is_escaped_and_pages_forbid_scripts(inspected: Inspected):
    page = get(inspected, f"/inspect/memories/{inspected.xss}", headers=SARAH)
    assert "<script>document.title" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    timeline = get(inspected, "/inspect/timeline", headers=SARAH)
    assert "<script>document.title" not in timeline.text and XSS_TEXT not in timeline.text
    assert "&lt;script&gt;document.title" in timeline.text


def test_search_shows_the_explain_breakdown_and_touches_nothing(inspected: Inspected):
    before = get(inspected, f"/inspect/memories/{inspected.firmware[2]}", headers=SARAH).text
    page = get(inspected, "/inspect/search", params={"q": "hub firmware"}, headers=SARAH)
    assert page.status_code == 200 and "relevance" in page.text
    assert "Hub firmware 3.0 release notes" in page.text
    assert '<td class="num" data-column="prior">0.8500</td>' in page.text, "the catalog prior is shown"
    assert "firmware 2.1" not in page.text  # superseded facts stay out of recall
    after = get(inspected, f"/inspect/memories/{inspected.firmware[2]}", headers=SARAH).text
    use_count = re.compile(r"use_count</dt><dd>(\d+)")
    assert use_count.search(before).group(1) == use_count.search(after).group(1) == "6"


def test_the_multipliers_shown_multiply_to_the_score_shown(inspected: Inspected):
    """A query that names a period shapes the score by time: the page's formula and columns
    say so, and on every row match × each factor shown is the score shown. (Last year holds
    the Porto set-up; what was written today lies outside it and still clears the floor.)"""
    page = get(
        inspected, "/inspect/search", params={"q": "what did Sarah do with the hub last year"}, headers=SARAH
    )
    assert page.status_code == 200
    assert FORMULA in page.text and "× time" in FORMULA
    labels = ["match", *(s.label for _, s in declared(Multipliers) if s.factor)]
    rows = re.findall(r"<tr>(.*?)</tr>", page.text, re.DOTALL)[1:]
    assert len(rows) >= 3
    times = []
    for row in rows:
        shown = {k: float(v) for k, v in re.findall(r'data-column="(\w+)">(?:<strong>)?([\d.]+)', row)}
        factors = [shown[label] for label in labels]
        assert math.prod(factors) == pytest.approx(shown["score"], rel=1e-3, abs=1e-4), row
        times.append(shown["time"])
    assert min(times) < 1.0 == max(times), "the period ranks memories outside it lower"


def test_memory_page_follows_the_supersession_chain_and_source_episodes(inspected: Inspected):
    old, mid, new = inspected.firmware
    page = get(inspected, f"/inspect/memories/{mid}", headers=SARAH).text
    chain = page[page.index('class="chain"') : page.index("</ol>", page.index('class="chain"'))]
    assert chain.index(old) < chain.index("(this one)") < chain.index(new)
    newest = get(inspected, f"/inspect/memories/{new}", headers=SARAH).text
    assert "Source episodes" in newest and inspected.episode in newest


def test_playbooks_show_their_record_and_the_timeline_groups_events_by_day(inspected: Inspected):
    playbooks = get(inspected, "/inspect/playbooks", headers=SARAH).text
    assert "Unstick a firmware update" in playbooks
    # rate = (4 + 1) / (4 + 1 + 2) = 5/7 → 1 + 0.25·(10/7 − 1) = 1.1071
    assert '<td class="num ok">4</td>' in playbooks and "<strong>1.1071</strong>" in playbooks
    timeline = get(inspected, "/inspect/timeline", headers=SARAH).text
    assert timeline.index("Zigbee dropouts") < timeline.index("flat in Porto")  # newest first
    assert timeline.count('<section class="day">') >= 2


@pytest.mark.parametrize(
    "path", ["/inspect/search", "/inspect/memories?type=catalog", "/inspect/static/inspector.css"]
)
def test_every_inspector_page_answers(inspected: Inspected, path: str):
    assert get(inspected, path, headers=SARAH).status_code == 200


def test_sign_out_needs_the_form_token_and_clears_the_cookie(inspected: Inspected):
    with signed_in(inspected, TOKENS["sarah"]) as sarah:
        assert sarah.post("/inspect/logout", data={"csrf": "forged"}).status_code == 403
        out = sarah.post("/inspect/logout", data={"csrf": form_token(sarah.get("/inspect/").text)})
        assert out.status_code == 303 and 'atlas_inspect=""' in out.headers["set-cookie"]
        assert sarah.get("/inspect/").status_code == 303


async def test_without_tokens_only_a_loopback_host_may_open_the_inspector(service, settings):
    open_settings = settings.model_copy(update={"insecure_no_auth": True, "user": "sarah"})
    app = build_http_app(build_server(service, "sarah"), open_settings, service=service)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://x") as client:
        local = await client.get("/inspect/", headers={"Host": "127.0.0.1:8765"})
        rebound = await client.get("/inspect/", headers={"Host": "attacker.example:8765"})
    assert local.status_code == 200 and 'id="whoami">sarah<' in local.text
    assert rebound.status_code == 403
