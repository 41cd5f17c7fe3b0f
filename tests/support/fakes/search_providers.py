"""Fakes of the search providers of the backends table that speak HTTP: SearXNG, Brave, Tavily, Exa and
MMU-RAGent's FineWeb / ClueWeb22 search; and a stand-in for the ddgs client (ddgs reaches DuckDuckGo
through its own HTTP client, which cannot be pointed at 127.0.0.1, so its boundary is the client object).

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
from datetime import date
from typing import Any

from tests.support.fakes.search_servers import site_filtered, split_site_terms
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


class FakeDDGS:
    """Stands in for ``ddgs.DDGS``: records each ``text()`` call's arguments; ``faults`` is a list of exceptions
    raised by the next calls, in order (ddgs's own exception classes)."""

    def __init__(self, *, search: SearchFn | None = None, faults: list[BaseException] | None = None):
        self.search = search_lookup(search or default_web().search)
        self.calls: list[dict[str, Any]] = []
        self.faults = list(faults or [])
        self.timeouts: list[float] = []
        self._lock = threading.Lock()

    def factory(self, timeout: float) -> FakeDDGS:
        """What the adapter calls for a client (``DDGS(timeout=...)``)."""
        with self._lock:
            self.timeouts.append(timeout)
        return self

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        with self._lock:
            self.calls.append({"query": query, **kwargs})
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            raise fault
        if kwargs.get("region") not in (None, "wt-wt") and not re.match(r"^[a-z]{2}-[a-z]{2}$", kwargs["region"]):
            raise ValueError(f"bad region {kwargs['region']}")
        if kwargs.get("timelimit") not in (None, "d", "w", "m", "y"):
            raise ValueError(f"bad timelimit {kwargs['timelimit']}")
        bare, wanted, unwanted = split_site_terms(query)
        n = int(kwargs.get("max_results") or 10)
        hits = site_filtered(self.search(bare, 100), wanted, unwanted)[:n] if wanted or unwanted else self.search(query, n)
        if not hits:
            from ddgs.exceptions import DDGSException

            raise DDGSException("No results found.")
        return [{"title": h.title, "href": h.link, "body": h.snippet} for h in hits]
