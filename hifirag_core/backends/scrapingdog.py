"""Scrapingdog's Google Search API (a ``SearchBackend``) and Web Scraping API (a ``Fetcher``).

Wire formats:

* search (https://docs.scrapingdog.com/google-search-scraper-api): ``GET {base}/google?api_key=…&
  query=…&results=…&country=…&page=…&advance_search=false``; ``page`` counts from 0. The reply's
  ``organic_results[]`` hold ``title``, ``link``, ``snippet`` and ``rank``
  (https://docs.scrapingdog.com/google-search-scraper-api/google-response-breakdown/organic-result).
* scrape (https://docs.scrapingdog.com/web-scraping-api): ``GET {base}/scrape?api_key=…&url=…&
  dynamic=false``; the body is the page itself.

Steering (``SearchSteer``): Scrapingdog passes the query to Google, so site rules travel as
``site:`` / ``-site:`` terms of ``query``; a date window as Google's custom date range,
``tbs=cdr:1,cd_min:M/D/YYYY,cd_max:M/D/YYYY``; a non-English question's language as ``language``
(Google's interface language, https://docs.scrapingdog.com/google-search-scraper-api). The stages after
search enforce every rule again on each URL and page.

Scrapingdog answers 429 when the plan's concurrency is exceeded and 410 when its own fetch of the
target timed out; both, and 5xx, are retried. A 404 means the target page was not found.
"""

from __future__ import annotations

import json
from datetime import date

import httpx

from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.backends.http_fetch import classify_body, declared_charset, fetch_status_for_error
from hifirag_core.errors import BackendError, PermanentError, TransientError, error_status
from hifirag_core.limits import ProviderGuard
from hifirag_core.secrets import Secret, get_secret, redact
from hifirag_core.types import FetchResult, SearchHit, SearchSteer

_SCRAPINGDOG_RETRYABLE = frozenset({408, 410, 429})


def _retryable(status: int) -> bool:
    return status in _SCRAPINGDOG_RETRYABLE or status >= 500


class ScrapingdogSearchBackend:
    """Google results through Scrapingdog's search API."""

    provider = "scrapingdog"

    def __init__(self, *, api_key: Secret, guard: ProviderGuard, timeout_s: float,
                 base_url: str = "https://api.scrapingdog.com", country: str = "us",
                 call_cost_usd: float | None = None, http_client: httpx.Client | None = None):
        self._key = api_key
        self._guard = guard
        self._timeout = timeout_s
        self._url = base_url.rstrip("/") + "/google"
        self._country = country
        self._cost = call_cost_usd
        self._http = http_client or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _query(self, query: str, num: int, timeout: float, steer: dict[str, str]) -> dict:
        params = {"api_key": self._key.reveal(), "query": query, "results": num, "country": self._country,
                  "page": 0, "advance_search": "false", **steer}
        try:
            response = self._http.get(self._url, params=params, timeout=timeout)
        except httpx.TransportError as exc:
            raise transport_error("scrapingdog", exc) from None
        if response.status_code != 200:
            raise error_for_status("scrapingdog", response.status_code, response.headers, response.text,
                                   retryable=_retryable(response.status_code))
        try:
            data = response.json()
        except json.JSONDecodeError as exc:
            raise TransientError(redact(f"scrapingdog: unreadable response body: {exc}") or "") from None
        if not isinstance(data, dict):
            raise PermanentError("scrapingdog: the reply is not a JSON object")
        return data

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` organic results, in rank order."""
        query, extra = steered_request(query, steer)
        data, _ = self._guard.call(lambda t: self._query(query, num, t, extra), timeout=self._timeout, paid=True)
        if self._guard.budget is not None and self._cost:
            self._guard.budget.charge(usd=self._cost)
        results = [r for r in data.get("organic_results") or [] if isinstance(r, dict)]
        # "rank" is documented; fall back to the list order when a result lacks it.
        results.sort(key=lambda r: (r.get("rank") if isinstance(r.get("rank"), int) else 10**6))
        hits = []
        for r in results:
            link = r.get("link")
            if isinstance(link, str) and link:
                hits.append(SearchHit(title=str(r.get("title") or ""), url=link,
                                      snippet=str(r.get("snippet") or "").replace("\n", " ").strip()))
        return hits[:num]


def build_search(cfg, guards, env) -> ScrapingdogSearchBackend:
    """The backend of the ``scrapingdog`` search row (hifirag_core.backend_registry)."""
    return ScrapingdogSearchBackend(api_key=get_secret("scrapingdog_api_key", env), guard=guards.guard("scrapingdog"),
                                    timeout_s=cfg.limits.search_timeout_s, base_url=cfg.backends.scrapingdog_base_url,
                                    call_cost_usd=guards.call_cost("scrapingdog"))


def build_fetcher(cfg, guards, env, *, allow_loopback: bool = False) -> ScrapingdogFetcher:
    """The fetcher of the ``scrapingdog`` fetch row."""
    return ScrapingdogFetcher(api_key=get_secret("scrapingdog_api_key", env), guard=guards.guard("scrapingdog"),
                              timeout_s=cfg.limits.scrape_timeout_s, max_bytes=cfg.fetch.max_bytes,
                              base_url=cfg.backends.scrapingdog_base_url, call_cost_usd=guards.call_cost("scrapingdog"))


def _us_day(day: date) -> str:
    return f"{day.month}/{day.day}/{day.year}"


def steered_request(query: str, steer: SearchSteer | None) -> tuple[str, dict[str, str]]:
    """The query and the extra request parameters that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    from hifirag_core.backends.google_search import site_terms

    terms = [t for t in (site_terms(steer.sites.sites, exclude=False), site_terms(steer.sites.exclude, exclude=True))
             if t]
    params: dict[str, str] = {}
    window = steer.window
    if window.active:
        bounds = [f"cd_min:{_us_day(window.after)}" if window.after else "",
                  f"cd_max:{_us_day(window.before)}" if window.before else ""]
        params["tbs"] = ",".join(["cdr:1", *(b for b in bounds if b)])
    if steer.language:
        params["language"] = steer.language
    return " ".join([query, *terms]), params


class ScrapingdogFetcher:
    """Pages through Scrapingdog's scrape API; never raises, the status says what happened."""

    name = "scrapingdog"

    def __init__(self, *, api_key: Secret, guard: ProviderGuard, timeout_s: float, max_bytes: int,
                 base_url: str = "https://api.scrapingdog.com", dynamic: bool = False,
                 call_cost_usd: float | None = None, http_client: httpx.Client | None = None):
        self._key = api_key
        self._guard = guard
        self._timeout = timeout_s
        self._max_bytes = max_bytes
        self._url = base_url.rstrip("/") + "/scrape"
        self._dynamic = dynamic
        self._cost = call_cost_usd
        self._http = http_client or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _scrape(self, url: str, timeout: float) -> FetchResult:
        params = {"api_key": self._key.reveal(), "url": url, "dynamic": "true" if self._dynamic else "false"}
        try:
            with self._http.stream("GET", self._url, params=params, timeout=timeout) as response:
                if response.status_code == 404:
                    return FetchResult(url=url, status="not_found", fetcher=self.name, http_status=404,
                                       error="scrapingdog: the target page was not found")
                if response.status_code != 200:
                    body = response.read().decode("utf-8", "replace")
                    raise error_for_status("scrapingdog", response.status_code, response.headers, body,
                                           retryable=_retryable(response.status_code))
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self._max_bytes:
                        return FetchResult(url=url, status="too_large", fetcher=self.name, http_status=200,
                                           content_type=response.headers.get("content-type"),
                                           error=f"page larger than {self._max_bytes} bytes")
                    chunks.append(chunk)
                content_type = response.headers.get("content-type")
        except httpx.TransportError as exc:
            raise transport_error("scrapingdog", exc) from None
        body = b"".join(chunks)
        kind, status, error = classify_body(content_type, body)
        return FetchResult(url=url, status=status, fetcher=self.name, final_url=url, http_status=200,
                           content_type=content_type, body=body if status == "ok" else None, kind=kind,
                           encoding=declared_charset(content_type), error=error)

    def fetch(self, url: str) -> FetchResult:
        """The page at ``url`` as Scrapingdog returns it."""
        try:
            result, _ = self._guard.call(lambda t: self._scrape(url, t), timeout=self._timeout, paid=True)
        except BackendError as exc:
            return FetchResult(url=url, status=fetch_status_for_error(exc), fetcher=self.name,
                               http_status=getattr(exc, "status_code", None),
                               error=f"{error_status(exc)}: {redact(str(exc))}")
        if self._guard.budget is not None and self._cost:
            self._guard.budget.charge(usd=self._cost)
        return result
