"""DuckDuckGo through the ``ddgs`` package (a metasearch client, no key) as a ``SearchBackend``.

ddgs's DuckDuckGo engine (``ddgs.engines.duckduckgo.Duckduckgo``, https://pypi.org/project/ddgs/) posts the query
to DuckDuckGo's HTML search, ``POST https://html.duckduckgo.com/html/`` with the form fields ``q``, ``l`` (the
region, such as ``fr-fr``; ``wt-wt`` for none), ``df`` (the time limit ``d``/``w``/``m``/``y``) and ``s`` (the
offset of page 2 on), and reads the results from the page (a ``div.result__body`` each: the ``h2`` title, the
link, the ``a.result__snippet``) through its own HTTP client (primp, which passes for a browser).

This adapter runs that engine itself rather than ``DDGS().text()``, which turns every reply that is not a 200
into "No results found.": a query DuckDuckGo turned away would look like one with no results. DuckDuckGo turns
away a client it finds too busy with a 202 and a challenge page (or a 403 or 429): the adapter's engine raises a
rate-limited ``TransientError`` for those, so the run's guard backs off (``limits.retries``,
``retry_base_delay_s``; ``limits.provider_rpm.duckduckgo`` keeps the pace at 20 a minute by default) and, when
the retries are spent, the search row's status is ``rate_limited`` and its error says so. A 5xx and a failed
connection are transient, a timeout is a timeout, another status is permanent; a page without results is an
empty answer. Up to ``MAX_PAGES`` pages are read while ``num`` asks for more and the last page was full (10 results, then
15 a page).

``backends.ddgs_proxy`` sends ddgs through a proxy (``http://``, ``https://`` or ``socks5://``; ``tb`` for Tor
Browser's), else ``$DDGS_PROXY`` as ddgs itself reads it (a proxy with a password goes there, never in the
config); ``backends.ddgs_ca_file`` is a PEM bundle to verify DuckDuckGo's certificate with, for a proxy that
inspects TLS. The tests use both to put their fake in DuckDuckGo's place.

Steering: a question's language as the region (``fr`` → ``fr-fr``; unknown: ``wt-wt``); a date window reaching
today as the time limit; site rules as ``site:`` / ``-site:`` terms of the query. The stages after search
enforce every rule again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date
from typing import Any

from hifirag_core.backends.http_common import error_for_status
from hifirag_core.backends.search_common import hit, paged_hits, site_query, window_span
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
NO_REGION = "wt-wt"
# DuckDuckGo's ways of turning a busy client away: a challenge page (202), or a refusal
_TURNED_AWAY = frozenset({202, 403, 429})
MAX_PAGES = 3
FIRST_PAGE, LATER_PAGE = 10, 15  # results a full page holds (ddgs's offsets: page 2 from 10, page 3 from 25)
TOR_BROWSER_PROXY = "socks5h://127.0.0.1:9150"  # what ddgs means by "tb"


def steered_request(query: str, steer: SearchSteer | None, today: date | None = None) -> tuple[str, dict[str, str]]:
    """The query and the engine's ``region`` / ``timelimit`` that carry ``steer`` (see the module docstring)."""
    if steer is None or not steer.active:
        return query, {}
    params: dict[str, str] = {}
    if steer.language:
        params["region"] = _REGIONS.get(steer.language.split("-")[0].lower(), NO_REGION)
    span = window_span(steer.window, today or date.today(), _SPANS)
    if span:
        params["timelimit"] = span
    return site_query(query, steer), params


class TurnedAway(Exception):
    """DuckDuckGo answered with a status other than 200."""

    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


def checked_engine(proxy: str | None, timeout: int, verify: bool | str) -> Any:
    """ddgs's DuckDuckGo engine, except that a reply other than 200 raises ``TurnedAway`` (ddgs returns None)."""
    from ddgs.engines.duckduckgo import Duckduckgo

    class CheckedDuckduckgo(Duckduckgo):
        def request(self, *args: Any, **kwargs: Any) -> str:
            response = self.http_client.request(*args, **kwargs)
            if response.status_code != 200:
                raise TurnedAway(response.status_code, response.text or "")
            return response.text

    return CheckedDuckduckgo(proxy=proxy, timeout=timeout, verify=verify)


class DuckDuckGoSearchBackend:
    """DuckDuckGo's results through ddgs's engine, behind the run's guard."""

    provider = "duckduckgo"

    def __init__(self, *, guard: ProviderGuard, timeout_s: float, proxy: str | None = None,
                 ca_file: str | None = None, engine_factory: Callable[..., Any] = checked_engine):
        self._guard = guard
        self._timeout = timeout_s
        self._proxy = TOR_BROWSER_PROXY if proxy == "tb" else proxy
        self._verify: bool | str = ca_file or True
        self._engine = engine_factory

    def _page(self, query: str, page: int, extra: dict[str, str], timeout: float) -> list[Any]:
        from ddgs.exceptions import DDGSException, TimeoutException

        engine = self._engine(self._proxy, max(1, int(timeout)), self._verify)
        try:
            return list(engine.search(query, **{"region": NO_REGION, **extra}, page=page) or [])
        except TurnedAway as exc:
            if exc.status in _TURNED_AWAY:
                raise TransientError(f"duckduckgo: rate-limited (HTTP {exc.status})", rate_limited=True) from None
            raise error_for_status("duckduckgo", exc.status, None, exc.body[:300]) from None
        except TimeoutException as exc:
            raise CallTimeoutError(f"duckduckgo: timed out ({redact(str(exc))})") from None
        except DDGSException as exc:  # ddgs's client could not complete the request (connection, TLS, proxy)
            raise TransientError(f"duckduckgo: {redact(str(exc))}") from None

    def _call(self, query: str, page: int, extra: dict[str, str]) -> list[Any]:
        try:
            rows, _ = self._guard.call(lambda t: self._page(query, page, extra, t), timeout=self._timeout, paid=False)
        except TransientError as exc:
            attempts = getattr(exc, "attempts", None)
            if exc.rate_limited and attempts:
                raise TransientError(f"{exc} after {attempts} attempts with backoff", rate_limited=True) from None
            raise
        return rows

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` results in DuckDuckGo's order, each URL once."""
        q, extra = steered_request(query, steer)

        def page(n: int) -> tuple[list[SearchHit], bool]:
            rows = self._call(q, n, extra)
            found = [h for r in rows
                     if (h := hit(getattr(r, "title", ""), getattr(r, "href", ""), getattr(r, "body", "")))]
            return found, len(rows) >= (FIRST_PAGE if n == 1 else LATER_PAGE)  # a short page is the last

        return paged_hits(page, num, MAX_PAGES)


def build(cfg, guards, env) -> DuckDuckGoSearchBackend:
    """The backend of the ``duckduckgo`` row (hifirag_core.backend_registry)."""
    if cfg.backends.ddgs_ca_file and not os.path.isfile(os.path.expanduser(cfg.backends.ddgs_ca_file)):
        raise PermanentError(f"backends.ddgs_ca_file={cfg.backends.ddgs_ca_file!r} is not a file (a PEM bundle)")
    environ = os.environ if env is None else env
    return DuckDuckGoSearchBackend(guard=guards.guard("duckduckgo"), timeout_s=cfg.limits.search_timeout_s,
                                   proxy=cfg.backends.ddgs_proxy or environ.get("DDGS_PROXY") or None,
                                   ca_file=os.path.expanduser(cfg.backends.ddgs_ca_file)
                                   if cfg.backends.ddgs_ca_file else None)
