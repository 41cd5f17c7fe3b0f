"""The Tavily search API as a ``SearchBackend`` (key: ``TAVILY_API_KEY``).

Wire format (https://docs.tavily.com/documentation/api-reference/endpoint/search): ``POST {base}/search``
with ``Authorization: Bearer <key>`` and a JSON body ``{"query", "max_results" (0–20), "search_depth":
"basic", "include_domains"?, "exclude_domains"?, "start_date"?, "end_date"? (YYYY-MM-DD)}``. The reply is
``{"query", "answer", "images", "results": [{"title", "url", "content", "score", "raw_content",
"published_date"?}], "response_time"}``. A basic search costs one credit. 401 for a bad key, 429 over the
rate limit, 432/433 when the plan's or pay-as-you-go credits are spent.

Steering: site rules as ``include_domains`` / ``exclude_domains``; a date window as ``start_date`` /
``end_date``. Tavily has no language parameter. The stages after search enforce every rule again.
"""

from __future__ import annotations

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.search_common import JsonSearchClient, KeyedSearchBackend, domain_fields, hit
from hifirag_core.secrets import get_secret
from hifirag_core.types import SearchHit, SearchSteer

MAX_RESULTS = 20


def steered_body(steer: SearchSteer | None) -> dict[str, object]:
    """The request fields that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return {}
    body = domain_fields(steer, "include_domains", "exclude_domains")
    if steer.window.after:
        body["start_date"] = steer.window.after.isoformat()
    if steer.window.before:
        body["end_date"] = steer.window.before.isoformat()
    return body


class TavilySearchBackend(KeyedSearchBackend):
    """Tavily's basic search, one request of at most 20 results."""

    provider = "tavily"
    path = "/search"

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` (at most 20) results in Tavily's order."""
        body = {"query": query, "max_results": max(1, min(num, MAX_RESULTS)), "search_depth": "basic",
                **steered_body(steer)}
        data = self._client.request("POST", self._url, json=body,
                                    headers={"Authorization": f"Bearer {self._key.reveal()}"})
        results = [r for r in data.get("results") or [] if isinstance(r, dict)]
        return [h for r in results if (h := hit(r.get("title"), r.get("url"), r.get("content")))][:num]


def build(cfg, guards, env) -> TavilySearchBackend:
    """The backend of the ``tavily`` row (hifirag_core.backend_registry)."""
    client = JsonSearchClient("tavily", guard=guards.guard("tavily"), timeout_s=cfg.limits.search_timeout_s, paid=True,
                              call_cost_usd=guards.call_cost("tavily"))
    return TavilySearchBackend(client, api_key=get_secret("tavily_api_key", env), base_url=search_url(cfg, "tavily"))
