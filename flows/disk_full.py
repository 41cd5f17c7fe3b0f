"""A full disk in a flow, said once: the stage whose result found no space stops its question, and Prefect's own
records of that failure stay off the terminal.

Prefect stores a task's result after the task has returned. When the disk is full it logs the failure (a
traceback for each task, then a warning that "execution will continue") and the task still ends Completed, so a
run on a full disk would go on computing stages whose results it cannot keep, and print hundreds of lines
(issue 42 counted 611). Two logging filters change that:

* ``NoSpaceSeen``, on Prefect's task-run logger, notes in the thread that logged it that a write found no space
  (the stage's own thread: nested tasks run in the thread of their question). The flow's stage runner asks
  ``no_space_seen()`` after each stage and stops the question with ``DiskFullError``
  (``flows.answer._stage_tasks``), and the run ends with its one line.
* ``QuietNoSpace``, on the terminal's handler, keeps those task-run records off the terminal. They still go
  to Prefect's API log of the task run (the UI shows every one), and records of every other logger pass.
"""

from __future__ import annotations

import logging
import threading

from hifirag_core.store.disk import is_disk_full

TASK_RUNS = "prefect.task_runs"
# How Prefect's records name a write that found no space when they carry no exception: its "Failed to write
# result: [Errno 28] ..." warning, and a task's final state ("... OperationalError: database or disk is full").
NO_SPACE_TEXT = ("No space left on device", "database or disk is full", "[Errno 28]")
_seen = threading.local()


def _about_no_space(record: logging.LogRecord) -> bool:
    if record.exc_info and is_disk_full(record.exc_info[1]):
        return True
    if any(isinstance(arg, BaseException) and is_disk_full(arg) for arg in _args(record)):
        return True
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001  (a record whose arguments do not format is not about space)
        return False
    return any(text in message for text in NO_SPACE_TEXT)


def _args(record: logging.LogRecord) -> tuple:
    if isinstance(record.args, tuple):
        return record.args
    return (record.args,) if record.args else ()


class NoSpaceSeen(logging.Filter):
    """Notes, per thread, that a task-run record reported a write that found no space; lets every record pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _about_no_space(record):
            _seen.flag = True
        return True


class QuietNoSpace(logging.Filter):
    """Keeps Prefect's task-run records about a write that found no space off the handler it is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith(TASK_RUNS) and _about_no_space(record))


def no_space_seen() -> bool:
    """Whether a task of this thread reported a write that found no space since the last ask (and forget it)."""
    seen = getattr(_seen, "flag", False)
    _seen.flag = False
    return seen


def watch_for_no_space() -> None:
    """Put both filters in place (once): ``NoSpaceSeen`` on the task-run logger, ``QuietNoSpace`` on every
    terminal handler of the root logger (where Prefect's task-run records end up)."""
    logger = logging.getLogger(TASK_RUNS)
    if not any(isinstance(f, NoSpaceSeen) for f in logger.filters):
        logger.addFilter(NoSpaceSeen())
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not any(isinstance(f, QuietNoSpace) for f in handler.filters):
            handler.addFilter(QuietNoSpace())
