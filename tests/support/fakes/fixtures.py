"""Pytest fixtures over the fakes: one fresh server per test, and guards that never sleep."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hifirag_core.config import PipelineConfig, build_config
from hifirag_core.limits import RunGuards
from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.reddit_server import RedditFake
from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.support.fakes.services import FakeServices, fake_services


class RecordingSleep:
    """A ``sleep`` that records the delays asked for instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> RecordingSleep:
    """The delays the guards would have slept."""
    return RecordingSleep()


@pytest.fixture
def make_guards(sleeps: RecordingSleep):
    """``make_guards(cfg)`` -> RunGuards whose backoff and rate-limit waits are recorded, not slept."""

    def make(cfg: PipelineConfig | None = None) -> RunGuards:
        return RunGuards((cfg or build_config()).limits, sleep=sleeps)

    return make


@pytest.fixture
def gemini_fake() -> Iterator[GeminiFake]:
    """A fresh fake Gemini API."""
    with GeminiFake() as fake:
        yield fake


@pytest.fixture
def openai_fake() -> Iterator[OpenAIFake]:
    """A fresh fake OpenAI-compatible server."""
    with OpenAIFake() as fake:
        yield fake


@pytest.fixture
def google_fake() -> Iterator[GoogleSearchFake]:
    """A fresh fake Programmable Search API over the default web."""
    with GoogleSearchFake() as fake:
        yield fake


@pytest.fixture
def scrapingdog_fake() -> Iterator[ScrapingdogFake]:
    """A fresh fake Scrapingdog (search and scrape) over the default web."""
    with ScrapingdogFake() as fake:
        yield fake


@pytest.fixture
def reddit_fake() -> Iterator[RedditFake]:
    """A fresh fake Reddit API serving the sample thread."""
    with RedditFake() as fake:
        yield fake


@pytest.fixture
def fakes() -> Iterator[FakeServices]:
    """Every fake at once."""
    with fake_services() as services:
        yield services
