"""Shared fixtures: the fake external services (see tests/fakes)."""

from tests.fakes.fixtures import (  # noqa: F401  (pytest finds fixtures by name)
    fakes,
    gemini_fake,
    google_fake,
    make_guards,
    openai_fake,
    reddit_fake,
    scrapingdog_fake,
    sleeps,
)
