"""Pluggable content for the search and scrape fakes: a tiny default web, or any callables.

The search fakes take ``search(query, n)`` returning hits as :class:`WebHit`, as any object with
``title``, ``url`` (or ``link``) and ``snippet`` (``hifirag_core``'s ``SearchHit`` fits), or as
dicts with those keys. The scrape fake takes ``page(url)`` returning a :class:`WebPage`, raw
HTML bytes or text, or None for a missing page, or simply a mapping from URL to any of those.
:class:`StaticWeb` provides both over a dict of pages; the local corpus plugs in the same way,
e.g. ``search=lambda q, n: local_search.search(q, num=n)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


SearchFn = Callable[[str, int], Sequence[Any]]
PageFn = Callable[[str], Any]
PageSource = PageFn | Mapping[str, Any]


def as_web_hit(hit: Any) -> WebHit:
    """A ``WebHit`` from a WebHit, a SearchHit-like object or a dict."""
    if isinstance(hit, WebHit):
        return hit
    get = hit.get if isinstance(hit, Mapping) else (lambda key, default=None: getattr(hit, key, default))
    link = get("url") or get("link")
    if not link:
        raise ValueError(f"search result without a URL: {hit!r}")
    return WebHit(str(get("title") or ""), str(link), str(get("snippet") or ""))


def as_web_page(found: Any) -> WebPage | None:
    """A ``WebPage`` from a WebPage, HTML bytes or text, or None."""
    if found is None or isinstance(found, WebPage):
        return found
    if isinstance(found, str):
        found = found.encode("utf-8")
    if isinstance(found, (bytes, bytearray)):
        return WebPage(bytes(found))
    raise TypeError(f"cannot serve a page of type {type(found).__name__}")


def page_lookup(source: PageSource) -> Callable[[str], WebPage | None]:
    """``url -> WebPage | None`` from a callable or a mapping."""
    if isinstance(source, Mapping):
        return lambda url: as_web_page(source.get(url))
    return lambda url: as_web_page(source(url))


def search_lookup(search: SearchFn) -> Callable[[str, int], list[WebHit]]:
    """``(query, n) -> [WebHit]`` from any search callable."""
    return lambda query, n: [as_web_hit(h) for h in search(query, n)]


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
