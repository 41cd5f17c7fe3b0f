"""What the search providers share: a guarded JSON request (its errors and cost) for those spoken to over plain
HTTP, the charge of a paid call, paging, and the steering values they translate (a date window as days back,
as a named span, as ISO days; site rules as ``site:`` terms or domain lists)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from typing import Any

import httpx

from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.errors import PermanentError, TransientError
from hifirag_core.limits import ProviderGuard
from hifirag_core.secrets import Secret, redact
from hifirag_core.steering import EARLIEST_DAY, DateWindow
from hifirag_core.types import SearchHit, SearchSteer


class JsonSearchClient:
    """A provider's HTTP client behind the run's guard: rate limit, retries on 429/5xx/timeouts, the budget
    checked before each paid call and charged after it (``call_cost_usd``)."""

    def __init__(self, provider: str, *, guard: ProviderGuard, timeout_s: float, paid: bool,
                 call_cost_usd: float | None = None, http_client: httpx.Client | None = None):
        self.provider = provider
        self._guard = guard
        self._timeout = timeout_s
        self._paid = paid
        self._cost = call_cost_usd
        self._http = http_client or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _once(self, method: str, url: str, timeout: float, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, url, timeout=timeout, **kwargs)
        except httpx.TransportError as exc:
            raise transport_error(self.provider, exc) from None
        if response.status_code != 200:
            raise error_for_status(self.provider, response.status_code, response.headers, response.text)
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise TransientError(redact(f"{self.provider}: unreadable response body: {exc}") or "") from None

    def request(self, method: str, url: str, **kwargs: Any) -> dict:
        """The reply's JSON object, the call charged at the set cost."""
        data, _ = self._guard.call(lambda t: self._once(method, url, t, **kwargs), timeout=self._timeout,
                                   paid=self._paid)
        if not isinstance(data, dict):
            raise PermanentError(f"{self.provider}: the reply is not a JSON object")
        charge(self._guard, self._cost)
        return data


def charge(guard: ProviderGuard, usd: float | None) -> None:
    """Charge a paid call's USD to the run's budget (and so to the call's ``search_calls`` row)."""
    if guard.budget is not None and usd:
        guard.budget.charge(usd=usd)


def hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    """A result row from loosely typed fields; None without a URL."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    return SearchHit(title=str(title or ""), url=url, snippet=" ".join(str(snippet or "").split()))


def paged_hits(page: Callable[[int], tuple[list[SearchHit], bool]], num: int, max_pages: int) -> list[SearchHit]:
    """Up to ``num`` hits, each URL once, from ``page(n)`` (page n's hits, and whether a page may follow it), read
    in order while more are wanted and a page brought new ones."""
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for n in range(1, max_pages + 1):
        if len(hits) >= num:
            break
        found, more = page(n)
        new = 0
        for h in found:
            if h.url not in seen:
                seen.add(h.url)
                hits.append(h)
                new += 1
        if not new or not more:
            break
    return hits[:num]


def window_span(window: DateWindow, today: date, spans: tuple[tuple[int, str], ...]) -> str | None:
    """The shortest named span (``(days, name)``, shortest first) that covers a window reaching today; None
    for a window with an end in the past or no start (the stages after search enforce those)."""
    if window.after is None or (window.before is not None and window.before < today):
        return None
    days = (today - window.after).days + 1
    return next((name for limit, name in spans if days <= limit), None)


def window_days(window: DateWindow, today: date) -> tuple[str, str]:
    """The window as ISO days, open ends filled with the earliest day and today."""
    return ((window.after or EARLIEST_DAY).isoformat(), (window.before or today).isoformat())


def site_query(query: str, steer: SearchSteer) -> str:
    """``query`` with the site rules as ``site:`` / ``-site:`` terms (for engines that read them in the query)."""
    from hifirag_core.backends.google_search import site_terms

    terms = [t for t in (site_terms(steer.sites.sites, exclude=False), site_terms(steer.sites.exclude, exclude=True))
             if t]
    return " ".join([query, *terms])


def domain_fields(steer: SearchSteer | None, include: str, exclude: str) -> dict[str, object]:
    """The site rules as a provider's lists of wanted and unwanted domains (the fields named ``include``,
    ``exclude``)."""
    if steer is None:
        return {}
    fields: dict[str, object] = {}
    if steer.sites.sites:
        fields[include] = [r.domain for r in steer.sites.sites]
    if steer.sites.exclude:
        fields[exclude] = [r.domain for r in steer.sites.exclude]
    return fields


class KeyedClientBackend:
    """A provider reached through its own client library with a key, behind the run's guard: what the Tavily and
    Exa adapters share."""

    provider = ""

    def __init__(self, *, api_key: Secret, base_url: str, guard: ProviderGuard, timeout_s: float,
                 call_cost_usd: float | None = None):
        self._key = api_key
        self._url = base_url.rstrip("/")
        self._guard = guard
        self._timeout = timeout_s
        self._cost = call_cost_usd
