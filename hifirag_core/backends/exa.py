"""The Exa search API as a ``SearchBackend`` (key: ``EXA_API_KEY``).

Wire format (https://docs.exa.ai/reference/search): ``POST {base}/search`` with the header ``x-api-key``
and a JSON body ``{"query", "numResults" (1–100), "type": "auto", "includeDomains"?, "excludeDomains"?,
"startPublishedDate"?, "endPublishedDate"? (ISO 8601 date-times), "contents"?}``. The reply is
``{"requestId", "resolvedSearchType", "results": [{"id", "title", "url", "publishedDate", "author",
"highlights"?, ...}], "costDollars": {"total", ...}}``. This adapter asks for highlights (a short extract per
result, the snippet the URL filter reads) and charges the run what ``costDollars.total`` says (else
``limits.call_cost_usd.exa``).

Steering: site rules as ``includeDomains`` / ``excludeDomains``; a date window as ``startPublishedDate`` /
``endPublishedDate``. The stages after search enforce every rule again.
"""

from __future__ import annotations

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.search_common import JsonSearchClient, KeyedSearchBackend, domain_fields, hit
from hifirag_core.secrets import get_secret
from hifirag_core.types import SearchHit, SearchSteer

MAX_RESULTS = 100


def steered_body(steer: SearchSteer | None) -> dict[str, object]:
    """The request fields that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return {}
    body = domain_fields(steer, "includeDomains", "excludeDomains")
    if steer.window.after:
        body["startPublishedDate"] = f"{steer.window.after.isoformat()}T00:00:00.000Z"
    if steer.window.before:
        body["endPublishedDate"] = f"{steer.window.before.isoformat()}T23:59:59.999Z"
    return body


def reply_cost(data: dict) -> float | None:
    """``costDollars.total`` of a reply, when it states one."""
    cost = data.get("costDollars")
    total = cost.get("total") if isinstance(cost, dict) else None
    return float(total) if isinstance(total, (int, float)) else None


class ExaSearchBackend(KeyedSearchBackend):
    """Exa's search with highlights as snippets."""

    provider = "exa"
    path = "/search"

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results in Exa's order."""
        body = {"query": query, "numResults": max(1, min(num, MAX_RESULTS)), "type": "auto",
                "contents": {"highlights": {"numSentences": 2, "highlightsPerUrl": 1}}, **steered_body(steer)}
        data = self._client.request("POST", self._url, json=body, headers={"x-api-key": self._key.reveal()},
                                    cost_of=reply_cost)
        hits = []
        for r in data.get("results") or []:
            if isinstance(r, dict):
                highlights = r.get("highlights") if isinstance(r.get("highlights"), list) else []
                found = hit(r.get("title"), r.get("url"), " ".join(str(x) for x in highlights) or r.get("text"))
                if found:
                    hits.append(found)
        return hits[:num]


def build(cfg, guards, env) -> ExaSearchBackend:
    """The backend of the ``exa`` row (hifirag_core.backend_registry)."""
    client = JsonSearchClient("exa", guard=guards.guard("exa"), timeout_s=cfg.limits.search_timeout_s, paid=True,
                              call_cost_usd=guards.call_cost("exa"))
    return ExaSearchBackend(client, api_key=get_secret("exa_api_key", env), base_url=search_url(cfg, "exa"))
