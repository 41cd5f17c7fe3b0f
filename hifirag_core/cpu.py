"""The CPU time a stage's computation takes, over every thread it runs work on.

A stage runs in its question's thread and hands work to pools (pages fetched and ranked in parallel,
the overlapped work of ``hifirag_core.pipeline.overlap``). ``time.process_time`` would also count the
other questions in flight and Prefect's own threads; ``time.thread_time`` of the stage's thread alone
would miss its pools. So the stage opens a :class:`CpuMeter` in a context variable, and each piece of
work a stage submits to a pool runs through :func:`in_context`, which copies the context (the question's
deadline travels the same way) and adds that thread's CPU time to the meter. The embedder's encoding
threads (``hifirag_core.retrieval.embeddings``) do the same, so MiniLM's forward passes count for the stage
that asked for them.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class CpuMeter:
    """CPU seconds summed over the threads that report to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds = 0.0

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


_METER: contextvars.ContextVar[CpuMeter | None] = contextvars.ContextVar("hifirag_cpu_meter", default=None)


@contextlib.contextmanager
def metered() -> Iterator[CpuMeter]:
    """Count this thread's CPU time from here, and that of the work it submits through :func:`in_context`."""
    meter = CpuMeter()
    token = _METER.set(meter)
    began = time.thread_time()
    try:
        yield meter
    finally:
        meter.add(time.thread_time() - began)
        _METER.reset(token)


def _counted(fn: Callable[..., T], *args: Any) -> T:
    meter = _METER.get()
    began = time.thread_time()
    try:
        return fn(*args)
    finally:
        if meter is not None:
            meter.add(time.thread_time() - began)


def in_context(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` to run in another thread with this thread's context (deadline, meter), its CPU time counted."""
    context = contextvars.copy_context()
    # a copy per call: one context cannot be entered by two threads at once (a pool maps over many)
    return lambda *args: context.copy().run(_counted, fn, *args)
