"""Google Programmable Search (Custom Search JSON API) as a ``SearchBackend``.

Wire format (https://developers.google.com/custom-search/v1/reference/rest/v1/cse/list):
``GET {base}/customsearch/v1?key=…&cx=…&q=…&num=…&start=…``; ``num`` is 1–10 per request and
``start`` is the 1-based index of the first result, so more than ten results take several
requests, and the API serves at most the first 100. The reply's ``items[]`` hold ``title``,
``link`` and ``snippet``; a query with no results has no ``items`` key at all. Errors are
``{"error": {"code", "message", "errors": [{"reason"}], "status"}}``; quota errors may come as 429
or as 403 with reason ``rateLimitExceeded`` / ``userRateLimitExceeded`` (retryable), while
``dailyLimitExceeded`` is not worth retrying today.

Steering (``SearchSteer``) goes into the request where the API has a parameter for it: one wanted
site as ``siteSearch`` with ``siteSearchFilter=i`` (one excluded site, with no wanted one, as
``siteSearchFilter=e``), any other site rule as ``site:`` / ``-site:`` terms of ``q``; a window with only
a start as ``dateRestrict=d<days>``, one with an end as ``sort=date:r:YYYYMMDD:YYYYMMDD`` (Programmable
Search's restrict-to-range on the page date it estimates); a non-English question's language as ``hl``.
The stages after search enforce every rule again on each URL and page, whatever the engine did.

Failures raise (``SearchBackend`` has no status): ``TransientError``/``PermanentError`` after the
guard's retries, ``BudgetExceededError``, ``DeadlineExceededError``.
"""

from __future__ import annotations

import json
from datetime import date

import httpx

from hifirag_core.backends.http_common import error_for_status, transport_error
from hifirag_core.errors import PermanentError, TransientError
from hifirag_core.limits import ProviderGuard
from hifirag_core.secrets import Secret, get_secret, redact
from hifirag_core.steering import EARLIEST_DAY, SiteRule
from hifirag_core.types import SearchHit, SearchSteer

MAX_RESULTS = 100  # the API never pages past the first 100 results
PAGE_SIZE = 10
_RETRYABLE_403_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})


class GoogleSearchBackend:
    """Custom Search JSON API search, several pages when ``num`` > 10."""

    provider = "google"

    def __init__(self, *, api_key: Secret, engine_id: Secret, guard: ProviderGuard, timeout_s: float,
                 base_url: str = "https://www.googleapis.com", call_cost_usd: float | None = None,
                 http_client: httpx.Client | None = None):
        self._key = api_key
        self._cx = engine_id
        self._guard = guard
        self._timeout = timeout_s
        self._url = base_url.rstrip("/") + "/customsearch/v1"
        self._cost = call_cost_usd
        self._http = http_client or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _page(self, query: str, start: int, num: int, timeout: float, steer: dict[str, str]) -> dict:
        params = {"key": self._key.reveal(), "cx": self._cx.reveal(), "q": query, "num": num, "start": start, **steer}
        try:
            response = self._http.get(self._url, params=params, timeout=timeout)
        except httpx.TransportError as exc:
            raise transport_error("google", exc) from None
        if response.status_code != 200:
            retryable = None
            if response.status_code == 403:
                # Google answers a per-minute quota with 403 rateLimitExceeded / userRateLimitExceeded
                retryable = bool(_reasons(response.text) & _RETRYABLE_403_REASONS)
            raise error_for_status("google", response.status_code, response.headers, response.text,
                                   retryable=retryable, rate_limited=retryable or None)
        try:
            data = response.json()
        except json.JSONDecodeError as exc:
            raise TransientError(redact(f"google: unreadable response body: {exc}") or "") from None
        if not isinstance(data, dict):
            raise PermanentError("google: the reply is not a JSON object")
        return data

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results (at most 100), in Google's order."""
        query, extra = steered_request(query, steer)
        wanted = max(0, min(num, MAX_RESULTS))
        hits: list[SearchHit] = []
        start = 1
        while len(hits) < wanted and start <= MAX_RESULTS - 1:
            size = min(PAGE_SIZE, wanted - len(hits), MAX_RESULTS + 1 - start)
            data, _ = self._guard.call(lambda t, s=start, n=size: self._page(query, s, n, t, extra),
                                       timeout=self._timeout, paid=True)
            if self._guard.budget is not None and self._cost:
                self._guard.budget.charge(usd=self._cost)
            items = data.get("items") or []
            for item in items:
                link = item.get("link")
                if isinstance(link, str) and link:
                    hits.append(SearchHit(title=str(item.get("title") or ""), url=link,
                                          snippet=str(item.get("snippet") or "").replace("\n", " ").strip()))
            if len(items) < size:
                break  # the engine has no more results
            start += size
        return hits[:wanted]


def build(cfg, guards, env) -> GoogleSearchBackend:
    """The backend of the ``google`` row (hifirag_core.backend_registry)."""
    return GoogleSearchBackend(api_key=get_secret("google_cse_key", env), engine_id=get_secret("google_cse_id", env),
                               guard=guards.guard("google"), timeout_s=cfg.limits.search_timeout_s,
                               base_url=cfg.backends.google_search_base_url, call_cost_usd=guards.call_cost("google"))


def site_terms(rules: tuple[SiteRule, ...], *, exclude: bool) -> str:
    """Google's ``site:`` operators for rules (several wanted sites are ORed)."""
    if exclude:
        return " ".join(f"-site:{r.domain}" for r in rules)
    return " OR ".join(f"site:{r.domain}" for r in rules)


def steered_request(query: str, steer: SearchSteer | None, today: date | None = None) -> tuple[str, dict[str, str]]:
    """The query and the extra request parameters that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    params: dict[str, str] = {}
    terms: list[str] = []
    wanted, unwanted = steer.sites.sites, steer.sites.exclude
    if len(wanted) == 1:
        params.update(siteSearch=wanted[0].domain, siteSearchFilter="i")
    elif not wanted and len(unwanted) == 1:
        params.update(siteSearch=unwanted[0].domain, siteSearchFilter="e")
        unwanted = ()
    elif wanted:
        terms.append(site_terms(wanted, exclude=False))
    if unwanted:
        terms.append(site_terms(unwanted, exclude=True))
    window = steer.window
    if window.before is not None:
        start = (window.after or EARLIEST_DAY).strftime("%Y%m%d")
        params["sort"] = f"date:r:{start}:{window.before.strftime('%Y%m%d')}"
    elif window.after is not None:
        params["dateRestrict"] = f"d{max(1, ((today or date.today()) - window.after).days + 1)}"
    if steer.language:
        params["hl"] = steer.language
    return " ".join([query, *terms]), params


def _reasons(body: str) -> set[str]:
    try:
        errors = json.loads(body)["error"].get("errors") or []
        return {str(e.get("reason")) for e in errors if isinstance(e, dict)}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return set()
