"""Follow-up turns in the pipeline (beyond the paper): the earlier turn read from the warehouse, and what of it
each stage reads.

Where a question is admitted (the service's request, a question file's line when a run is planned, a
reprocess), :func:`load_earlier_turn` reads the answer it follows from the warehouse, never from memory, so a
thread survives a restart: the thread's questions as the pipeline read them, the answer, and the pages and
sections that turn kept. An unknown answer, one the caller may not follow (the service follows only its own)
or one that did not answer is a ``ThreadError`` naming it.

Three stages read the earlier turn, and only for a follow-up, so a question that follows nothing keeps its
parameters and cache keys exactly:

* the query plan reads the thread (``thread``): it restates the follow-up as a question that stands alone
  (offline: the follow-up with the earlier question's keywords; with a model: ``prompts/restate.txt``), and
  every later stage reads that question (``Trail.question``);
* the fetch stage reads the earlier turn's kept pages (``carried``): those this turn did not fetch itself
  join its pages, marked ``reused_from = "turn:<answer id>"``, under this question's steering;
* the sections stage reads the earlier turn's kept sections (``carried``): a carried page brings exactly those,
  and section ranking then judges them with the new pages' sections, so they are ranked again, not kept blindly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.questions import Question
from hifirag_core.records import OK, PageRecord, Record, SectionRecord
from hifirag_core.store.warehouse import Warehouse, WarehouseError
from hifirag_core.turns import (
    CARRIED_FROM,
    AnswerRef,
    EarlierTurn,
    ThreadError,
    carried_from,
    parse_answer_id,
)

# The most turns a thread's questions are read back through (a loop in the rows cannot hang a request).
MAX_TURNS = 50
# Who may follow an answer: None when the caller may, else why not (the service follows only its own runs).
Owner = Callable[[str], str | None]


def load_earlier_turn(warehouse: Warehouse, follows: str, owner: Owner | None = None) -> EarlierTurn:
    """The answer ``follows`` names, with what a follow-up reads of it (``ThreadError`` when it cannot be followed)."""
    ref = parse_answer_id(follows)
    if owner is not None and (why := owner(ref.run_id)) is not None:
        raise ThreadError(f"follows: {ref.id} is not an answer of this service ({why})")
    try:
        found = _rows(warehouse, "SELECT q.query, a.status, a.text FROM questions q LEFT JOIN answers a "
                                 "USING (run_id, question_id) WHERE q.run_id = ? AND q.question_id = ?", ref)
    except WarehouseError as exc:
        raise ThreadError(f"follows: {ref.id} could not be read ({exc})") from None
    if not found:
        raise ThreadError(f"follows: no answer {ref.id} (no question {ref.question_id!r} in run {ref.run_id!r})")
    status, text = found[0]["status"], found[0]["text"]
    if status is None:
        raise ThreadError(f"follows: {ref.id} has no answer yet (it is still being answered, or stopped before "
                          "its answer); follow it once it is complete")
    if status != OK or not text:
        raise ThreadError(f"follows: {ref.id} did not answer its question (status {status}); follow an answer "
                          "that was given")
    place = _rows(warehouse, "SELECT turn, thread_run_id, thread_question_id FROM turns "
                             "WHERE run_id = ? AND question_id = ?", ref)
    turn = int(place[0]["turn"]) if place else 1
    thread = AnswerRef(place[0]["thread_run_id"], place[0]["thread_question_id"]) if place else ref
    sections = _kept_sections(warehouse, ref)
    return EarlierTurn(ref, turn, thread, _thread_questions(warehouse, ref), text, _kept_pages(warehouse, ref, sections),
                       sections)


def attach_earlier(warehouse: Warehouse, questions: Sequence[Question], owner: Owner | None = None
                   ) -> tuple[list[Question], list[str]]:
    """``questions`` with the answer each follows (``meta["follows"]``) read in, and a problem per question whose
    answer cannot be followed, naming its line. A question of the same set cannot be followed: its answer does not
    exist until the set has run (questions run at once, in no order), so a thread is asked one turn at a time."""
    out, problems = [], []
    ids = {q.id for q in questions}
    for q in questions:
        follows = q.meta.get("follows")
        if follows is None:
            out.append(q)
            continue
        if isinstance(follows, str) and follows in ids:
            problems.append(f"line {q.line_no} ({q.id}): follows: {follows!r} is question {follows} of this file, "
                            "whose answer does not exist yet; a line follows an answer already in the warehouse, "
                            f"<run_id>/<question_id>: run the file without this line first, then follow "
                            f"<that run's id>/{follows}")
            continue
        try:
            out.append(dataclasses.replace(q, earlier=load_earlier_turn(warehouse, follows, owner)))
        except ThreadError as exc:
            problems.append(f"line {q.line_no} ({q.id}): {exc}")
    return out, problems


def _rows(warehouse: Warehouse, sql: str, ref: AnswerRef) -> list[dict[str, Any]]:
    result = warehouse.query(sql, [ref.run_id, ref.question_id])
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _thread_questions(warehouse: Warehouse, ref: AnswerRef) -> tuple[str, ...]:
    """Each turn's question as the pipeline read it (its restated form when it had one), from the thread's first
    to ``ref``'s."""
    questions: list[str] = []
    at: AnswerRef | None = ref
    seen: set[AnswerRef] = set()
    while at is not None and at not in seen and len(questions) < MAX_TURNS:
        seen.add(at)
        rows = _rows(warehouse, """
            SELECT coalesce((SELECT any_value(p.question) FROM query_plans p WHERE p.run_id = q.run_id
                              AND p.question_id = q.question_id AND p.stage = 'query_plan' AND p.round = 0),
                            q.query) AS asked,
                   t.follows_run_id, t.follows_question_id
            FROM questions q LEFT JOIN turns t USING (run_id, question_id)
            WHERE q.run_id = ? AND q.question_id = ?""", at)
        if not rows:
            break
        questions.append(rows[0]["asked"])
        before = rows[0]["follows_run_id"]
        at = AnswerRef(before, rows[0]["follows_question_id"]) if before else None
    return tuple(reversed(questions))


def _kept_sections(warehouse: Warehouse, ref: AnswerRef) -> tuple[SectionRecord, ...]:
    """The sections ``ref``'s question kept, in any round, each once, in page order then rank."""
    rows = _rows(warehouse, """
        WITH kept AS (SELECT url, section_id, min(source_order) AS source_order, min(rank) AS rank
                      FROM section_decisions WHERE run_id = $1 AND question_id = $2 AND kept GROUP BY url, section_id),
             texts AS (SELECT * FROM sections WHERE run_id = $1 AND question_id = $2 AND status = 'ok'
                       QUALIFY row_number() OVER (PARTITION BY url, section_id ORDER BY round) = 1)
        SELECT texts.* FROM texts JOIN kept USING (url, section_id)
        ORDER BY kept.source_order, kept.rank, texts.ord""", ref)
    return tuple(_record(SectionRecord, row) for row in rows)


def _kept_pages(warehouse: Warehouse, ref: AnswerRef, sections: tuple[SectionRecord, ...]) -> tuple[PageRecord, ...]:
    """The pages of ``sections``, as ``ref``'s question read them, marked as carried from it."""
    urls = list(dict.fromkeys(s.url for s in sections))
    if not urls:
        return ()
    rows = _rows(warehouse, """
        SELECT * FROM pages WHERE run_id = $1 AND question_id = $2 AND status = 'ok' AND content_sha256 IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY url ORDER BY fetched_at DESC NULLS LAST, round) = 1""", ref)
    by_url = {row["url"]: row for row in rows}
    return tuple(dataclasses.replace(_record(PageRecord, by_url[url]), reused_from=f"{CARRIED_FROM}{ref.id}")
                 for url in urls if url in by_url)


def _record(cls: type[Record], row: dict[str, Any]) -> Any:
    """A stage record from a warehouse row, without the run, question, stage and round it was written under."""
    names = {f.name for f in dataclasses.fields(cls)} - {"run_id", "question_id", "stage", "round"}
    return cls(**{k: v for k, v in row.items() if k in names})


# --- what the stages read of the earlier turn (nothing, for a question that follows nothing) ---------------


def thread_input(question: Question) -> dict[str, Any]:
    """The query plan's parameter: the thread's questions and the last answer."""
    return {"thread": question.earlier.context} if question.earlier is not None else {}


def carried_pages_input(question: Question, search: StageOutput) -> dict[str, Any]:
    """The fetch stage's parameter: the pages the earlier turn kept a section of (none in a variant that reads no web
    content, whose search is skipped: the baselines answer from the question alone, a follow-up as well)."""
    if question.earlier is None or search.status == "skipped":
        return {}
    return {"carried": question.earlier.pages}


def carried_sections_input(question: Question) -> dict[str, Any]:
    """The sections stage's parameter: the sections the earlier turn kept."""
    return {"carried": question.earlier.sections} if question.earlier is not None else {}


def carry_pages(carried: Sequence[PageRecord], read: set[str], first_order: int) -> list[PageRecord]:
    """Copies of the carried pages this question did not read itself (``read``: its URLs), numbered on from
    ``first_order``."""
    fresh = [p for p in carried if p.url not in read]
    return [dataclasses.replace(p, order=order) for order, p in enumerate(fresh, first_order)]


def carried_sections(page: PageRecord, carried: Sequence[SectionRecord]) -> list[SectionRecord] | None:
    """Copies of the earlier turn's kept sections of a carried page; None for a page this question read itself."""
    if carried_from(page) is None:
        return None
    return [dataclasses.replace(s) for s in carried if s.url == page.url]
