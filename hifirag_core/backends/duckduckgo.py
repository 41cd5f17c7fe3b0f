"""DuckDuckGo through the ``ddgs`` package (a metasearch client, no key) as a ``SearchBackend``.

``DDGS(timeout=…).text(query, region=…, safesearch=…, timelimit=…, max_results=…, backend=…)`` returns
``[{"title", "href", "body"}]`` (https://pypi.org/project/ddgs/). ddgs talks to DuckDuckGo's own pages with
its own HTTP client (primp), so it cannot be pointed at a local fake: the tests inject the client object
(``client_factory``) and check the arguments it is called with.

DuckDuckGo rate-limits busy clients. ddgs raises ``RatelimitException`` (or a ``DDGSException`` whose message
says ratelimit / 202 / 429) for it: the adapter turns that into a rate-limited ``TransientError``, so the
run's guard backs off (``limits.retries``, ``retry_base_delay_s``; ``limits.provider_rpm.duckduckgo`` keeps
the pace at 20 a minute by default) and, when the retries are spent, the search row's error says
"rate-limited". ``TimeoutException`` is a timeout; ddgs's "No results found." is an empty result (ddgs 9
also reports a refused request this way: such a query's row has no results, not an error).

Steering: a question's language as ``region`` (``fr`` → ``fr-fr``; unknown: ``wt-wt``, no region); a date
window reaching today as ``timelimit`` (``d``, ``w``, ``m``, ``y``); site rules as ``site:`` / ``-site:``
terms of the query. The stages after search enforce every rule again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from hifirag_core.backends.search_common import hit, site_query, window_span
from hifirag_core.errors import CallTimeoutError, PermanentError, TransientError
from hifirag_core.limits import ProviderGuard
from hifirag_core.secrets import redact
from hifirag_core.types import SearchHit, SearchSteer

_SPANS = ((1, "d"), (7, "w"), (31, "m"), (366, "y"))
# DuckDuckGo's regions are country-language pairs; the usual one for each language
_REGIONS = {"ar": "xa-ar", "cs": "cz-cs", "da": "dk-da", "de": "de-de", "el": "gr-el", "en": "us-en", "es": "es-es",
            "fi": "fi-fi", "fr": "fr-fr", "he": "il-he", "hu": "hu-hu", "it": "it-it", "ja": "jp-jp", "ko": "kr-kr",
            "nl": "nl-nl", "no": "no-no", "pl": "pl-pl", "pt": "pt-pt", "ro": "ro-ro", "ru": "ru-ru", "sv": "se-sv",
            "tr": "tr-tr", "uk": "ua-uk", "vi": "vn-vi", "zh": "cn-zh"}
_RATE_LIMIT_SIGNS = ("ratelimit", "rate limit", "429", "202")


def steered_request(query: str, steer: SearchSteer | None, today: date | None = None) -> tuple[str, dict[str, str]]:
    """The query and the extra ``text()`` arguments that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    params: dict[str, str] = {}
    if steer.language:
        params["region"] = _REGIONS.get(steer.language.split("-")[0].lower(), "wt-wt")
    span = window_span(steer.window, today or date.today(), _SPANS)
    if span:
        params["timelimit"] = span
    return site_query(query, steer), params


def _default_client(timeout_s: float) -> Any:
    from ddgs import DDGS

    return DDGS(timeout=max(1, int(timeout_s)))


class DuckDuckGoSearchBackend:
    """DuckDuckGo's text results through ddgs, behind the run's guard."""

    provider = "duckduckgo"

    def __init__(self, *, guard: ProviderGuard, timeout_s: float, backend: str = "duckduckgo",
                 client_factory: Callable[[float], Any] = _default_client):
        self._guard = guard
        self._timeout = timeout_s
        self._backend = backend
        self._client_factory = client_factory

    def _once(self, query: str, num: int, extra: dict[str, str], timeout: float) -> list[dict]:
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        try:
            return list(self._client_factory(timeout).text(query, max_results=num, backend=self._backend,
                                                           **{"region": "wt-wt", "safesearch": "moderate", **extra}))
        except RatelimitException as exc:
            raise TransientError(f"duckduckgo: rate-limited ({redact(str(exc))})", rate_limited=True) from None
        except TimeoutException as exc:
            raise CallTimeoutError(f"duckduckgo: timed out ({redact(str(exc))})") from None
        except DDGSException as exc:
            text = str(exc)
            if "no results found" in text.lower():
                return []
            if any(sign in text.lower() for sign in _RATE_LIMIT_SIGNS):
                raise TransientError(f"duckduckgo: rate-limited ({redact(text)})", rate_limited=True) from None
            raise PermanentError(f"duckduckgo: {redact(text)}") from None

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results in ddgs's order."""
        q, extra = steered_request(query, steer)
        try:
            rows, _ = self._guard.call(lambda t: self._once(q, num, extra, t), timeout=self._timeout, paid=False)
        except TransientError as exc:
            attempts = getattr(exc, "attempts", None)
            if getattr(exc, "rate_limited", False) and attempts:
                raise TransientError(f"{exc} after {attempts} attempts with backoff", rate_limited=True) from None
            raise
        return [h for r in rows if isinstance(r, dict) and (h := hit(r.get("title"), r.get("href"), r.get("body")))][:num]


def build(cfg, guards, env) -> DuckDuckGoSearchBackend:
    """The backend of the ``duckduckgo`` row (hifirag_core.backend_registry)."""
    return DuckDuckGoSearchBackend(guard=guards.guard("duckduckgo"), timeout_s=cfg.limits.search_timeout_s,
                                   backend=cfg.backends.ddgs_backend)
