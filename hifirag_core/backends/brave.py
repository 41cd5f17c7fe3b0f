"""The Brave Search API as a ``SearchBackend`` (key: ``BRAVE_API_KEY``).

Wire format (https://api-dashboard.search.brave.com/app/documentation/web-search/get-started):
``GET {base}/res/v1/web/search?q=…&count=…&offset=…`` with the headers ``Accept: application/json`` and
``X-Subscription-Token: <key>``; ``count`` is at most 20, ``offset`` counts pages (0–9). The reply is
``{"type": "search", "query": {...}, "web": {"type": "search", "results": [{"title", "url",
"description", "age"?, "page_age"?, ...}]}}``; no ``web`` key when nothing matched. Errors are
``{"type": "ErrorResponse", "error": {"code", "detail", "status"}}``; 429 when the plan's rate is
exceeded (``X-RateLimit-Reset`` says when).

Steering: a date window as ``freshness`` (``pd``/``pw``/``pm``/``py`` for a window reaching today, else
``YYYY-MM-DDtoYYYY-MM-DD``); a question's language as ``search_lang``; site rules as ``site:`` /
``-site:`` terms of ``q``. The stages after search enforce every rule again.
"""

from __future__ import annotations

from datetime import date

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.search_common import JsonSearchClient, hit, site_query, window_days, window_span
from hifirag_core.secrets import Secret, get_secret
from hifirag_core.types import SearchHit, SearchSteer

PAGE_SIZE = 20
MAX_OFFSET = 9
_SPANS = ((1, "pd"), (7, "pw"), (31, "pm"), (366, "py"))


def steered_request(query: str, steer: SearchSteer | None, today: date | None = None) -> tuple[str, dict[str, str]]:
    """The query and the extra parameters that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    today = today or date.today()
    params: dict[str, str] = {}
    if steer.window.active:
        start, end = window_days(steer.window, today)
        params["freshness"] = window_span(steer.window, today, _SPANS) or f"{start}to{end}"
    if steer.language:
        params["search_lang"] = steer.language
    return site_query(query, steer), params


class BraveSearchBackend:
    """Brave's web results, several pages when ``num`` > 20."""

    provider = "brave"
    path = "/res/v1/web/search"

    def __init__(self, client: JsonSearchClient, *, api_key: Secret, base_url: str):
        self._client = client
        self._key = api_key
        self._url = base_url.rstrip("/") + self.path

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` web results in Brave's order."""
        q, extra = steered_request(query, steer)
        hits: list[SearchHit] = []
        for offset in range(MAX_OFFSET + 1):
            size = min(PAGE_SIZE, num - len(hits))
            if size <= 0:
                break
            data = self._client.request("GET", self._url, params={"q": q, "count": size, "offset": offset, **extra},
                                        headers={"Accept": "application/json",
                                                 "X-Subscription-Token": self._key.reveal()})
            web = data.get("web") if isinstance(data.get("web"), dict) else {}
            results = [r for r in web.get("results") or [] if isinstance(r, dict)]
            hits.extend(h for r in results if (h := hit(r.get("title"), r.get("url"), r.get("description"))))
            if len(results) < size:
                break
        return hits[:num]


def build(cfg, guards, env) -> BraveSearchBackend:
    """The backend of the ``brave`` row (hifirag_core.backend_registry)."""
    client = JsonSearchClient("brave", guard=guards.guard("brave"), timeout_s=cfg.limits.search_timeout_s, paid=True,
                              call_cost_usd=guards.call_cost("brave"))
    return BraveSearchBackend(client, api_key=get_secret("brave_api_key", env), base_url=search_url(cfg, "brave"))
