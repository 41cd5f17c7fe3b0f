"""Pluggable content for the search and scrape fakes: a tiny default web, or any callables.

The search fakes take ``search(query, n) -> list[WebHit]`` and the scrape fake takes
``page(url) -> WebPage | None``; :class:`StaticWeb` provides both over a dict of pages, and the
local corpus can be plugged in the same way (its BM25 search and its page store).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hifirag_core.text import content_terms


@dataclass(frozen=True)
class WebHit:
    """One search result as the engines return it."""

    title: str
    link: str
    snippet: str


@dataclass(frozen=True)
class WebPage:
    """One page as a server returns it."""

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    title: str = ""


SearchFn = Callable[[str, int], list[WebHit]]
PageFn = Callable[[str], "WebPage | None"]


class StaticWeb:
    """A handful of pages with term-overlap search; the default content of the fakes."""

    def __init__(self, pages: Mapping[str, WebPage]):
        self.pages = dict(pages)

    def search(self, query: str, n: int) -> list[WebHit]:
        """Pages sharing words with ``query``, most shared first, then in insertion order."""
        terms = set(content_terms(query))
        scored = []
        for order, (url, page) in enumerate(self.pages.items()):
            html = page.body.decode("utf-8", "replace") if page.content_type.startswith("text/") else ""
            words = re.sub(r"<[^>]+>", " ", html).split()
            score = len(terms & set(content_terms(f"{page.title} {html} {url}")))
            if score:
                # A query-biased snippet: 25 words from the first one that matches the query.
                first = next((i for i, w in enumerate(words) if set(content_terms(w)) & terms), 0)
                scored.append((score, order, WebHit(page.title or url, url, " ".join(words[first:first + 25]))))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [hit for _, _, hit in scored[:n]]

    def page(self, url: str) -> WebPage | None:
        """The page stored under ``url``."""
        return self.pages.get(url)


def _html(title: str, sections: list[tuple[str, str]]) -> bytes:
    body = "".join(f"<h2>{h}</h2>\n<p>{p}</p>\n" for h, p in sections)
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>\n{body}</body></html>".encode()


def default_web() -> StaticWeb:
    """Five pages: two relevant documentation pages, a Reddit thread link, a PDF and an unrelated blog."""
    pages = {
        "https://docs.python.org/3/library/venv.html": WebPage(
            _html("venv — Creation of virtual environments", [
                ("Creating virtual environments", "Virtual environments are created by executing the venv module: "
                 "python -m venv /path/to/new/virtual/environment. This creates the target directory and a pyvenv.cfg file."),
                ("How venvs work", "A virtual environment is a directory tree that contains Python executable files "
                 "and packages installed into it, isolated from the system site-packages."),
                ("API", "The high-level method create() creates an EnvBuilder with the given keyword arguments."),
            ]), title="venv — Creation of virtual environments"),
        "https://packaging.python.org/en/latest/tutorials/installing-packages/": WebPage(
            _html("Installing Packages", [
                ("Creating Virtual Environments", "Python virtual environments allow packages to be installed in an "
                 "isolated location for a particular application. Use python -m venv to create one, then activate it."),
                ("Use pip for installing", "pip is the recommended installer: python -m pip install SomeProject."),
            ]), title="Installing Packages — Python Packaging User Guide"),
        "https://www.reddit.com/r/learnpython/comments/abc123/how_do_i_create_a_virtual_environment/": WebPage(
            b"<html><body>reddit thread</body></html>", title="How do I create a virtual environment? : r/learnpython"),
        "https://files.example.org/python-virtual-environments.pdf": WebPage(
            b"%PDF-1.7\n%binary virtual environment manual\n", content_type="application/pdf",
            title="Virtual environments manual (PDF)"),
        "https://blog.example.com/gardening-tips.html": WebPage(
            _html("Gardening tips", [("Tomatoes", "Water tomatoes deeply and regularly.")]), title="Gardening tips"),
    }
    return StaticWeb(pages)
