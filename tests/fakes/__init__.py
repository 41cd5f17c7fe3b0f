"""Fake servers for the external services, speaking their real wire formats on 127.0.0.1."""

from tests.fakes.gemini import GeminiFake
from tests.fakes.openai_server import OpenAIFake
from tests.fakes.reddit_server import RedditFake, sample_thread
from tests.fakes.search_servers import GoogleSearchFake, ScrapingdogFake
from tests.fakes.server import FakeServer, Fault, Request, Response
from tests.fakes.services import FakeServices, fake_services
from tests.fakes.web import StaticWeb, WebHit, WebPage, default_web

__all__ = [
    "FakeServer", "FakeServices", "Fault", "GeminiFake", "GoogleSearchFake", "OpenAIFake", "RedditFake", "Request",
    "Response", "ScrapingdogFake", "StaticWeb", "WebHit", "WebPage", "default_web", "fake_services", "sample_thread",
]
