"""The table of search and fetch backends: one row per adapter, everything else derived from it.

A row says what a backend is called in the config (``backends.search`` / ``backends.fetch``), its role,
the secrets it needs (declared here, registered in ``hifirag_core.secrets``), the provider name its rate
limits, retries and costs are kept under (``limits.*``) with its defaults there (requests at once, a minute,
USD a call), the config settings it must have, the steering it applies in its own request, what one call
costs, and the function that builds it from the config
(``"module:function"``, imported only when the backend is built). It lives beside ``config.py`` rather than
in ``backends/`` and imports nothing of the project, so ``config.py`` can take its choices from it without
a knot between the two folders (the adapters in ``backends/`` import the config).

Derived from the table: the config's choices (``SEARCH_CHOICES``, ``FETCH_CHOICES``), the defaults of the
providers' limits and costs (``provider_defaults``), the required secrets (``factory.required_secrets``),
``hifirag doctor``'s search and fetch lines, the CLI's help (``hifirag providers``, ``--set``) and the provider
table of docs/user-guide.md (``provider_table_markdown``; a test keeps the two equal). Adding a
search provider is one module (its adapter and ``build`` function), one row here and one fake (with its
entry in ``tests.support.fakes.search_providers.PROVIDER_FAKES``, which ``tests/unit/backends/test_provider_table.py`` checks it through).

A builder is ``build(cfg, guards, env) -> SearchBackend`` (or ``Fetcher``): ``search(query, *, num,
steer)`` returning ``SearchHit`` rows, ``provider`` naming it. Rows with ``builder=None`` are built by the
runtime (the local corpus, the user's folder).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

Role = Literal["search", "fetch"]


@dataclass(frozen=True)
class Key:
    """A credential a backend needs: its name (a key of ``secrets.SECRETS``), the variables that may hold it
    (first set wins) and what it is for."""

    name: str
    env: tuple[str, ...]
    purpose: str


@dataclass(frozen=True)
class Backend:
    """One adapter's row."""

    name: str  # the config value
    role: Role
    summary: str
    builder: str | None  # "module:function"; None: built by the runtime
    keys: tuple[Key, ...] = ()
    limits_name: str = ""  # the provider its limits, retries and costs are kept under ("" = name)
    settings: tuple[str, ...] = ()  # config settings that must be set (dotted paths)
    steering: str = "none (enforced after search)"
    cost: str = "free"
    ends: date | None = None  # the day the service stops; choosing it from then on is an error
    notice: str = ""  # said at run start and by doctor while the service still works
    carries_text: bool = False  # results bring their documents' text: the crawl does not fetch them
    base_url: str = ""  # where the service lives (``backends.base_urls`` overrides it)
    # the defaults of ``limits.provider_concurrency``, ``provider_rpm`` and ``call_cost_usd`` for its provider
    concurrency: int | None = None  # requests in flight at once
    rpm: float | None = None  # requests a minute
    call_cost_usd: float | None = None  # USD per successful call, for a service billed per request

    @property
    def provider(self) -> str:
        """The provider name of ``limits.provider_concurrency`` / ``provider_rpm`` / ``call_cost_usd``."""
        return self.limits_name or self.name

    def url(self, cfg: Any) -> str:
        """The service's address: ``backends.base_urls[name]``, else ``[provider]``, else the row's default."""
        urls = cfg.backends.base_urls
        return (urls.get(self.name) or urls.get(self.provider) or self.base_url).rstrip("/")

    def load(self) -> Callable[..., Any]:
        """The builder function."""
        if self.builder is None:
            raise ValueError(f"{self.role} backend {self.name!r} is built by the runtime, not by the factory")
        module, _, func = self.builder.partition(":")
        return getattr(importlib.import_module(module), func)


_GOOGLE_KEYS = (Key("google_cse_key", ("GOOGLE_CSE_KEY",), "Google Programmable Search JSON API key"),
                Key("google_cse_id", ("GOOGLE_CSE_ID",), "Programmable Search Engine id (cx)"))
_SCRAPINGDOG_KEY = Key("scrapingdog_api_key", ("SCRAPINGDOG_API_KEY",), "Scrapingdog search and scrape APIs")
GOOGLE_ENDS = date(2027, 1, 1)
MMU_SEARCH_URL = "https://clueweb22.us"

BACKENDS: tuple[Backend, ...] = (
    Backend("local", "search", "the local corpus (BM25 + MiniLM), the offline web", None,
            cost="free (no network)"),
    Backend("folder", "search", "your own files (search.folder: HTML, PDF, Markdown, text), cited as "
            "folder://<host>/<path>", None, settings=("search.folder",), cost="free (no network)"),
    Backend("searxng", "search", "a SearXNG instance (self-hosted metasearch; backends.searxng_url)",
            "hifirag_core.backends.searxng:build", settings=("backends.searxng_url",),
            steering="language, time_range (day/week/month/year), site: / -site: terms",
            cost="free (your own instance)", concurrency=4),
    # DuckDuckGo publishes no limit and turns away a client it finds too busy: 20 a minute stays polite
    Backend("duckduckgo", "search", "DuckDuckGo through the ddgs package (no key; rate-limits)",
            "hifirag_core.backends.duckduckgo:build", steering="region, timelimit (d/w/m/y), site: / -site: terms",
            cost="free (rate-limited by DuckDuckGo)", concurrency=1, rpm=20),
    # Brave's free plan: 1 query a second; its Base AI plan $5 per 1,000 queries (https://brave.com/search/api/)
    Backend("brave", "search", "the Brave Search API", "hifirag_core.backends.brave:build",
            base_url="https://api.search.brave.com",
            keys=(Key("brave_api_key", ("BRAVE_API_KEY",), "Brave Search API subscription token"),),
            steering="freshness (pd/pw/pm/py or a date range), search_lang, site: / -site: terms",
            cost="per query", concurrency=1, rpm=60, call_cost_usd=0.005),
    # Tavily's pay-as-you-go credit, one per basic search (https://docs.tavily.com/documentation/api-credits)
    Backend("tavily", "search", "the Tavily search API", "hifirag_core.backends.tavily:build",
            base_url="https://api.tavily.com",
            keys=(Key("tavily_api_key", ("TAVILY_API_KEY",), "Tavily API key"),),
            steering="include_domains, exclude_domains, start_date, end_date",
            cost="per basic search, one credit", concurrency=4, call_cost_usd=0.008),
    # Exa's search with up to 25 results (https://exa.ai/pricing); a reply states what it cost
    Backend("exa", "search", "the Exa search API", "hifirag_core.backends.exa:build", base_url="https://api.exa.ai",
            keys=(Key("exa_api_key", ("EXA_API_KEY",), "Exa API key"),),
            steering="includeDomains, excludeDomains, startPublishedDate, endPublishedDate",
            cost="per search, or what the reply's costDollars says", concurrency=4, call_cost_usd=0.005),
    Backend("fineweb", "search", "MMU-RAGent's FineWeb search (documents come with their text; no key)",
            "hifirag_core.backends.mmu_search:build_fineweb", limits_name="clueweb22", base_url=MMU_SEARCH_URL,
            cost="free (the organisers' service)", carries_text=True, concurrency=4),
    Backend("clueweb22-b", "search", "MMU-RAGent's ClueWeb22-B search (documents come with their text)",
            "hifirag_core.backends.mmu_search:build_clueweb_b", limits_name="clueweb22", base_url=MMU_SEARCH_URL,
            keys=(Key("clueweb_api_key", ("CLUEWEB_API_KEY",), "MMU-RAGent ClueWeb22 search API key (x-api-key)"),),
            cost="free (a key from the organisers)", carries_text=True, concurrency=4),
    Backend("clueweb22-a", "search", "MMU-RAGent's ClueWeb22-A search (cw22_a; documents come with their text)",
            "hifirag_core.backends.mmu_search:build_clueweb_a", limits_name="clueweb22", base_url=MMU_SEARCH_URL,
            keys=(Key("clueweb_api_key", ("CLUEWEB_API_KEY",), "MMU-RAGent ClueWeb22 search API key (x-api-key)"),),
            cost="free (a key from the organisers)", carries_text=True, concurrency=4),
    # its limits are the Gemini model's (limits.*.gemini and gemini:<model>)
    Backend("gemini-grounding", "search", "Gemini answering with Google Search grounding; its cited pages are "
            "the results", "hifirag_core.backends.grounded_search:build_search", limits_name="gemini",
            keys=(Key("gemini_api_key", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "Gemini API (filter/writer models)"),),
            cost="the model's tokens plus grounded-prompt billing (Gemini pricing)"),
    # $5 per 1,000 queries beyond the free 100 a day (https://developers.google.com/custom-search/v1/overview)
    Backend("google", "search", "Google Programmable Search (Custom Search JSON API)",
            "hifirag_core.backends.google_search:build", keys=_GOOGLE_KEYS,
            steering="siteSearch/siteSearchFilter, dateRestrict or sort=date:r, hl, site: terms",
            cost="per query beyond 100 free a day", ends=GOOGLE_ENDS, concurrency=4, rpm=100, call_cost_usd=0.005,
            notice="Google's Custom Search JSON API is closed to new customers; existing customers can use it "
                   "until 2027-01-01"),
    Backend("scrapingdog", "search", "Google results through Scrapingdog's search API",
            "hifirag_core.backends.scrapingdog:build_search", keys=(_SCRAPINGDOG_KEY,),
            steering="site: / -site: terms, tbs=cdr date range, language", cost="billed in Scrapingdog credits",
            concurrency=5),
    Backend("local", "fetch", "pages from the local corpus", None, cost="free (no network)"),
    Backend("scrapingdog", "fetch", "Scrapingdog's scrape API", "hifirag_core.backends.scrapingdog:build_fetcher",
            keys=(_SCRAPINGDOG_KEY,), cost="billed in Scrapingdog credits", concurrency=5),
    Backend("http", "fetch", "direct HTTP (SSRF-guarded)", "hifirag_core.backends.http_fetch:build",
            cost="free (your own connection)", concurrency=8),
)

SEARCH_CHOICES: tuple[str, ...] = tuple(b.name for b in BACKENDS if b.role == "search")
FETCH_CHOICES: tuple[str, ...] = tuple(b.name for b in BACKENDS if b.role == "fetch")


def provider_defaults(field: Literal["concurrency", "rpm", "call_cost_usd"],
                      rows: tuple[Backend, ...] = BACKENDS) -> dict[str, Any]:
    """The rows' defaults of one limit by provider (rows that share a provider must agree)."""
    defaults: dict[str, Any] = {}
    for row in rows:
        value = getattr(row, field)
        if value is None:
            continue
        if defaults.setdefault(row.provider, value) != value:
            raise ValueError(f"backends of provider {row.provider!r} disagree on its {field}")
    return defaults


def search_url(cfg: Any, name: str) -> str:
    """The address of search backend ``name`` (its row's, or ``backends.base_urls``)."""
    return backend("search", name).url(cfg)


def backend(role: Role, name: str) -> Backend:
    """The row of ``name`` in ``role``; ``ValueError`` lists the choices."""
    for row in BACKENDS:
        if row.role == role and row.name == name:
            return row
    choices = SEARCH_CHOICES if role == "search" else FETCH_CHOICES
    raise ValueError(f"{name!r} is not a {role} backend; choose one of {', '.join(choices)}")


def all_keys() -> tuple[Key, ...]:
    """Every credential the table declares, once each."""
    return tuple({k.name: k for row in BACKENDS for k in row.keys}.values())


def alternatives(role: Role, exclude: str) -> list[str]:
    """The other backends of a role that still work (for an error that names them)."""
    return [b.name for b in BACKENDS if b.role == role and b.name != exclude and b.ends is None]


def sunset_error(row: Backend, today: date) -> str | None:
    """The error for choosing a backend on or after the day it ends (None while it works)."""
    if row.ends is None or today < row.ends:
        return None
    return (f"backends.{row.role}={row.name!r}: the service ended on {row.ends.isoformat()} ({row.notice.split(';')[0]}); "
            f"choose one of {', '.join(alternatives(row.role, row.name))}")


def cost_text(row: Backend, per_call: float | None = None) -> str:
    """What a call costs, as the docs and ``hifirag doctor`` say it (``per_call``: the configured USD a call, else
    the row's default)."""
    usd = row.call_cost_usd if per_call is None else per_call
    if usd is None:
        return row.cost
    return f"${usd} {row.cost} (limits.call_cost_usd.{row.provider})"


def provider_table_markdown() -> str:
    """The provider table of docs/user-guide.md, generated from the rows."""
    lines = ["| backend | role | keys | steering in its own request | cost |", "|---|---|---|---|---|"]
    for b in BACKENDS:
        keys = " + ".join(" or ".join(f"`{e}`" for e in k.env) for k in b.keys) or "none"
        note = f" **ends {b.ends.isoformat()}**" if b.ends else ""
        lines.append(f"| `{b.name}`{note} | {b.role} | {keys} | {b.steering} | {cost_text(b)} |")
    return "\n".join(lines)
