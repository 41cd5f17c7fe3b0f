"""Fakes of the Google Programmable Search JSON API and of Scrapingdog (search and scrape).

Google (https://developers.google.com/custom-search/v1/reference/rest/v1/cse/list):
``GET /customsearch/v1?key&cx&q&num&start``; ``num`` 1–10, ``start`` 1-based, at most 100
results; ``items[]`` (``kind``, ``title``, ``htmlTitle``, ``link``, ``displayLink``, ``snippet``,
``htmlSnippet``), no ``items`` key when nothing matched; Google's JSON error body.

Scrapingdog (https://docs.scrapingdog.com/google-search-scraper-api,
https://docs.scrapingdog.com/web-scraping-api): ``GET /google?api_key&query&results&country&page``
returns ``organic_results[]`` (``title``, ``link``, ``displayed_link``, ``snippet``, ``rank``);
``GET /scrape?api_key&url&dynamic`` returns the page itself.

Both serve pluggable content: a ``search(query, n)`` callable and, for scraping, ``page(url)``.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from tests.fakes.gemini import google_error
from tests.fakes.server import FakeServer, Fault, Request, Response
from tests.fakes.web import PageSource, SearchFn, default_web, page_lookup, search_lookup


class GoogleSearchFake(FakeServer):
    """The Custom Search JSON API over a pluggable ``search`` function."""

    name = "google-cse"

    def __init__(self, *, search: SearchFn | None = None, api_key: str = "fake-cse-key",
                 engine_id: str = "fake-cx-0123", latency: float = 0.0, rpm: int | None = None):
        super().__init__(latency=latency, rpm=rpm)
        self.search = search_lookup(search or default_web().search)
        self.api_key = api_key
        self.engine_id = engine_id
        self.queries: list[str] = []
        self._qlock = threading.Lock()

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        """The per-minute quota error."""
        return Response(429, google_error(429, "RESOURCE_EXHAUSTED",
                                          "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'."),
                        {"Retry-After": str(max(1, int(retry_after + 0.999)))})

    def route(self, request: Request) -> Response:
        if request.method != "GET" or request.path.rstrip("/") != "/customsearch/v1":
            return Response(404, google_error(404, "NOT_FOUND", "Not Found"))
        if request.param("key") != self.api_key:
            return Response(400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                            "errors": [{"message": "API key not valid.", "domain": "global",
                                                        "reason": "badRequest"}], "status": "INVALID_ARGUMENT"}})
        q, cx = request.param("q"), request.param("cx")
        if not q or cx != self.engine_id:
            return Response(400, google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument."))
        try:
            num = int(request.param("num", "10") or 10)
            start = int(request.param("start", "1") or 1)
        except ValueError:
            return Response(400, google_error(400, "INVALID_ARGUMENT", "Invalid Value"))
        if not 1 <= num <= 10 or start < 1 or start + num > 101:
            return Response(400, google_error(400, "INVALID_ARGUMENT", "Invalid Value"))
        with self._qlock:
            self.queries.append(q)
        hits = self.search(q, min(100, start - 1 + num))
        page = hits[start - 1 : start - 1 + num]
        body: dict = {
            "kind": "customsearch#search",
            "url": {"type": "application/json",
                    "template": "https://www.googleapis.com/customsearch/v1?q={searchTerms}&num={count?}&start={startIndex?}&cx={cx?}&key={key?}&alt=json"},
            "queries": {"request": [{"title": f"Google Custom Search - {q}", "totalResults": str(len(hits)),
                                     "searchTerms": q, "count": num, "startIndex": start, "inputEncoding": "utf8",
                                     "outputEncoding": "utf8", "safe": "off", "cx": cx}]},
            "context": {"title": "fake engine"},
            "searchInformation": {"searchTime": 0.01, "formattedSearchTime": "0.01",
                                  "totalResults": str(len(hits)), "formattedTotalResults": str(len(hits))},
        }
        if page:
            body["items"] = [{
                "kind": "customsearch#result", "title": h.title, "htmlTitle": h.title, "link": h.link,
                "displayLink": urlsplit(h.link).hostname or "", "snippet": h.snippet, "htmlSnippet": h.snippet,
                "formattedUrl": h.link,
            } for h in page]
        return Response(200, body)

    @staticmethod
    def daily_limit() -> Fault:
        """403 dailyLimitExceeded: not worth retrying today."""
        return Fault("status", Response(403, {"error": {"code": 403, "message": "This API has a daily limit.",
                                                        "errors": [{"domain": "usageLimits", "reason": "dailyLimitExceeded"}],
                                                        "status": "PERMISSION_DENIED"}}))

    @staticmethod
    def user_rate_limit() -> Fault:
        """403 userRateLimitExceeded: retryable."""
        return Fault("status", Response(403, {"error": {"code": 403, "message": "User Rate Limit Exceeded",
                                                        "errors": [{"domain": "usageLimits", "reason": "userRateLimitExceeded"}],
                                                        "status": "PERMISSION_DENIED"}}))


class ScrapingdogFake(FakeServer):
    """Scrapingdog's Google search API and scrape API over pluggable content."""

    name = "scrapingdog"

    def __init__(self, *, search: SearchFn | None = None, page: PageSource | None = None,
                 api_key: str = "fake-scrapingdog-key", latency: float = 0.0, rpm: int | None = None):
        super().__init__(latency=latency, rpm=rpm)
        web = default_web()
        self.search = search_lookup(search or web.search)
        self.page = page_lookup(page if page is not None else web.page)
        self.api_key = api_key

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        """Concurrency / rate limit reached."""
        return Response(429, {"success": False, "message": "Concurrent connection limit reached"},
                        {"Retry-After": str(max(1, int(retry_after + 0.999)))})

    def route(self, request: Request) -> Response:
        if request.param("api_key") != self.api_key:
            return Response(401, {"success": False, "message": "Invalid API key"})
        path = request.path.rstrip("/")
        if request.method == "GET" and path == "/google":
            return self._google(request)
        if request.method == "GET" and path == "/scrape":
            return self._scrape(request)
        return Response(404, {"success": False, "message": "Not found"})

    def _google(self, request: Request) -> Response:
        query = request.param("query")
        if not query:
            return Response(400, {"success": False, "message": "query is required"})
        results = max(1, min(100, int(request.param("results", "10") or 10)))
        page = max(0, int(request.param("page", "0") or 0))
        hits = self.search(query, (page + 1) * results)[page * results : (page + 1) * results]
        return Response(200, {
            "search_information": {"query_displayed": query, "total_results": len(hits)},
            "organic_results": [{"title": h.title, "displayed_link": h.link, "snippet": h.snippet, "link": h.link,
                                 "rank": page * results + i + 1} for i, h in enumerate(hits)],
            "pagination": {"current": str(page + 1)},
        })

    def _scrape(self, request: Request) -> Response:
        url = request.param("url")
        if not url:
            return Response(400, {"success": False, "message": "url is required"})
        found = self.page(url)
        if found is None:
            return Response(404, {"success": False, "message": "Page not found"})
        return Response(found.status, found.body, content_type=found.content_type)

    @staticmethod
    def target_timeout() -> Fault:
        """410: Scrapingdog's own fetch of the target timed out (retryable)."""
        return Fault("status", Response(410, {"success": False, "message": "Request timeout"}))

    @staticmethod
    def concurrency_limit(retry_after_s: int = 1) -> Fault:
        """429: too many concurrent requests for the plan."""
        return Fault("status", Response(429, {"success": False, "message": "Concurrent connection limit reached"},
                                        {"Retry-After": str(retry_after_s)}))

    @staticmethod
    def out_of_credits() -> Fault:
        """403: the account has no credits left (not retryable)."""
        return Fault("status", Response(403, {"success": False, "message": "Request limit reached"}))
