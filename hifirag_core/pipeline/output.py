"""What a stage returns: its rows, the model and search calls behind them, and what later stages need."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from hifirag_core.records import OK, LLMCallRecord, Record, SearchCallRecord


@dataclass
class StageOutput:
    """One stage's output for one question. The stage function leaves ``stage`` empty: the spec that ran
    it stamps its name here, on every record and on every model call (``StageSpec.run``)."""

    stage: str = ""
    records: list[Record] = field(default_factory=list)
    calls: list[LLMCallRecord] = field(default_factory=list)
    # The search stage's provider calls (``search_calls``). Like ``calls``, not part of what later stages
    # read (never in a cache key); a tuple so an output cached before the field existed still has it.
    search_calls: tuple[SearchCallRecord, ...] = ()
    value: Any = None
    status: str = OK
    error: str | None = None
    # How long computing this output took. It travels with the output into the stage cache, so a
    # cache hit still knows what the stage costs to compute.
    compute_seconds: float | None = None
    cpu_seconds: float | None = None  # the CPU time of that computation (``hifirag_core.cpu``)
    round: int = 0  # 0: the first pass; 1..: a follow-up round (stamped by the spec, like ``stage``)


# The per-question tables of the calls behind the stages' rows, and the output field that holds them.
CALL_TABLES: dict[str, str] = {"llm_calls": "calls", "search_calls": "search_calls"}


def question_calls(table: str, outputs: Iterable[tuple[StageOutput, bool]]) -> list[LLMCallRecord | SearchCallRecord]:
    """A question's calls of one ``CALL_TABLES`` table, over its (output, reused) pairs: a reused stage's
    calls are marked ``cache_hit`` (their cost was paid by the run that made them)."""
    return [replace(c, cache_hit=True) if reused else c
            for output, reused in outputs for c in getattr(output, CALL_TABLES[table])]
