"""What a stage returns: its rows, the model calls behind them, and what later stages need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hifirag_core.records import OK, LLMCallRecord, Record


@dataclass
class StageOutput:
    """One stage's output for one question. The stage function leaves ``stage`` empty: the spec that ran
    it stamps its name here, on every record and on every model call (``StageSpec.run``)."""

    stage: str = ""
    records: list[Record] = field(default_factory=list)
    calls: list[LLMCallRecord] = field(default_factory=list)
    value: Any = None
    status: str = OK
    error: str | None = None
    # How long computing this output took. It travels with the output into the stage cache, so a
    # cache hit still knows what the stage costs to compute.
    compute_seconds: float | None = None
    cpu_seconds: float | None = None  # the CPU time of that computation (``hifirag_core.cpu``)
    round: int = 0  # 0: the first pass; 1..: a follow-up round (stamped by the spec, like ``stage``)
