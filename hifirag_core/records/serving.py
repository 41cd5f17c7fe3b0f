"""The service's own table: one row per request to ``hifirag serve``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from hifirag_core.records import Record, utcnow


@dataclass(kw_only=True)
class ServedRequestRecord(Record):
    """One request the service answered: how, and how fast."""

    TABLE: ClassVar[str] = "served_requests"
    stage: str = "serve"
    endpoint: str = ""  # /run | /evaluate | mcp:ask (hifirag mcp)
    iid: str | None = None  # the caller's id (/evaluate)
    outcome: str = ""  # complete | deadline | disconnected | failed
    report: str = ""  # answered | abstained | draft | none (see serving.answer_report)
    received_at: datetime = dataclasses.field(default_factory=utcnow)
    first_event_s: float | None = None  # /run: until the first message was sent
    answer_s: float | None = None  # /run: until the answer began
    seconds: float | None = None  # until the response ended
    pipeline_seconds: float | None = None  # until every stage had finished and the rows were written
    events: int = 0  # messages sent, heartbeats included
    heartbeats: int = 0
    stages: int | None = None
    stages_from_cache: int | None = None


SERVING_RECORD_TYPES: tuple[type[Record], ...] = (ServedRequestRecord,)
