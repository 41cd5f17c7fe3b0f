"""Who watches the writer write: a listener for the text of a streamed reply as it grows.

The writer's chat model (``limits.stream_writer``) asks for its draft and refinement as streams; each piece
that arrives goes to the listener of the thread that made the call, as ``(stage, text so far)``. The service
sets one around a question (``listening``) to show the draft growing in ``/run``; a batch run sets none and
the stream only ends sooner on the wire. The call still returns the whole reply, and only whole replies
reach the warehouse and the stage cache, so a listener sees progress, never a result.

A context variable rather than a parameter: the chat model is shared by every question of a run, and the
listener belongs to one question, whose stages run in the thread (or a copy of its context) that set it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar

# (stage, the reply's text so far); called in the thread of the model call, so it must be quick
Listener = Callable[[str, str], None]

# the stages whose replies are streamed when the writer streams
STREAMED_STAGES = frozenset({"draft", "refine"})

_listener: ContextVar[Listener | None] = ContextVar("hifirag_writer_listener", default=None)
log = logging.getLogger("hifirag.streaming")


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Send the growing text of every streamed reply made in this context to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def progress(stage: str) -> Callable[[str], None]:
    """What a streaming call reports its text so far to: the context's listener, or nothing.

    A listener that raises never breaks the call: the reply matters more than showing it. It is logged once
    and not called again during that call.
    """
    listener = _listener.get()

    def report(text: str) -> None:
        nonlocal listener
        if listener is None:
            return
        try:
            listener(stage, text)
        except Exception:
            log.exception("the listener of stage %s failed; the reply goes on without it", stage)
            listener = None

    return report
