"""A SearXNG instance (self-hosted metasearch) as a ``SearchBackend``; no key.

Wire format (https://docs.searxng.org/dev/search_api.html): ``GET {instance}/search?q=…&format=json&
pageno=1`` with optional ``language`` (a code such as ``fr``, or ``all``), ``time_range`` (``day``,
``week``, ``month``, ``year``), ``categories`` and ``safesearch``. The reply is ``{"query",
"number_of_results", "results": [{"url", "title", "content", "engine", "engines", "score",
"publishedDate"?}], "answers", "suggestions", "unresponsive_engines": [[engine, reason]]}``. An instance
answers 403 to ``format=json`` unless its settings list ``json`` under ``search.formats``. SearXNG pages
about ten results at a time (``pageno``), as its engines do.

Steering: a question's language as ``language``; a date window reaching today as the shortest
``time_range`` that covers it; site rules as ``site:`` / ``-site:`` terms of ``q`` (SearXNG passes them to
its engines). The stages after search enforce every rule again.
"""

from __future__ import annotations

from datetime import date

from hifirag_core.backends.search_common import JsonSearchClient, hit, paged_hits, site_query, window_span
from hifirag_core.errors import PermanentError
from hifirag_core.types import SearchHit, SearchSteer

_SPANS = ((1, "day"), (7, "week"), (31, "month"), (366, "year"))
MAX_PAGES = 5


def steered_request(query: str, steer: SearchSteer | None, today: date | None = None) -> tuple[str, dict[str, str]]:
    """The query and the extra parameters that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    params: dict[str, str] = {}
    if steer.language:
        params["language"] = steer.language
    span = window_span(steer.window, today or date.today(), _SPANS)
    if span:
        params["time_range"] = span
    return site_query(query, steer), params


class SearxngSearchBackend:
    """Results of a SearXNG instance's JSON API, several pages when ``num`` asks for more than one holds."""

    provider = "searxng"

    def __init__(self, client: JsonSearchClient, *, instance_url: str):
        self._client = client
        self._url = instance_url.rstrip("/") + "/search"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results in the instance's order, each URL once."""
        q, extra = steered_request(query, steer)

        def page(n: int) -> tuple[list[SearchHit], bool]:
            data = self._client.request("GET", self._url, params={"q": q, "format": "json", "pageno": n,
                                                                   "categories": "general", **extra})
            results = [r for r in data.get("results") or [] if isinstance(r, dict)]
            return [h for r in results if (h := hit(r.get("title"), r.get("url"), r.get("content")))], True

        return paged_hits(page, num, MAX_PAGES)


def build(cfg, guards, env) -> SearxngSearchBackend:
    """The backend of the ``searxng`` row (hifirag_core.backend_registry)."""
    if not cfg.backends.searxng_url:
        raise PermanentError("backends.search=searxng needs the instance's URL: set backends.searxng_url "
                             "(e.g. --set backends.searxng_url=http://127.0.0.1:8888)")
    client = JsonSearchClient("searxng", guard=guards.guard("searxng"), timeout_s=cfg.limits.search_timeout_s,
                              paid=False, call_cost_usd=guards.call_cost("searxng"))
    return SearxngSearchBackend(client, instance_url=cfg.backends.searxng_url)
