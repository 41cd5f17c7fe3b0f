"""Fake servers for the external services, speaking their real wire formats on 127.0.0.1."""

from tests.support.fakes.gemini import GeminiFake
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.fakes.reddit_server import RedditFake, sample_thread
from tests.support.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.support.fakes.server import FakeServer, Fault, Request, Response
from tests.support.fakes.services import FakeServices, fake_services
from tests.support.fakes.web import StaticWeb, WebHit, WebPage, default_web

__all__ = [
    "FakeServer", "FakeServices", "Fault", "GeminiFake", "GoogleSearchFake", "OpenAIFake", "RedditFake", "Request",
    "Response", "ScrapingdogFake", "StaticWeb", "WebHit", "WebPage", "default_web", "fake_services", "sample_thread",
]
