"""A run's closing counts: why questions went unanswered, errors per backend, and only billed calls as paid."""

from __future__ import annotations

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.tally import RunTally
from hifirag_core.records import AnswerRecord, DraftRecord, LLMCallRecord, PageRecord, SearchResultRecord


def _call(status: str = "ok", tokens: int | None = 10, error: str | None = None) -> LLMCallRecord:
    return LLMCallRecord(backend="openai", model="m", status=status, tokens_in=tokens, error=error)


def test_refused_calls_are_not_paid_and_the_reason_is_counted_per_question():
    refused = _call("failed", None, "openai: connection error: Connection refused")
    tally = RunTally()
    for _ in range(3):
        outputs = [StageOutput("query_plan", [], [refused]),
                   StageOutput("draft", [DraftRecord(status="failed", error=refused.error)], [refused],
                               status="failed", error=refused.error),
                   StageOutput("answer", [AnswerRecord(status="no_answer", error=refused.error)], status="no_answer",
                               error=refused.error)]
        tally.add(outputs, [False, False, False])
    assert (tally.answered, tally.unanswered, tally.paid, tally.unbilled) == (0, 3, 0, 6)
    assert tally.reasons == {"draft failed: openai: connection error: Connection refused": 3}
    assert tally.backend_errors == {"openai m: failed": 6}
    lines = tally.lines()
    assert lines[0].startswith("3 question(s) without an answer: draft failed: openai: connection error")
    assert "openai m: failed x6 (openai: connection error: Connection refused)" in lines[1]
    assert "6 model call(s) got no billed answer" in lines[2]


def test_billed_calls_are_paid_cached_ones_reused_and_search_and_fetch_errors_counted():
    tally = RunTally()
    outputs = [StageOutput("search", [SearchResultRecord(provider="google", status="failed", error="HTTP 403")]),
               StageOutput("fetch", [PageRecord(url="u", fetcher="http", status="timeout", error="read timeout"),
                                     PageRecord(url="v", fetcher="http")]),
               StageOutput("draft", [DraftRecord(text="x")], [_call(), _call("truncated", 20)]),
               StageOutput("refine", [DraftRecord(text="x")], [_call()]),
               StageOutput("answer", [AnswerRecord(text="x")])]
    tally.add(outputs, [False, False, False, True, False])
    assert (tally.answered, tally.paid, tally.reused, tally.unbilled) == (1, 2, 1, 0)
    assert (tally.computed, tally.cache_hits) == (4, 1)
    assert tally.backend_errors == {"search google: failed": 1, "fetch http: timeout": 1, "openai m: truncated": 1}
    assert tally.reasons == {}
