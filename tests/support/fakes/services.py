"""Start every fake at once, for tests and benchmarks: base URLs, fake keys and config overrides.

    with fake_services(llm_latency={"filter": 0.8, "writer": 6.0}, gemini_rpm=150) as fakes:
        cfg = build_config(overrides=fakes.config_overrides())
        with fakes.environment():       # the fake keys in os.environ, restored afterwards
            ...run the pipeline with --backend gemini...

``search`` and ``page`` plug any content into the search and scrape fakes (the local corpus's
BM25 search and page store, for instance).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from hifirag_core.web.reddit import RedditThread
from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.reddit_server import RedditFake
from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.support.fakes.web import PageSource, SearchFn, default_web


@dataclass
class FakeServices:
    """The running fakes and what a client needs to use them."""

    gemini: GeminiFake
    openai: OpenAIFake
    google: GoogleSearchFake
    scrapingdog: ScrapingdogFake
    reddit: RedditFake
    env: dict[str, str] = field(default_factory=dict)

    @property
    def base_urls(self) -> dict[str, str]:
        """Service name -> ``http://127.0.0.1:<port>``."""
        return {"gemini": self.gemini.base_url, "openai": self.openai.base_url, "google": self.google.base_url,
                "scrapingdog": self.scrapingdog.base_url, "reddit": self.reddit.base_url}

    def config_overrides(self, *, llm: str = "gemini", search: str = "google", fetch: str = "scrapingdog",
                         reddit: str = "praw") -> dict:
        """Nested overrides for ``build_config`` that point the real backends at the fakes."""
        return {
            "backends": {"filter_llm": llm, "writer_llm": llm, "search": search, "fetch": fetch, "reddit": reddit,
                         "google_search_base_url": self.google.base_url,
                         "scrapingdog_base_url": self.scrapingdog.base_url,
                         "reddit_oauth_url": self.reddit.base_url, "reddit_url": self.reddit.base_url},
            "models": {"gemini_base_url": self.gemini.base_url, "openai_base_url": self.openai.base_url + "/v1"},
        }

    def config_overrides_pairs(self, **kwargs: str) -> list[str]:
        """The same overrides as ``key=value`` strings for ``--set`` on a command line."""
        out: list[str] = []

        def walk(prefix: str, node: Mapping) -> None:
            for key, value in node.items():
                if isinstance(value, Mapping):
                    walk(f"{prefix}{key}.", value)
                else:
                    out.append(f"{prefix}{key}={value}")

        walk("", self.config_overrides(**kwargs))
        return out

    @contextlib.contextmanager
    def environment(self) -> Iterator[dict[str, str]]:
        """Put the fakes' keys into ``os.environ`` for the duration (restored afterwards)."""
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield self.env
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def stop(self) -> None:
        """Stop every fake."""
        for fake in (self.gemini, self.openai, self.google, self.scrapingdog, self.reddit):
            fake.stop()


@contextlib.contextmanager
def fake_services(*, search: SearchFn | None = None, page: PageSource | None = None,
                  threads: Mapping[str, RedditThread] | None = None,
                  llm_latency: float | Mapping[str, float] = 0.0, search_latency: float = 0.0,
                  scrape_latency: float = 0.0, gemini_rpm: int | Mapping[str, int] | None = None,
                  google_rpm: int | None = None, scrapingdog_rpm: int | None = None,
                  openai_think: bool = False) -> Iterator[FakeServices]:
    """Start all fakes on 127.0.0.1 and stop them on exit.

    ``gemini_rpm`` is one limit for all models or a mapping model -> rpm (Gemini counts per model);
    ``google_rpm`` and ``scrapingdog_rpm`` limit the search and scrape fakes the same way.
    """
    web = default_web()
    services = FakeServices(
        gemini=GeminiFake(latency=llm_latency, rpm=gemini_rpm).start(),
        openai=OpenAIFake(latency=llm_latency, think=openai_think).start(),
        google=GoogleSearchFake(search=search or web.search, latency=search_latency, rpm=google_rpm).start(),
        scrapingdog=ScrapingdogFake(search=search or web.search, page=page if page is not None else web.page,
                                    latency=scrape_latency, rpm=scrapingdog_rpm).start(),
        reddit=RedditFake(threads=threads).start(),
    )
    services.env = {
        "GEMINI_API_KEY": services.gemini.api_key,
        "OPENAI_API_KEY": services.openai.api_key or "",
        "GOOGLE_CSE_KEY": services.google.api_key,
        "GOOGLE_CSE_ID": services.google.engine_id,
        "SCRAPINGDOG_API_KEY": services.scrapingdog.api_key,
        "REDDIT_CLIENT_ID": services.reddit.client_id,
        "REDDIT_CLIENT_SECRET": services.reddit.client_secret,
    }
    try:
        yield services
    finally:
        services.stop()
