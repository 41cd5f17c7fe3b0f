"""The fetch stage's way to documents a search provider already sent (MMU-RAGent's FineWeb and ClueWeb22).

:class:`CarriedTextFetcher` wraps the run's fetcher: a URL whose document came with a search result is
answered from that document, without a request (``fetcher`` = the provider, ``kind`` = ``text``,
``text_source`` = ``search_provider``); any other URL goes to the wrapped fetcher (``text_source`` =
``fetched``). The search backend has the documents it found in memory and the ones any process found in the data
root's ``DocumentStore``, so a question whose search results came from a cache still reads their text.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from hifirag_core.types import Fetcher, FetchResult

TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"


class CarriesText(Protocol):
    def carried(self, url: str): ...  # -> mmu_search.CarriedDocument | None


class CarriedTextFetcher:
    """The inner fetcher, except for URLs whose text the search provider sent."""

    def __init__(self, inner: Fetcher, source: CarriesText):
        self._inner = inner
        self._source = source
        self.name = inner.name

    def fetch(self, url: str) -> FetchResult:
        """The carried document as a fetched page, else the inner fetcher's result."""
        doc = self._source.carried(url)
        if doc is None:
            return replace(self._inner.fetch(url), text_source="fetched")
        body = doc.text.encode("utf-8")
        return FetchResult(url=url, status="ok", fetcher=doc.provider, final_url=url, http_status=None,
                           content_type=TEXT_CONTENT_TYPE, body=body, kind="text", encoding="utf-8",
                           text_source="search_provider")

    def close(self) -> None:
        """Close the inner fetcher."""
        close = getattr(self._inner, "close", None)
        if close:
            close()


class _AnyCarrier:
    """The providers of a fused search (``search.providers``) that send documents, asked in turn."""

    def __init__(self, carriers: list[CarriesText]):
        self._carriers = carriers

    def carried(self, url: str):
        return next((doc for c in self._carriers if (doc := c.carried(url)) is not None), None)


def with_carried_text(fetcher: Fetcher, search: object) -> Fetcher:
    """``fetcher`` wrapped when ``search`` (one provider, or the ``members`` of several) sends documents with
    its results; else ``fetcher`` itself."""
    members = getattr(search, "members", (search,))
    carriers = [m for m in members if callable(getattr(m, "carried", None))]
    if not carriers:
        return fetcher
    return CarriedTextFetcher(fetcher, carriers[0] if len(carriers) == 1 else _AnyCarrier(carriers))
