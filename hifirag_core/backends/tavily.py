"""The Tavily search API as a ``SearchBackend`` through its client, ``tavily-python`` (key: ``TAVILY_API_KEY``).

Wire format (https://docs.tavily.com/documentation/api-reference/endpoint/search), which
``TavilyClient(api_key, api_base_url=...).search(...)`` sends: ``POST {base}/search`` with ``Authorization: Bearer
<key>`` and a JSON body ``{"query", "max_results" (0–20), "search_depth": "basic", "include_domains"?,
"exclude_domains"?, "start_date"?, "end_date"? (YYYY-MM-DD)}``. The reply is ``{"query", "answer", "images",
"results": [{"title", "url", "content", "score", "raw_content", "published_date"?}], "response_time"}``. A basic
search costs one credit. The client raises its own errors, which the adapter turns into the run's: 429
(``UsageLimitExceededError``, the rate limit) is retried with backoff; 401 (a bad key), 400, and 403/432/433 (the
plan's or pay-as-you-go credits spent, ``ForbiddenError``) fail at once; a 5xx, a timeout or a failed connection
is retried.

Steering: site rules as ``include_domains`` / ``exclude_domains``; a date window as ``start_date`` /
``end_date``. The stages after search enforce every rule again.
"""

from __future__ import annotations

from typing import Any

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.backends.search_common import KeyedClientBackend, charge, domain_fields, hit
from hifirag_core.errors import CallTimeoutError, PermanentError, TransientError
from hifirag_core.secrets import get_secret, redact
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


class TavilySearchBackend(KeyedClientBackend):
    """Tavily's basic search, one request of at most 20 results, behind the run's guard."""

    provider = "tavily"

    def _once(self, query: str, num: int, steering: dict[str, Any], timeout: float) -> dict:
        import requests
        from tavily import TavilyClient
        from tavily.errors import BadRequestError, ForbiddenError, InvalidAPIKeyError, UsageLimitExceededError
        from tavily.errors import TimeoutError as TavilyTimeout

        # a client per call: its requests session is not shared between the stage's threads
        with TavilyClient(api_key=self._key.reveal(), api_base_url=self._url) as client:
            try:
                return client.search(query, max_results=num, search_depth="basic", timeout=timeout, **steering)
            except UsageLimitExceededError as exc:
                raise TransientError(redact(f"tavily: HTTP 429: rate limit ({exc})") or "", rate_limited=True) from None
            except ForbiddenError as exc:
                raise PermanentError(redact(f"tavily: HTTP 403/432/433: the plan's or pay-as-you-go credits are "
                                            f"spent, or the key may not search ({exc})") or "") from None
            except InvalidAPIKeyError as exc:
                raise PermanentError(redact(f"tavily: HTTP 401: the key was refused ({exc})") or "") from None
            except BadRequestError as exc:
                raise PermanentError(redact(f"tavily: HTTP 400: {exc}") or "") from None
            except TavilyTimeout as exc:
                raise CallTimeoutError(f"tavily: {exc}") from None
            except requests.HTTPError as exc:
                response = exc.response
                raise error_for_status("tavily", response.status_code, response.headers, response.text) from None
            except requests.RequestException as exc:
                raise transport_error("tavily", exc) from None

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` (at most 20) results in Tavily's order."""
        size = max(1, min(num, MAX_RESULTS))
        data, _ = self._guard.call(lambda t: self._once(query, size, steered_body(steer), t), timeout=self._timeout,
                                   paid=True)
        charge(self._guard, self._cost)
        results = [r for r in data.get("results") or [] if isinstance(r, dict)]
        return [h for r in results if (h := hit(r.get("title"), r.get("url"), r.get("content")))][:num]


def build(cfg, guards, env) -> TavilySearchBackend:
    """The backend of the ``tavily`` row (hifirag_core.backend_registry)."""
    return TavilySearchBackend(api_key=get_secret("tavily_api_key", env), base_url=search_url(cfg, "tavily"),
                               guard=guards.guard("tavily"), timeout_s=cfg.limits.search_timeout_s,
                               call_cost_usd=guards.call_cost("tavily"))
