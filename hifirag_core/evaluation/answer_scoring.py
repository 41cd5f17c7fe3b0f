"""Score every question of an answer run from its warehouse rows.

Per question (one ``ScoreRecord`` per metric; the value is NULL where a metric does not apply,
with the reason in ``detail_json``):

* ``rouge_l_f1`` and the BERTScore metric (DeBERTa or MiniLM, see ``metrics.semantic``) against
  the reference, and both again for the question echoed as the answer (``echo_*``): the floor a
  semantic metric must be read against. A question whose reference is null is *unscorable*: its
  rows say so and carry no value, never a 0. A question without an answer scores 0.
* ``answer_words`` and ``answered``;
* ``citation_precision`` and ``citation_recall`` (``metrics.citations``) of the per-sentence
  citations the citation stage decided (``answer_sentences``), whatever the writer, against the
  text of the sections the ranking kept for each cited source;
* on known-item data (the FAQ set, protocol b): ``gold_section_kept`` (by section ranking),
  ``gold_page_cited`` and ``gold_section_cited`` (both); on questions with several gold sections (the
  two-part set), ``gold_sections_all_cited``: every one of them kept (in any round) and its page cited;
* ``abstained`` (the answer says the sources do not answer), and where the questions say whether
  the corpus answers them (``answerable`` in the question file, as in the answerability set):
  ``abstention_precision`` (per abstention: 1 when the question was unanswerable),
  ``abstention_recall`` (per unanswerable question: 1 when the answer abstained) and
  ``answered_and_cited`` (per answerable question: 1 when the answer did not abstain and cites the
  gold section where the question has one, else cites at least one source);
* ``cost_usd``, ``tokens_in``, ``tokens_out`` (every model call behind the answer, paid or reused)
  and ``latency_s``: the seconds the question's stages took when they were computed. A stage this
  run took from the cache counts with the time it took in the run that computed it; when that
  row is gone, an earlier evaluation's figure for exactly the same stage cache keys is used, else
  the value is NULL.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from hifirag_core.hashing import stable_hash
from hifirag_core.metrics.citations import CitedSentence, score_claims, source_passages
from hifirag_core.metrics.semantic import BertScoreSpec, bertscore_f1
from hifirag_core.metrics.text_metrics import rouge_l
from hifirag_core.records import ScoreRecord
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.text import word_count

UNSCORABLE = "reference is null"
Similarity = Callable[[list[str], list[str]], np.ndarray]


@dataclass
class AnsweredQuestion:
    """What scoring needs of one question of a run."""

    question_id: str
    query: str
    reference: str | None
    line_no: int
    answer: str = ""  # empty when the run has no answer
    answer_status: str | None = None
    # the claim sentences with the URLs the citation stage cited for each, in answer order
    sentences: list[tuple[str, list[str]]] = field(default_factory=list)
    has_gold: bool = False
    answerable: bool | None = None  # whether the corpus answers it, when the question file says
    abstained: bool = False
    cites: bool = False  # the answer cites at least one source

    @property
    def scorable(self) -> bool:
        return self.reference is not None and bool(self.reference.strip())


def load_answers(warehouse: Warehouse, run_id: str) -> list[AnsweredQuestion]:
    """Every question of the run with its answer and its per-sentence citations."""
    rows = warehouse.query(
        """SELECT q.question_id, q.query, q.reference, coalesce(q.line_no, 0), q.gold_url IS NOT NULL,
                  a.status, a.text, TRY_CAST(json_extract(q.meta_json, '$.answerable') AS BOOLEAN),
                  coalesce(a.abstained, false), coalesce(len(a.cited_urls), 0) > 0
           FROM questions q
           LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no, q.question_id""", [run_id]).rows
    cited: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)
    for qid, sentence, urls in warehouse.query(
            """SELECT question_id, sentence, urls FROM answer_sentences WHERE run_id = ?
               ORDER BY question_id, sentence_index""", [run_id]).rows:
        cited[qid].append((sentence, list(urls or [])))
    return [AnsweredQuestion(qid, query, ref, line_no, (text or "").strip(), status, cited.get(qid, []), bool(gold),
                             answerable, bool(abstained), bool(cites))
            for qid, query, ref, line_no, gold, status, text, answerable, abstained, cites in rows]


def load_source_texts(warehouse: Warehouse, run_id: str) -> dict[tuple[str, str], str]:
    """(question, url) -> the text of the sections the ranking kept for that page, best first."""
    rows = warehouse.query(
        """SELECT d.question_id, d.url, s.text FROM section_decisions d
           JOIN sections s USING (run_id, question_id, section_id)
           WHERE d.run_id = ? AND d.kept AND s.text IS NOT NULL
           ORDER BY d.question_id, d.url, d.rank""", [run_id]).rows
    texts: dict[tuple[str, str], list[str]] = defaultdict(list)
    for qid, url, text in rows:
        texts[(qid, url)].append(text)
    return {key: "\n\n".join(parts) for key, parts in texts.items()}


def load_known_item(warehouse: Warehouse, run_id: str) -> dict[str, tuple[bool, bool]]:
    """question -> (gold section kept by section ranking, gold page cited), from the evidence funnel."""
    rows = warehouse.query("SELECT question_id, gold_section_kept, cited FROM evidence_funnel WHERE run_id = ?",
                           [run_id]).rows
    return {qid: (bool(kept), bool(cited)) for qid, kept, cited in rows}


def load_costs(warehouse: Warehouse, run_id: str) -> dict[str, tuple[float, int, int, int]]:
    """question -> (cost in USD, tokens in, tokens out, model calls), paid or reused alike."""
    rows = warehouse.query(
        """SELECT question_id, coalesce(sum(cost_usd), 0), coalesce(sum(tokens_in), 0),
                  coalesce(sum(tokens_out), 0) + coalesce(sum(tokens_thinking), 0), count(*)
           FROM llm_calls WHERE run_id = ? GROUP BY question_id""", [run_id]).rows
    return {qid: (float(cost), int(tin), int(tout), int(n)) for qid, cost, tin, tout, n in rows}


def computed_seconds(warehouse: Warehouse) -> dict[str, float]:
    """Stage cache key -> the seconds it took where some run computed it (read before a rerun overwrites the
    rows of a run with cache hits)."""
    rows = warehouse.query("""SELECT cache_key, max(seconds) FROM stage_runs
                              WHERE NOT cached AND cache_key IS NOT NULL GROUP BY cache_key""").rows
    return {key: float(seconds) for key, seconds in rows}


def stage_seconds(warehouse: Warehouse, run_id: str,
                  known: Mapping[str, float] | None = None) -> list[tuple[str, str, bool, str | None, float | None]]:
    """Each stage run of ``run_id`` as (question, stage, cached, cache key, compute seconds or None).

    The seconds are those recorded with the output; for rows from before that was recorded, the wall
    time of the run that computed the cache key, else ``known`` (times by cache key recorded before
    this run was last rerun).
    """
    rows = warehouse.query(
        """WITH computed AS (
               SELECT cache_key, max(seconds) AS seconds FROM stage_runs
               WHERE NOT cached AND cache_key IS NOT NULL GROUP BY cache_key)
           SELECT r.question_id, r.stage, r.cached, r.cache_key,
                  coalesce(r.compute_seconds, CASE WHEN NOT r.cached THEN r.seconds ELSE c.seconds END)
           FROM stage_runs r LEFT JOIN computed c USING (cache_key)
           WHERE r.run_id = ? ORDER BY r.question_id, r.stage""", [run_id]).rows
    return [(qid, stage, bool(cached), key, seconds if seconds is not None or not known else known.get(key))
            for qid, stage, cached, key, seconds in rows]


def load_latencies(warehouse: Warehouse, run_id: str,
                   known: Mapping[str, float] | None = None) -> dict[str, tuple[float | None, str, int, int]]:
    """question -> (compute seconds or None, hash of its stage cache keys, stages from cache, stages).

    ``known`` adds compute times by cache key recorded before this run was last rerun.
    """
    by_question: dict[str, list[tuple[str, bool, str | None, float | None]]] = defaultdict(list)
    for qid, stage, cached, key, seconds in stage_seconds(warehouse, run_id, known):
        by_question[qid].append((stage, cached, key, seconds))
    earlier = _earlier_latencies(warehouse)
    out: dict[str, tuple[float | None, str, int, int]] = {}
    for qid, stages in by_question.items():
        keys = stable_hash(sorted((s, k or "") for s, _, k, _ in stages))
        known = [sec for _, _, _, sec in stages]
        total = None if any(sec is None for sec in known) else float(sum(known))  # type: ignore[arg-type]
        if total is None:
            total = earlier.get(keys)
        out[qid] = (total, keys, sum(1 for _, c, _, _ in stages if c), len(stages))
    return out


def _earlier_latencies(warehouse: Warehouse) -> dict[str, float]:
    """Stage-cache-keys hash -> compute seconds, as earlier evaluations recorded them."""
    rows = warehouse.query(
        """SELECT json_extract_string(detail_json, '$.keys') AS keys, max(value) FROM scores
           WHERE metric = 'latency_s' AND value IS NOT NULL AND detail_json IS NOT NULL GROUP BY keys""").rows
    return {keys: float(value) for keys, value in rows if keys}


@dataclass
class RunScores:
    """A run's per-question score rows, and the question ids that could not be scored."""

    records: list[ScoreRecord]
    unscorable: list[str]
    n_answered: int


def _row(qid: str, metric: str, value: float | None, variant: str, dataset: str, **detail: object) -> ScoreRecord:
    return ScoreRecord(question_id=qid, metric=metric, value=value, variant=variant, dataset=dataset,
                       detail_json=json.dumps(detail, sort_keys=True) if detail else None)


def echo_scores(questions: list[AnsweredQuestion], spec: BertScoreSpec | None,
                batch_size: int = 32) -> dict[str, dict[str, float]]:
    """question -> the reference metrics of the question echoed as its own answer (the floor)."""
    scorable = [q for q in questions if q.scorable]
    out: dict[str, dict[str, float]] = {q.question_id: {"rouge_l_f1": rouge_l(q.query, q.reference or "")[2]}
                                        for q in scorable}
    if spec is not None and scorable:
        values = bertscore_f1([q.query for q in scorable], [q.reference or "" for q in scorable], spec, batch_size)
        for q, value in zip(scorable, values, strict=True):
            out[q.question_id][spec.metric] = value
    return out


def score_questions(
    questions: list[AnsweredQuestion],
    *,
    variant: str,
    dataset: str,
    spec: BertScoreSpec | None,
    similarity: Similarity,
    support_threshold: float,
    source_texts: Mapping[tuple[str, str], str],
    known_item: Mapping[str, tuple[bool, bool]] | None,
    costs: Mapping[str, tuple[float, int, int, int]],
    latencies: Mapping[str, tuple[float | None, str, int, int]],
    echo: Mapping[str, Mapping[str, float]],
    batch_size: int = 32,
    gold_sections: Mapping[str, Sequence[tuple[bool, bool]]] | None = None,
) -> RunScores:
    """Every metric of every question of one run (see the module docstring)."""
    records: list[ScoreRecord] = []
    reference_metrics = ["rouge_l_f1", *([spec.metric] if spec else [])]
    scorable = [q for q in questions if q.scorable]
    semantic: dict[str, float] = {}
    if spec is not None and scorable:
        values = bertscore_f1([q.answer for q in scorable], [q.reference or "" for q in scorable], spec, batch_size)
        semantic = {q.question_id: v for q, v in zip(scorable, values, strict=True)}
    for q in questions:
        qid = q.question_id
        answered = bool(q.answer)
        if q.scorable:
            records.append(_row(qid, "rouge_l_f1", rouge_l(q.answer, q.reference or "")[2] if answered else 0.0,
                                variant, dataset, **({} if answered else {"no_answer": q.answer_status or "missing"})))
            if spec is not None:
                records.append(_row(qid, spec.metric, semantic[qid], variant, dataset))
            for metric in reference_metrics:
                records.append(_row(qid, f"echo_{metric}", echo.get(qid, {}).get(metric), variant, dataset))
        else:
            for metric in reference_metrics:
                for name in (metric, f"echo_{metric}"):
                    records.append(_row(qid, name, None, variant, dataset, unscorable=UNSCORABLE))
        records.append(_row(qid, "answered", float(answered), variant, dataset))
        records.append(_row(qid, "answer_words", float(word_count(q.answer)), variant, dataset))
        records.extend(_citation_rows(q, variant, dataset, similarity, support_threshold, source_texts))
        if known_item is not None and q.has_gold:
            kept, cited = known_item.get(qid, (False, False))
            records.append(_row(qid, "gold_section_kept", float(kept), variant, dataset))
            records.append(_row(qid, "gold_page_cited", float(cited), variant, dataset))
            records.append(_row(qid, "gold_section_cited", float(kept and cited), variant, dataset))
        if gold_sections and qid in gold_sections:  # two-part questions: every gold section, each kept and cited
            found = gold_sections[qid]
            records.append(_row(qid, "gold_sections_all_cited", float(all(k and c for k, c in found)), variant,
                                dataset, parts=len(found), cited=sum(1 for k, c in found if k and c)))
        records.extend(_abstention_rows(q, known_item, variant, dataset))
        cost, tokens_in, tokens_out, calls = costs.get(qid, (0.0, 0, 0, 0))
        records.append(_row(qid, "cost_usd", cost, variant, dataset, model_calls=calls))
        records.append(_row(qid, "tokens_in", float(tokens_in), variant, dataset))
        records.append(_row(qid, "tokens_out", float(tokens_out), variant, dataset))
        seconds, keys, from_cache, n_stages = latencies.get(qid, (None, "", 0, 0))
        records.append(_row(qid, "latency_s", seconds, variant, dataset, keys=keys, stages_from_cache=from_cache,
                            stages=n_stages))
    return RunScores(records, [q.question_id for q in questions if not q.scorable],
                     sum(1 for q in questions if q.answer))


def _abstention_rows(q: AnsweredQuestion, known_item: Mapping[str, tuple[bool, bool]] | None, variant: str,
                     dataset: str) -> list[ScoreRecord]:
    """``abstained``, and with a label the abstention precision/recall and answered-and-cited rows (see above)."""
    qid = q.question_id
    rows = [_row(qid, "abstained", float(q.abstained), variant, dataset)]
    if q.answerable is None:
        return rows
    if q.abstained:
        rows.append(_row(qid, "abstention_precision", float(not q.answerable), variant, dataset))
    if not q.answerable:
        rows.append(_row(qid, "abstention_recall", float(q.abstained), variant, dataset))
        return rows
    if q.has_gold and known_item is not None:
        kept, cited = known_item.get(qid, (False, False))
        supported, basis = kept and cited, "gold section kept and cited"
    else:
        supported, basis = q.cites, "cites a source"
    rows.append(_row(qid, "answered_and_cited", float(not q.abstained and supported), variant, dataset,
                     basis=basis))
    return rows


def _citation_rows(q: AnsweredQuestion, variant: str, dataset: str, similarity: Similarity, threshold: float,
                   source_texts: Mapping[tuple[str, str], str]) -> list[ScoreRecord]:
    if not q.answer or not q.sentences:
        why = {"no_answer": q.answer_status or "missing"} if not q.answer else {"no_sentences": "no claim sentence"}
        return [_row(q.question_id, m, None, variant, dataset, **why) for m in ("citation_precision", "citation_recall")]
    numbers: dict[str, int] = {}
    for _, urls in q.sentences:
        for url in urls:
            numbers.setdefault(url, len(numbers) + 1)
    claims = [CitedSentence(text, tuple(numbers[u] for u in urls)) for text, urls in q.sentences]
    sources = {n: source_passages(source_texts.get((q.question_id, url), "")) for url, n in numbers.items()}
    score = score_claims(claims, sources, similarity, threshold)
    detail = {"sentences": score.n_sentences, "citations": score.n_citations,
              "supported_sentences": score.n_supported_sentences, "supported_citations": score.n_supported_citations}
    precision_detail = detail if score.precision is not None else {**detail, "undefined": "the answer cites nothing"}
    return [_row(q.question_id, "citation_precision", score.precision, variant, dataset, **precision_detail),
            _row(q.question_id, "citation_recall", score.recall, variant, dataset, **detail)]


def embedding_similarity(encode: Callable[[list[str]], np.ndarray]) -> Similarity:
    """Cosine of normalized sentence vectors (MiniLM through the pipeline's cached embedder)."""

    def similarity(sentences: list[str], passages: list[str]) -> np.ndarray:
        return encode(sentences) @ encode(passages).T

    return similarity
