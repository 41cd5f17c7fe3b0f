"""What the inspection pages show, read from the warehouse: an answer sentence by sentence with the section and
snapshot behind each citation (``citation_ledger``), and a run's questions, evidence funnel and stage costs.

Read-only: every function here only queries. The page text they return is raw; the templates escape it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hifirag_core.config import SteerConfig
from hifirag_core.steering import QUESTION_FIELDS
from hifirag_core.store.queries import citation_ledger, thread_of
from hifirag_core.store.warehouse import QueryResult, Warehouse
from hifirag_core.turns import AnswerRef

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _dicts(result: QueryResult) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


@dataclass
class Support:
    """One cited source of a sentence: the section behind it, and the snapshot it was read from."""

    marker: int | None
    url: str
    section_id: str | None
    heading_path: list[str]
    supporting_sentence: str | None
    support: float | None
    support_method: str | None
    decided_by: str | None
    content_sha256: str | None
    fetched_at: datetime | None
    final_url: str | None
    section_text: str | None = None

    def highlighted(self) -> tuple[str, str, str]:
        """The section text cut around the supporting sentence: (before, the sentence, after). The sentence is
        found whatever the whitespace between its words (the ledger keeps a code block's sentence on one line),
        and the section's own text is what is marked, so a code block keeps its lines."""
        text, words = self.section_text or "", (self.supporting_sentence or "").split()
        found = re.search(r"\s+".join(map(re.escape, words)), text) if words else None
        if found is None:
            return text, "", ""
        return text[:found.start()], found.group(0), text[found.end():]


@dataclass
class Sentence:
    index: int
    text: str
    supports: list[Support] = field(default_factory=list)

    @property
    def markers(self) -> list[int]:
        return [s.marker for s in self.supports if s.marker]


@dataclass
class AnswerView:
    run_id: str
    question_id: str
    query: str
    status: str | None
    text: str | None
    abstained: bool
    answerability: str | None
    answerability_score: float | None
    answerability_reason: str | None
    signals: dict[str, Any]
    see_also: list[dict[str, Any]]  # url, title, content_sha256
    cited_urls: list[str]
    sentences: list[Sentence]
    cost_usd: float
    seconds: float | None
    steering: dict[str, Any] = field(default_factory=dict)  # what the question asked for beyond the run's own
    run_steering: dict[str, Any] = field(default_factory=dict)  # the run's own, where the question's does not replace it
    # follow-up turns: the thread up to this answer (its first turn first, this answer last; just this answer when
    # it is in no thread), and the turns that follow it up
    thread: list[TurnView] = field(default_factory=list)
    followed_by: list[TurnView] = field(default_factory=list)

    @property
    def answer_id(self) -> str:
        return AnswerRef(self.run_id, self.question_id).id


@dataclass
class TurnView:
    """One turn of a thread (``thread_turns``)."""

    turn: int
    answer_id: str
    run_id: str
    question_id: str
    question: str
    read_as: str
    status: str | None
    answer: str | None
    follows: str | None = None
    earlier_sections: int = 0
    carried_pages: int = 0
    carried_sections: int = 0
    carried_kept: int = 0
    cited_from_earlier: int = 0


def thread_chain(warehouse: Warehouse, run_id: str, question_id: str) -> tuple[list[TurnView], list[TurnView]]:
    """The turns that lead to an answer, its thread's first turn first and the answer last (the answer alone when
    nothing follows it and it follows nothing; nothing when there is no such question), and the turns that follow
    it up."""
    turns = [TurnView(t["turn"], t["answer_id"], t["run_id"], t["question_id"], t["question"], t["read_as"],
                      t["answer_status"], t["answer"], t["follows"], t["earlier_sections"], t["carried_pages"],
                      t["carried_sections"],
                      t["carried_kept"], t["cited_from_earlier"])
             for t in _dicts(thread_of(warehouse, run_id, question_id))]
    here = AnswerRef(run_id, question_id).id
    by_id = {t.answer_id: t for t in turns}
    chain: list[TurnView] = []
    at: str | None = here
    while at in by_id and len(chain) < len(by_id):
        chain.append(by_id[at])
        at = by_id[at].follows
    if not chain:  # in no thread (yet): the answer alone, as its first turn
        chain = [TurnView(1, here, run_id, question_id, r["query"], r["query"], r["status"], r["text"])
                 for r in _dicts(warehouse.query(
                     "SELECT q.query, a.status, a.text FROM questions q LEFT JOIN answers a USING (run_id, question_id) "
                     "WHERE q.run_id = ? AND q.question_id = ?", [run_id, question_id]))]
    return list(reversed(chain)), [t for t in turns if t.follows == here]


def _steering(meta_json: str | None) -> dict[str, Any]:
    """A question's own steering fields and depth, from ``questions.meta_json``."""
    try:
        meta = json.loads(meta_json or "{}")
    except ValueError:
        return {}
    if not isinstance(meta, dict):
        return {}
    return {k: meta[k] for k in (*QUESTION_FIELDS, "depth") if meta.get(k) not in (None, [], "")}


_UNSTEERED = SteerConfig().model_dump(mode="json")


def _run_steering(config_json: str | None) -> dict[str, Any]:
    """A run's own steering: its config's ``steer`` section where it differs from the defaults (which steer
    nothing), for every question of the run that does not set the field itself."""
    try:
        steer = json.loads(config_json or "{}").get("steer") or {}
    except (ValueError, AttributeError):
        return {}
    if not isinstance(steer, dict):
        return {}
    return {k: v for k, v in steer.items()
            if k in QUESTION_FIELDS and k in _UNSTEERED and v != _UNSTEERED[k] and v not in (None, [], "")}


def _config_json(warehouse: Warehouse, run_id: str) -> str | None:
    rows = warehouse.query("SELECT config_json FROM runs WHERE run_id = ?", [run_id]).rows
    return rows[0][0] if rows else None


def answer_view(warehouse: Warehouse, run_id: str, question_id: str) -> AnswerView | None:
    """One question of a run as its inspection page shows it; None when the run has no such question."""
    found = _dicts(warehouse.query(
        """SELECT q.query, q.meta_json, a.status, a.text, coalesce(a.abstained, false) AS abstained, a.answerability,
                  a.answerability_score, a.answerability_reason, a.answerability_signals,
                  coalesce(a.see_also_urls, []) AS see_also_urls, coalesce(a.cited_urls, []) AS cited_urls,
                  (SELECT coalesce(sum(l.cost_usd) FILTER (WHERE NOT l.cache_hit), 0) FROM llm_calls l
                    WHERE l.run_id = q.run_id AND l.question_id = q.question_id) AS cost_usd,
                  (SELECT sum(r.seconds) FROM stage_runs r
                    WHERE r.run_id = q.run_id AND r.question_id = q.question_id) AS seconds
           FROM questions q LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? AND q.question_id = ?""", [run_id, question_id]))
    if not found:
        return None
    row = found[0]
    texts = {(r["section_id"]): r["text"] for r in _dicts(warehouse.query(
        "SELECT section_id, any_value(text) AS text FROM sections WHERE run_id = ? AND question_id = ? "
        "GROUP BY section_id", [run_id, question_id]))}
    sentences: dict[int, Sentence] = {}
    for r in _dicts(citation_ledger(warehouse, run_id, question_id)):
        sentence = sentences.setdefault(r["sentence_index"], Sentence(r["sentence_index"], r["sentence"]))
        if r["source_rank"] is None:
            continue
        sentence.supports.append(Support(
            r["marker"], r["url"], r["section_id"], list(r["heading_path"] or []), r["supporting_sentence"],
            r["support"], r["support_method"], r["decided_by"], r["content_sha256"], r["fetched_at"], r["final_url"],
            texts.get(r["section_id"])))
    see_also = []
    for url in row["see_also_urls"]:
        page = _dicts(warehouse.query(
            "SELECT title, content_sha256 FROM pages WHERE run_id = ? AND question_id = ? AND url = ? AND status = 'ok' "
            "ORDER BY fetched_at DESC LIMIT 1", [run_id, question_id, url]))
        see_also.append({"url": url, **(page[0] if page else {"title": None, "content_sha256": None})})
    try:
        signals = json.loads(row["answerability_signals"] or "{}")
    except ValueError:
        signals = {}
    own = _steering(row["meta_json"])
    runs = {k: v for k, v in _run_steering(_config_json(warehouse, run_id)).items() if k not in own}
    thread, followed_by = thread_chain(warehouse, run_id, question_id)
    return AnswerView(run_id, question_id, row["query"], row["status"], row["text"], row["abstained"],
                      row["answerability"], row["answerability_score"], row["answerability_reason"],
                      signals if isinstance(signals, dict) else {"signals": signals}, see_also, list(row["cited_urls"]),
                      [sentences[i] for i in sorted(sentences)], float(row["cost_usd"] or 0), row["seconds"],
                      own, runs, thread, followed_by)


FUNNEL_STEPS = ("queries", "URLs found", "URLs kept", "pages fetched", "pages blocked", "sections kept",
                "sources cited")


@dataclass
class RunView:
    run: dict[str, Any]
    questions: list[dict[str, Any]]
    funnel: list[tuple[str, int]]
    stages: list[dict[str, Any]]
    steering: dict[str, Any] = field(default_factory=dict)  # the run's own (its config's steer section)


def run_view(warehouse: Warehouse, run_id: str) -> RunView | None:
    """A run's questions (answerability, cost, time), its evidence funnel and its per-stage time and cost."""
    runs = _dicts(warehouse.query("SELECT * FROM runs WHERE run_id = ?", [run_id]))
    questions = _dicts(warehouse.query(
        """SELECT q.question_id, q.query, q.meta_json, a.status, a.answerability, a.answerability_score,
                  coalesce(a.abstained, false) AS abstained, len(coalesce(a.cited_urls, [])) AS cited,
                  (SELECT coalesce(sum(l.cost_usd) FILTER (WHERE NOT l.cache_hit), 0) FROM llm_calls l
                    WHERE l.run_id = q.run_id AND l.question_id = q.question_id) AS cost_usd,
                  (SELECT round(sum(r.seconds), 2) FROM stage_runs r
                    WHERE r.run_id = q.run_id AND r.question_id = q.question_id) AS seconds,
                  (SELECT coalesce(max(r.round), 0) FROM stage_runs r
                    WHERE r.run_id = q.run_id AND r.question_id = q.question_id) AS rounds
           FROM questions q LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no, q.question_id""", [run_id]))
    if not runs and not questions:
        return None
    for q in questions:
        q["steering"] = _steering(q.pop("meta_json"))
    (counts,) = warehouse.query(
        """SELECT (SELECT coalesce(sum(len(queries)), 0) FROM query_plans WHERE run_id = $1),
                  (SELECT count(DISTINCT (question_id, url)) FROM search_results WHERE run_id = $1 AND url IS NOT NULL),
                  (SELECT count(*) FILTER (WHERE kept) FROM url_decisions WHERE run_id = $1),
                  (SELECT count(*) FILTER (WHERE status = 'ok') FROM pages WHERE run_id = $1),
                  (SELECT count(*) FILTER (WHERE status = 'blocked') FROM pages WHERE run_id = $1),
                  (SELECT count(*) FILTER (WHERE kept) FROM section_decisions WHERE run_id = $1),
                  (SELECT coalesce(sum(len(cited_urls)), 0) FROM answers WHERE run_id = $1)""", [run_id]).rows
    stages = _dicts(warehouse.query(
        "SELECT stage, question_stages, from_cache, seconds, llm_calls_paid, cost_usd FROM stage_costs "
        "WHERE run_id = ? ORDER BY seconds DESC NULLS LAST", [run_id]))
    return RunView(runs[0] if runs else {"run_id": run_id}, questions,
                   list(zip(FUNNEL_STEPS, (int(c or 0) for c in counts), strict=True)), stages,
                   _run_steering(runs[0].get("config_json") if runs else None))


def recent_runs(warehouse: Warehouse, limit: int = 20) -> list[dict[str, Any]]:
    """The newest runs, for the front page."""
    return _dicts(warehouse.query(
        "SELECT run_id, status, variant, n_questions, n_answered, started_at FROM runs "
        "ORDER BY started_at DESC LIMIT ?", [limit]))


def funnel_svg_bars(funnel: list[tuple[str, int]], width: int = 420, bar: int = 22) -> list[dict[str, Any]]:
    """The funnel's bars laid out for the inline SVG chart: label, count, y and bar width (the widest: the
    largest count)."""
    top = max((n for _, n in funnel), default=0) or 1
    return [{"label": label, "count": n, "y": i * (bar + 6), "w": round(width * n / top, 1), "h": bar}
            for i, (label, n) in enumerate(funnel)]
