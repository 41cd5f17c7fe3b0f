"""Work a question can start before the stage that owns it runs (``limits.overlap``).

The flow runs a question's stages one after another, each a cached task of its own. Within that order
some work waits for no one: a page fetched first can be split into sections and its sections ranked
while the other pages still download (section ranking judges each page in its own call, as in A.3,
so one page's ranking never reads another page). The URL filter's decision is the only barrier.

So the fetch stage, with overlap on, hands each page as it arrives to a :class:`PagePipeline`, which
sections and ranks it on a worker thread and leaves the results in the runtime's :class:`EarlyWork`;
the fetch stage returns once every page's follow-on work has finished. The sections and section
ranking stages then run as always, with the same inputs, cache keys and rows, and take each page's
result from ``EarlyWork`` instead of computing it again. What they take is what they would have
computed: the same function on the same page, keyed by everything that function reads. They
assemble their rows in page order, so arrival order never shows. When a stage is not computed (its
output comes from the stage cache or a stored run), its early results are never taken and age out.

A result that raised is not kept: the stage computes that page itself, as it would have (and a
backend that is still down raises there, for the orchestrator to retry).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Literal

from hifirag_core.cpu import in_context
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord
from hifirag_core.types import PageOverview, SectionPreview

# Pages fetched, or judged by section ranking, at once within one question (providers' limits still apply).
PAGE_PARALLELISM = 8

# Early results waiting for their stage, per process runtime. A question's are taken within seconds;
# what is never taken (a later stage came from the cache) is dropped oldest first past this many.
KEEP_EARLY = 1024


@dataclass(frozen=True)
class EarlyKey:
    """What a piece of early work is filed under: its kind, the question whose stage takes it (two questions
    in flight never take each other's work) and everything the work reads (with the runtime's config). The
    fetch stage files work under these keys and the sections and section ranking stages take it by them, so
    both build them here."""

    kind: Literal["sections", "ranking"]
    question_id: str
    reads: tuple[Hashable, ...]

    @classmethod
    def sections(cls, question: Question, page: PageRecord) -> EarlyKey:
        """A page's sections: they depend on its bytes and how they were served."""
        return cls("sections", question.id, (page.url, page.content_sha256, page.kind, page.final_url,
                                             page.content_type))

    @classmethod
    def ranking(cls, question: Question, overview: PageOverview, previews: list[SectionPreview],
                per_page: int | None, ranking_on: bool) -> EarlyKey:
        """A page's ranking: the question, the page's overview and previews, the cap, whether ranking is on (and
        the runtime's filter model)."""
        return cls("ranking", question.id, (question.query, overview, tuple(previews), per_page, ranking_on))


# A page's follow-on work: (key, result) pairs, each result offered as soon as it is computed.
Follow = Callable[[PageRecord], Iterator[tuple[EarlyKey, Any]]]


class EarlyWork:
    """Results computed ahead of the stage that owns them, by key, each taken once."""

    def __init__(self, keep: int = KEEP_EARLY):
        self._lock = threading.Lock()
        self._results: OrderedDict[EarlyKey, Any] = OrderedDict()
        self._keep = keep
        self.taken = 0  # results a stage took instead of computing them (tests and benchmarks read it)

    def offer(self, key: EarlyKey, result: Any) -> None:
        with self._lock:
            self._results[key] = result
            self._results.move_to_end(key)
            while len(self._results) > self._keep:
                self._results.popitem(last=False)

    def take(self, key: EarlyKey) -> Any | None:
        """The result for ``key``, or None when there is none (not computed early, or it raised)."""
        with self._lock:
            result = self._results.pop(key, None)
            self.taken += result is not None
            return result

    def __len__(self) -> int:
        with self._lock:
            return len(self._results)


class PagePipeline:
    """One fetch stage's pages, each sent on to ``follow`` (on a worker thread) as soon as it arrives; the
    stage leaves the ``with`` block only when every page's follow-on work has finished.

    ``follow`` yields ``(key, result)`` pairs in the order it computes them (a page's sections, then their
    ranking, which needs them); each is offered to ``early`` at once. An exception ends that page's work:
    what it was computing is left to its stage. ``follow=None`` (overlap off): pages go nowhere.
    """

    def __init__(self, early: EarlyWork, follow: Follow | None, workers: int):
        self.early = early
        self.follow = follow
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="hifirag-overlap") \
            if follow is not None else None
        self._running: list[Future] = []

    def arrived(self, page: PageRecord) -> None:
        if self._pool is not None:
            self._running.append(self._pool.submit(in_context(self._run), page))

    def _run(self, page: PageRecord) -> None:
        assert self.follow is not None
        try:
            for key, result in self.follow(page):
                self.early.offer(key, result)
        except Exception:  # noqa: BLE001 - the owning stage computes it again and reports what it meets
            return

    def join(self) -> None:
        """Wait for every page's follow-on work (the next stages take its results)."""
        if self._pool is not None:
            wait(self._running)
            self._pool.shutdown(wait=True)

    def __enter__(self) -> PagePipeline:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.join()
