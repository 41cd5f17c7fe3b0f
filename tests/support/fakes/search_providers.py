"""Fakes of the search providers of the backends table: SearXNG, DuckDuckGo's HTML search (reached by ddgs through
the fake as its proxy), Brave, Tavily, Exa and MMU-RAGent's FineWeb / ClueWeb22 search.

Each serves a pluggable ``search(query, n)`` (the default test web) in the provider's wire format, from
its public documentation (cited in each adapter's module docstring), and CHECKS the steering parameters
as the provider takes them: a malformed value gets the provider's own error status, and each request's
steering parameters are kept in ``steered``. Site rules given as the provider's own parameters filter
the results, as the real service would.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.search_servers import (
    GoogleSearchFake,
    ScrapingdogFake,
    site_filtered,
    split_site_terms,
)
from tests.support.fakes.server import FakeServer, Request, Response
from tests.support.fakes.web import SearchFn, default_web, search_lookup

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")
_LANG = re.compile(r"^(all|auto|[a-z]{2,3}(-[A-Za-z]{2,4})?)$")


def _valid_day(text: str) -> bool:
    if not _DAY.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


class _SearchFake(FakeServer):
    """What the fakes share: the content, the queries seen and the steering parameters of each request."""

    def __init__(self, *, search: SearchFn | None = None, latency: float = 0.0, rpm: int | None = None):
        super().__init__(latency=latency, rpm=rpm)
        self.search = search_lookup(search or default_web().search)
        self.queries: list[str] = []
        self.steered: list[dict[str, Any]] = []
        self._qlock = threading.Lock()

    def _seen(self, query: str, steer: dict[str, Any]) -> None:
        with self._qlock:
            self.queries.append(query)
            self.steered.append(steer)

    def _hits(self, query: str, n: int, wanted: list[str] = (), unwanted: list[str] = ()):  # type: ignore[assignment]
        bare, more_wanted, more_unwanted = split_site_terms(query)
        wanted, unwanted = [*wanted, *more_wanted], [*unwanted, *more_unwanted]
        if wanted or unwanted:
            return site_filtered(self.search(bare or query, 100), wanted, unwanted)[:n]
        return self.search(query, n)[:n]


class SearxngFake(_SearchFake):
    """A SearXNG instance: ``GET /search?q&format=json&pageno&language&time_range&categories``; 403 when
    ``format`` is not json (an instance whose settings do not enable it answers so), 400 for a bad value."""

    name = "searxng"
    PAGE = 10

    def route(self, request: Request) -> Response:
        if request.method != "GET" or request.path.rstrip("/") != "/search":
            return Response(404, "Not Found")
        if request.param("format") != "json":
            return Response(403, "Forbidden")
        q = request.param("q") or ""
        steer = {k: request.param(k) for k in ("language", "time_range") if request.param(k) is not None}
        if (steer.get("time_range") not in (None, "day", "week", "month", "year")
                or not _LANG.match(steer.get("language", "all")) or not q):
            return Response(400, "Bad Request")
        try:
            page = int(request.param("pageno", "1") or 1)
        except ValueError:
            return Response(400, "Bad Request")
        self._seen(q, steer)
        hits = self._hits(q, page * self.PAGE)[(page - 1) * self.PAGE: page * self.PAGE]
        return Response(200, {
            "query": q, "number_of_results": len(hits),
            "results": [{"url": h.link, "title": h.title, "content": h.snippet, "engine": "fake",
                         "engines": ["fake"], "positions": [i], "score": 1.0 / i, "category": "general",
                         "parsed_url": ["https", h.link.split("/")[2], "/", "", "", ""]}
                        for i, h in enumerate(hits, 1)],
            "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []})


class BraveFake(_SearchFake):
    """The Brave Search API: ``GET /res/v1/web/search`` with ``X-Subscription-Token``; ``count`` ≤ 20,
    ``offset`` ≤ 9, ``freshness`` pd|pw|pm|py|YYYY-MM-DDtoYYYY-MM-DD; 422 for a bad parameter, 401 for a bad
    token (Brave's ``ErrorResponse`` body)."""

    name = "brave"

    def __init__(self, *, api_key: str = "fake-brave-token", **kwargs: Any):
        super().__init__(**kwargs)
        self.api_key = api_key

    @staticmethod
    def error(status: int, code: str, detail: str) -> Response:
        return Response(status, {"type": "ErrorResponse", "error": {"id": "fake", "status": status, "code": code,
                                                                     "detail": detail, "meta": {}},
                                 "time": 0})

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        response = self.error(429, "RATE_LIMITED", "Request rate limit exceeded for plan")
        response.headers = {"X-RateLimit-Reset": f"{max(1, int(retry_after + 0.999))}"}
        return response

    def _bad_freshness(self, value: str | None) -> bool:
        if value is None or value in ("pd", "pw", "pm", "py"):
            return False
        start, sep, end = value.partition("to")
        return not (sep and _valid_day(start) and _valid_day(end) and start <= end)

    def route(self, request: Request) -> Response:
        if request.path.rstrip("/") != "/res/v1/web/search":
            return self.error(404, "NOT_FOUND", "Not found")
        if request.headers.get("x-subscription-token") != self.api_key:
            return self.error(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
        q = request.param("q") or ""
        steer = {k: request.param(k) for k in ("freshness", "search_lang") if request.param(k) is not None}
        try:
            count, offset = int(request.param("count", "20") or 20), int(request.param("offset", "0") or 0)
        except ValueError:
            return self.error(422, "VALIDATION", "Unable to validate request parameter(s)")
        if (not q or not 1 <= count <= 20 or not 0 <= offset <= 9 or self._bad_freshness(steer.get("freshness"))
                or not _LANG.match(steer.get("search_lang", "en"))):
            return self.error(422, "VALIDATION", "Unable to validate request parameter(s)")
        self._seen(q, steer)
        hits = self._hits(q, (offset + 1) * count)[offset * count:(offset + 1) * count]
        body: dict[str, Any] = {"type": "search", "query": {"original": q, "more_results_available": False}}
        if hits:
            body["web"] = {"type": "search", "family_friendly": True,
                           "results": [{"type": "search_result", "title": h.title, "url": h.link,
                                        "description": h.snippet, "is_source_local": False, "language": "en",
                                        "profile": {"name": h.link.split("/")[2]}} for h in hits]}
        return Response(200, body)


class TavilyFake(_SearchFake):
    """The Tavily API: ``POST /search`` with ``Authorization: Bearer``; checks ``max_results`` (0–20),
    ``include_domains`` / ``exclude_domains`` (lists of domains) and ``start_date`` / ``end_date`` (YYYY-MM-DD);
    400 for a bad body, 401 for a bad key."""

    name = "tavily"

    def __init__(self, *, api_key: str = "tvly-fake-key", **kwargs: Any):
        super().__init__(**kwargs)
        self.api_key = api_key

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path.rstrip("/") != "/search":
            return Response(404, {"detail": {"error": "Not Found"}})
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return Response(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("query"), str) or not body["query"]:
            return Response(400, {"detail": {"error": "Query is missing."}})
        steer = {k: body[k] for k in ("include_domains", "exclude_domains", "start_date", "end_date") if k in body}
        bad = (not 0 <= int(body.get("max_results", 5)) <= 20
               or any(not isinstance(steer.get(k, []), list) for k in ("include_domains", "exclude_domains"))
               or any(not _valid_day(str(steer[k])) for k in ("start_date", "end_date") if k in steer))
        if bad:
            return Response(400, {"detail": {"error": "Invalid request parameters."}})
        self._seen(body["query"], steer)
        hits = self._hits(body["query"], int(body.get("max_results", 5)), steer.get("include_domains", []),
                          steer.get("exclude_domains", []))
        return Response(200, {"query": body["query"], "follow_up_questions": None, "answer": None, "images": [],
                              "results": [{"title": h.title, "url": h.link, "content": h.snippet,
                                           "score": round(1 - i / 100, 3), "raw_content": None}
                                          for i, h in enumerate(hits)],
                              "response_time": 0.01, "request_id": "fake"})


class ExaFake(_SearchFake):
    """The Exa API: ``POST /search`` with ``x-api-key``; checks ``numResults`` (1–100), ``includeDomains`` /
    ``excludeDomains`` and ``startPublishedDate`` / ``endPublishedDate`` (ISO 8601 date-times); answers
    highlights when asked and ``costDollars``; 400 for a bad body, 401 for a bad key."""

    name = "exa"

    def __init__(self, *, api_key: str = "fake-exa-key", cost_per_search: float = 0.005, **kwargs: Any):
        super().__init__(**kwargs)
        self.api_key = api_key
        self.cost_per_search = cost_per_search

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path.rstrip("/") != "/search":
            return Response(404, {"error": "Not Found"})
        if request.headers.get("x-api-key") != self.api_key:
            return Response(401, {"requestId": "fake", "error": "Invalid API key", "tag": "INVALID_API_KEY"})
        body = request.json()
        if not isinstance(body, dict) or not body.get("query"):
            return Response(400, {"requestId": "fake", "error": "query is required", "tag": "INVALID_REQUEST_BODY"})
        steer = {k: body[k] for k in ("includeDomains", "excludeDomains", "startPublishedDate", "endPublishedDate")
                 if k in body}
        bad = (not 1 <= int(body.get("numResults", 10)) <= 100
               or any(not _ISO_TIME.match(str(steer[k])) for k in ("startPublishedDate", "endPublishedDate")
                      if k in steer))
        if bad:
            return Response(400, {"requestId": "fake", "error": "Invalid request", "tag": "INVALID_REQUEST_BODY"})
        self._seen(body["query"], steer)
        hits = self._hits(body["query"], int(body.get("numResults", 10)), steer.get("includeDomains", []),
                          steer.get("excludeDomains", []))
        highlights = isinstance(body.get("contents"), dict) and "highlights" in body["contents"]
        return Response(200, {"requestId": "fake", "resolvedSearchType": "neural", "results": [
            {"id": h.link, "title": h.title, "url": h.link, "publishedDate": None, "author": None,
             **({"highlights": [h.snippet], "highlightScores": [0.5]} if highlights else {})} for h in hits],
            "costDollars": {"total": self.cost_per_search}})


def fineweb_document(url: str, text: str, n: int) -> dict[str, Any]:
    """A FineWeb record as the service encodes it."""
    return {"text": text, "id": f"<urn:uuid:fake-{n:04d}>", "dump": "CC-MAIN-2024-10", "url": url,
            "date": "2024-03-01T12:00:00Z", "file_path": "s3://fake/000.parquet", "language": "en",
            "language_score": 0.95, "token_count": len(text.split())}


def clueweb_document(url: str, text: str, n: int) -> dict[str, Any]:
    """A ClueWeb22 record as the service encodes it."""
    return {"URL": url + "\n", "URL-hash": f"{n:032x}", "Language": "en", "ClueWeb22-ID": f"clueweb22-en0000-00-{n:05d}",
            "Clean-Text": text}


class MmuSearchFake(_SearchFake):
    """MMU-RAGent's search service: ``GET /fineweb/search?query&k`` (no key) and ``GET /search?query&k[&cw22_a]``
    with ``x-api-key``; ``{"results": [base64(JSON document)]}``. ``text(url)`` gives each document's text;
    ``corrupt`` adds that many results that are not base64 JSON."""

    name = "mmu-search"

    def __init__(self, *, text: Callable[[str], str | None], api_key: str = "fake-clueweb-key", corrupt: int = 0,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.text = text
        self.api_key = api_key
        self.corrupt = corrupt
        self.indexes: list[str] = []  # per request: fineweb, cw22_b or cw22_a

    def route(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        if request.method != "GET" or path not in ("/fineweb/search", "/search"):
            return Response(404, {"detail": "Not Found"})
        if path == "/search" and request.headers.get("x-api-key") != self.api_key:
            return Response(401, {"detail": "Invalid or missing API key"})
        query = request.param("query") or ""
        try:
            k = int(request.param("k", "10") or 10)
        except ValueError:
            return Response(422, {"detail": [{"loc": ["query", "k"], "msg": "value is not a valid integer"}]})
        if not query or k < 1:
            return Response(422, {"detail": [{"loc": ["query", "query"], "msg": "field required"}]})
        index = "fineweb" if path == "/fineweb/search" else ("cw22_a" if request.param("cw22_a") == "true" else "cw22_b")
        with self._qlock:
            self.indexes.append(index)
        self._seen(query, {})
        encode = fineweb_document if index == "fineweb" else clueweb_document
        results = []
        for n, h in enumerate(self.search(query, k), 1):
            text = self.text(h.link)
            if text:
                results.append(base64.b64encode(json.dumps(encode(h.link, text, n)).encode()).decode())
        results += ["not base64 at all!"] * self.corrupt
        return Response(200, {"results": results})


DUCKDUCKGO_HOST = "html.duckduckgo.com"


class DuckDuckGoFake(_SearchFake):
    """DuckDuckGo's HTML search, reached by ddgs's own client through this fake as its proxy (ddgs has
    ``https://html.duckduckgo.com/html/`` built in): ``POST /html/`` with the form fields ``q``, ``b``, ``l``
    (region, ``xx-xx``; ``wt-wt`` for none), ``df`` (``d``/``w``/``m``/``y``) and ``s`` (the offset of a later
    page: the first page holds 10 results, each later one 15), answered with the results page ddgs parses (a
    ``div.result__body`` per result: the ``h2`` title link, the URL, the ``a.result__snippet``); 400 for a
    malformed form. ``proxy_url`` and ``ca_file`` are what ddgs is given (``backends.ddgs_proxy``,
    ``backends.ddgs_ca_file``). A busy client is turned away with :meth:`challenge` (202 and the "anomaly"
    page DuckDuckGo sends)."""

    name = "duckduckgo"
    tunnel_hosts = frozenset({DUCKDUCKGO_HOST})
    FIRST_PAGE, LATER_PAGE = 10, 15

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        from tests.support.fakes.tls import make_certificates

        self.tls = make_certificates((DUCKDUCKGO_HOST, "duckduckgo.com"))

    @property
    def proxy_url(self) -> str:
        return self.base_url

    def stop(self) -> None:
        super().stop()
        import shutil

        shutil.rmtree(self.tls.ca_file.parent, ignore_errors=True)

    @property
    def ca_file(self) -> str:
        return str(self.tls.ca_file)

    @staticmethod
    def challenge() -> Response:
        """What DuckDuckGo answers a client it takes for a bot: 202 and a page with no results."""
        return Response(202, '<html><body><form id="challenge-form" action="//duckduckgo.com/anomaly.js">'
                             '<div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>'
                             "</form></body></html>", content_type="text/html; charset=UTF-8")

    def route(self, request: Request) -> Response:
        if request.headers.get("host", "").split(":")[0] != DUCKDUCKGO_HOST:
            return Response(421, "Misdirected Request")
        if request.method != "POST" or request.path != "/html/":
            return Response(404, "Not Found")
        form = request.form()
        q, region, df, offset = form.get("q", ""), form.get("l", ""), form.get("df", ""), form.get("s", "0")
        if not q or not re.match(r"^[a-z]{2}-[a-z]{2}$", region) or df not in ("", "d", "w", "m", "y") \
                or not offset.isdigit():
            return Response(400, "Bad Request")
        self._seen(q, {**({"l": region} if region != "wt-wt" else {}), **({"df": df} if df else {})})
        start = int(offset)
        size = self.FIRST_PAGE if start == 0 else self.LATER_PAGE
        hits = self._hits(q, start + size)[start:start + size]
        return Response(200, results_page(q, hits), content_type="text/html; charset=UTF-8")


def results_page(query: str, hits: list) -> str:
    """DuckDuckGo's HTML results page for ``hits`` (``tests.support.fakes.web`` hits: ``title``, ``link``, ``snippet``)."""
    from html import escape

    if not hits:
        return (f"<html><head><title>{escape(query)} at DuckDuckGo</title></head><body><div class=\"serp__results\">"
                "<div class=\"no-results\">No results.</div></div></body></html>")
    items = "".join(
        '<div class="result results_links results_links_deep web-result ">'
        '<div class="links_main links_deep result__body">'
        f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{escape(h.link)}">{escape(h.title)}</a></h2>'
        '<div class="result__extras"><div class="result__extras__url">'
        f'<a class="result__url" href="{escape(h.link)}">{escape(h.link.split("://", 1)[-1])}</a></div></div>'
        f'<a class="result__snippet" href="{escape(h.link)}">{escape(h.snippet)}</a>'
        '<div class="clear"></div></div></div>' for h in hits)
    return (f"<html><head><title>{escape(query)} at DuckDuckGo</title></head><body>"
            f'<div class="serp__results"><div id="links" class="results">{items}</div></div></body></html>')


# --- one fake per search row of the backends table --------------------------------------------------------


@dataclass(frozen=True)
class ProviderFake:
    """How the table's contract test (``tests/unit/backends/test_provider_table.py``) and ``tools/show_providers.py`` reach a
    search row's fake: ``make(search)`` a fake (not started) serving ``search(query, n)``; ``settings(fake)`` the
    ``--set`` pairs and ``env(fake)`` the keys that point the row's adapter at it."""

    make: Callable[[SearchFn], FakeServer]
    settings: Callable[[Any], list[str]]
    env: Callable[[Any], dict[str, str]] = lambda fake: {}


def _document_text(url: str) -> str:
    return f"The page at {url}\n\nIts text, as the search service stores it."


def _mmu(search: SearchFn) -> MmuSearchFake:
    return MmuSearchFake(search=search, text=_document_text)


def _mmu_at(name: str) -> Callable[[MmuSearchFake], list[str]]:
    return lambda fake: [f"backends.base_urls.{name}={fake.base_url}"]  # by row: each its own fake


# A search row of ``hifirag_core.backend_registry`` with a builder needs an entry here (the contract test fails
# without one); a new provider's fake and its entry are all the tests need of it.
PROVIDER_FAKES: dict[str, ProviderFake] = {
    "searxng": ProviderFake(lambda s: SearxngFake(search=s), lambda f: [f"backends.searxng_url={f.base_url}"]),
    "duckduckgo": ProviderFake(lambda s: DuckDuckGoFake(search=s), lambda f: [f"backends.ddgs_proxy={f.proxy_url}",
                                                                             f"backends.ddgs_ca_file={f.ca_file}"]),
    "brave": ProviderFake(lambda s: BraveFake(search=s), lambda f: [f"backends.base_urls.brave={f.base_url}"],
                          lambda f: {"BRAVE_API_KEY": f.api_key}),
    "tavily": ProviderFake(lambda s: TavilyFake(search=s), lambda f: [f"backends.base_urls.tavily={f.base_url}"],
                           lambda f: {"TAVILY_API_KEY": f.api_key}),
    "exa": ProviderFake(lambda s: ExaFake(search=s), lambda f: [f"backends.base_urls.exa={f.base_url}"],
                        lambda f: {"EXA_API_KEY": f.api_key}),
    "fineweb": ProviderFake(_mmu, _mmu_at("fineweb")),
    "clueweb22-b": ProviderFake(_mmu, _mmu_at("clueweb22-b"), lambda f: {"CLUEWEB_API_KEY": f.api_key}),
    "clueweb22-a": ProviderFake(_mmu, _mmu_at("clueweb22-a"), lambda f: {"CLUEWEB_API_KEY": f.api_key}),
    "gemini-grounding": ProviderFake(lambda s: GeminiFake(search_web=s), lambda f: [f"models.gemini_base_url={f.base_url}"],
                                     lambda f: {"GEMINI_API_KEY": f.api_key}),
    "google": ProviderFake(lambda s: GoogleSearchFake(search=s),
                           lambda f: [f"backends.google_search_base_url={f.base_url}"],
                           lambda f: {"GOOGLE_CSE_KEY": f.api_key, "GOOGLE_CSE_ID": f.engine_id}),
    "scrapingdog": ProviderFake(lambda s: ScrapingdogFake(search=s),
                                lambda f: [f"backends.scrapingdog_base_url={f.base_url}"],
                                lambda f: {"SCRAPINGDOG_API_KEY": f.api_key}),
}


def steering_seen(fake: Any) -> dict[str, Any]:
    """The steering the fake's last request carried as the provider's own parameters, with ``site:`` terms of its
    query (empty: none)."""
    steered = dict(fake.steered[-1]) if getattr(fake, "steered", None) else {}
    query = steered.pop("query", None) or (fake.queries[-1] if getattr(fake, "queries", None) else "")
    if "site:" in query:
        steered["site terms"] = " ".join(t for t in query.split() if "site:" in t)
    return steered
