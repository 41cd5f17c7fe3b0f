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

Steering parameters are checked as the real APIs would take them, and answered: Google's ``siteSearch``
(with ``siteSearchFilter`` ``i`` or ``e``), ``site:`` / ``-site:`` terms in ``q``, ``dateRestrict``
(``d|w|m|y`` and a number), ``sort=date:r:YYYYMMDD:YYYYMMDD`` and ``hl``; Scrapingdog's ``site:`` terms in
``query``, ``tbs=cdr:1,cd_min:M/D/YYYY,cd_max:M/D/YYYY`` and ``language``. A malformed one gets the
provider's 400. Site rules filter the results; each request's steering parameters are kept in ``steered``.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import urlsplit

from tests.support.fakes.gemini import google_error
from tests.support.fakes.server import FakeServer, Fault, Request, Response
from tests.support.fakes.web import PageSource, SearchFn, default_web, page_lookup, search_lookup

_SITE_TERM = re.compile(r"(?:^|\s)(-?)site:(\S+)")
_HL = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z]{2,4})?$")
_US_DAY = r"\d{1,2}/\d{1,2}/\d{4}"
_TBS = re.compile(rf"^cdr:1(?:,cd_min:{_US_DAY})?(?:,cd_max:{_US_DAY})?$")


def _host_matches(link: str, domain: str) -> bool:
    host = (urlsplit(link).hostname or "").lower()
    return host == domain or host.endswith("." + domain)


def split_site_terms(q: str) -> tuple[str, list[str], list[str]]:
    """The query without its site operators, the wanted sites and the excluded ones."""
    wanted = [d.lower() for neg, d in _SITE_TERM.findall(q) if not neg]
    unwanted = [d.lower() for neg, d in _SITE_TERM.findall(q) if neg]
    bare = _SITE_TERM.sub(" ", q).replace(" OR ", " ")
    return " ".join(bare.split()), wanted, unwanted


def site_filtered(hits: list, wanted: list[str], unwanted: list[str]) -> list:
    return [h for h in hits if (not wanted or any(_host_matches(h.link, d) for d in wanted))
            and not any(_host_matches(h.link, d) for d in unwanted)]


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
        self.steered: list[dict[str, str]] = []  # per request: the steering parameters it carried
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
        steer = {k: request.param(k) for k in ("siteSearch", "siteSearchFilter", "dateRestrict", "sort", "hl")
                 if request.param(k) is not None}
        bad = self._bad_steering(steer)
        if bad:
            return Response(400, google_error(400, "INVALID_ARGUMENT", f"Invalid Value: {bad}"))
        bare, wanted, unwanted = split_site_terms(q)
        if steer.get("siteSearch"):
            (wanted if steer.get("siteSearchFilter", "i") == "i" else unwanted).append(steer["siteSearch"].lower())
        with self._qlock:
            self.queries.append(q)
            self.steered.append(steer)
        if wanted or unwanted:
            hits = site_filtered(self.search(bare or q, 100), wanted, unwanted)[: min(100, start - 1 + num)]
        else:
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
    def _bad_steering(steer: dict[str, str]) -> str | None:
        if "siteSearchFilter" in steer and (steer["siteSearchFilter"] not in ("i", "e") or "siteSearch" not in steer):
            return "siteSearchFilter must be i or e, with siteSearch"
        if "siteSearch" in steer and not re.match(r"^[a-z0-9.-]+\.[a-z0-9-]+(/\S*)?$", steer["siteSearch"]):
            return "siteSearch"
        if "dateRestrict" in steer and not re.match(r"^[dwmy]\d+$", steer["dateRestrict"]):
            return "dateRestrict"
        if "sort" in steer and not re.match(r"^date(?::r:\d{8}:\d{8})?$", steer["sort"]):
            return "sort"
        if "hl" in steer and not _HL.match(steer["hl"]):
            return "hl"
        return None

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
        self.steered: list[dict[str, str]] = []  # per search request: the steering parameters it carried
        self._slock = threading.Lock()

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
        steer = {k: request.param(k) for k in ("tbs", "language", "lr") if request.param(k) is not None}
        if "tbs" in steer and not _TBS.match(steer["tbs"]):
            return Response(400, {"success": False, "message": f"invalid tbs {steer['tbs']!r}"})
        if "language" in steer and not _HL.match(steer["language"]):
            return Response(400, {"success": False, "message": "invalid language"})
        with self._slock:
            self.steered.append({**steer, "query": query})
        bare, wanted, unwanted = split_site_terms(query)
        found = (site_filtered(self.search(bare or query, 100), wanted, unwanted) if wanted or unwanted
                 else self.search(query, (page + 1) * results))
        hits = found[page * results : (page + 1) * results]
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
