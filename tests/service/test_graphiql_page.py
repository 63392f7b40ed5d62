"""GraphiQL's page at `GET /graphql`, in a real headless Chromium (Debian's `chromium`, which
`make test` installs when missing): a subscription run from the page shows a match's views to
its end, with the token from the Headers pane; every file comes from the server itself.

Also the page's files as served (digests, gzip, caching) and the vendored copies' checksums."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from service.api.graphiql import CONTENT_SECURITY_POLICY, FOLDER
from tests.service.arena_client import Api
from tests.service.browser import chromium_page

SUBSCRIPTION = "subscription ($m: ID!) { matchUpdates(matchId: $m) { status version mySeat winners } }"


def page_files(api: Api) -> list[str]:
    html = api.http.get("/graphql", headers={"Accept": "text/html"}).text
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_the_page_loads_only_files_of_this_server(api: Api) -> None:
    response = api.http.get("/graphql", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "https:" not in CONTENT_SECURITY_POLICY
    files = [f for f in page_files(api) if not f.startswith("data:")]
    assert len(files) == 5, files  # GraphiQL's script and stylesheet, React, ReactDOM, ours
    for url in files:
        assert url.startswith("/graphiql/") and "?v=" in url, url  # this server's, by digest
        plain = api.http.get(url, headers={"Accept-Encoding": "identity"})
        assert plain.status_code == 200, url
        assert plain.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert plain.headers["content-type"].startswith(("text/javascript", "text/css"))
        digest = url.split("?v=")[1]
        assert hashlib.sha256(plain.content).hexdigest().startswith(digest)
        assert plain.headers["etag"] == f'"{digest}"'
        zipped = api.http.get(url, headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip" and zipped.content == plain.content  # httpx unzips
        assert int(zipped.headers["content-length"]) < len(plain.content)
        again = api.http.get(url, headers={"If-None-Match": plain.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    for name in ("vendor/../../../graphiql.py", "index.html", "README.md", "vendor/SOURCES", "nope.js"):
        assert api.http.get(f"/graphiql/{name}").status_code == 404, name


def test_a_browser_gets_the_page_also_with_a_query_to_fill_in(api: Api) -> None:
    answer = api.http.get("/graphql", params={"query": "{ __typename }"}, headers={"Accept": "text/html"})
    assert answer.headers["content-type"].startswith("text/html") and "<title>GraphiQL" in answer.text
    answer = api.http.get("/graphql", params={"query": "{ __typename }"})  # */*: a client, not a browser
    assert answer.json() == {"data": {"__typename": "Query"}}


def test_vendored_files_are_the_pinned_ones() -> None:
    vendor = FOLDER / "vendor"
    sums = dict(reversed(line.split("  ", 1)) for line in (vendor / "SHA256SUMS").read_text().splitlines())
    assert {"graphiql.min.js", "graphiql.min.css", "react.production.min.js", "react-dom.production.min.js"} <= set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, f"{name} changed: run refresh.sh"
    assert {p.name for p in vendor.iterdir()} == {*sums, "SHA256SUMS", "SOURCES"}
    sources = (vendor / "SOURCES").read_text()
    for package in ("graphiql@4.1.2", "react@18.3.1", "react-dom@18.3.1"):
        assert re.search(rf"^{re.escape(package)} sha512-\S+$", sources, re.M), package
        assert package in (FOLDER / "README.md").read_text()


# ----------------------------------------------------------------------------- in Chromium


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    with chromium_page(tmp_path / "profile") as page:
        yield page


def response_pane(page: Any) -> str:
    """The text the response pane shows (CodeMirror indents with no-break spaces)."""
    text: str = page.evaluate("document.querySelector('.graphiql-response .result-window').innerText")
    return text.replace("\xa0", " ")


def test_graphiql_runs_a_subscription_and_shows_a_match_to_its_end(api: Api, browser_page: Any) -> None:
    page = browser_page
    token, _ = api.register()
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000)
    api.add_house_bot(token, match_id, "RANDOM")
    api.add_house_bot(token, match_id, "HEURISTIC")

    page.goto(f"{api.base}/graphql?query={quote(SUBSCRIPTION)}&variables={quote(json.dumps({'m': match_id}))}")
    page.wait_for_selector(".graphiql-execute-button[aria-label^='Execute']", timeout=30_000)
    # the bot's token where a user puts it: the Headers pane
    page.click(".graphiql-editor-tools button[data-name=headers]")
    page.evaluate(
        "(headers) => document.querySelector('.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror')"
        ".CodeMirror.setValue(headers)",
        json.dumps({"Authorization": f"Bearer {token}"}),
    )
    page.click(".graphiql-execute-button")
    page.wait_for_function("() => document.querySelector('.result-window').innerText.includes('\"WAITING\"')",
                           timeout=30_000)
    assert '"mySeat": null' in response_pane(page)  # not seated yet

    seat = api.join(token, match_id)["mySeat"]
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"

    # the last view shown is the end of the match, as the seated bot sees it; the
    # subscription then completed (the button runs again instead of stopping)
    page.wait_for_function("() => document.querySelector('.result-window').innerText.includes('\"FINISHED\"')",
                           timeout=30_000)
    page.wait_for_selector(".graphiql-execute-button[aria-label^='Execute']", timeout=30_000)
    shown = json.loads(response_pane(page))["data"]["matchUpdates"]
    assert shown == {"status": "FINISHED", "version": final["version"], "mySeat": seat, "winners": final["winners"]}

    # GraphiQL's query over HTTP worked too: the schema it fetched is in the documentation pane
    page.click("button[aria-label='Show Documentation Explorer']")
    page.wait_for_function("() => /subscription:\\s*Subscription/.test(document.querySelector('.graphiql-doc-explorer')"
                           "?.innerText ?? '')", timeout=30_000)

    origin = urlsplit(api.base)
    assert page.seen["sockets"] == [api.ws_url]
    others = [u for u in page.seen["requests"] if urlsplit(u)[:2] != origin[:2] and not u.startswith("data:")]
    assert others == [], "the page loaded something from elsewhere"
    assert page.seen["problems"] == []
