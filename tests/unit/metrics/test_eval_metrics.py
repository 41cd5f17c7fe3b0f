"""Evaluation metrics on hand-computed cases: ROUGE-L, citation precision/recall, BERTScore selection,
unscorable references, summaries and the regression gate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hifirag_core.config import ConfigError
from hifirag_core.evaluation.answer_scoring import AnsweredQuestion, score_questions
from hifirag_core.evaluation.compare import by_metric, changed_most, compare, summarize
from hifirag_core.evaluation.eval_config import build_evaluation_config
from hifirag_core.metrics.citations import citation_score, cited_sentences
from hifirag_core.metrics.semantic import DEBERTA_METRIC, MINILM_METRIC, bertscore_f1, select_bertscore
from hifirag_core.metrics.text_metrics import rouge_l, rouge_l_f1

# --- ROUGE-L -------------------------------------------------------------------------------------


def test_rouge_l_by_hand():
    # LCS of "the cat sat on the mat" and "the cat was on the mat" is "the cat on the mat": 5 of 6 tokens each
    p, r, f = rouge_l("The cat sat on the mat.", "the cat was on the mat")
    assert (p, r, f) == pytest.approx((5 / 6, 5 / 6, 5 / 6))
    # precision 3/3, recall 3/6: F1 = 2PR/(P+R) = 2/3
    assert rouge_l("the cat sat", "the cat sat on the mat") == pytest.approx((1.0, 0.5, 2 / 3))


def test_rouge_l_stems_as_the_organisers_did():
    assert rouge_l("running dogs", "run dog")[2] == pytest.approx(1.0)  # Porter stemmer on
    assert rouge_l("", "anything at all")[2] == 0.0


def test_rouge_l_is_averaged_per_question():
    values = rouge_l_f1(["a b", "x y"], ["a b", "a b"])
    assert values == pytest.approx([1.0, 0.0])


# --- citations -----------------------------------------------------------------------------------


def _jaccard(sentences: list[str], passages: list[str]) -> np.ndarray:
    """A hand-checkable similarity: word-set Jaccard."""
    def toks(s: str) -> set[str]:
        return set(s.lower().replace(".", "").split())
    return np.array([[len(toks(a) & toks(b)) / len(toks(a) | toks(b)) for b in passages] for a in sentences])


def test_markers_belong_to_the_sentence_before_them():
    parsed = cited_sentences("Alpha beta gamma. [1] Delta epsilon zeta [2][3]. Eta theta iota. Kappa lambda mu [1, 2].")
    assert [(c.text, c.sources) for c in parsed] == [
        ("Alpha beta gamma.", (1,)), ("Delta epsilon zeta", (2, 3)), ("Eta theta iota.", ()),
        ("Kappa lambda mu", (1, 2))]


def test_numbered_steps_and_short_fragments():
    parsed = cited_sentences("1. Open the settings file [1].\n2. Set the rate limit [2].\n3. OK.")
    assert [(c.text, c.sources) for c in parsed] == [("Open the settings file", (1,)), ("Set the rate limit", (2,))]


def test_citation_precision_and_recall_by_hand():
    sources = {1: ["the sky is blue today"], 2: ["grass grows in spring"], 3: ["cats sleep all day"]}
    text = ("The sky is blue today [1][3]. Grass grows in spring [2]. Dogs bark at night loudly. "
            "Cats sleep all day [2].")
    score = citation_score(text, sources, _jaccard, threshold=0.5)
    # sentence 1: [1] supports (1.0), [3] does not (0.0); sentence 2: [2] supports; sentence 3: no citation;
    # sentence 4: [2] does not support (Jaccard 0). Citations: 4 pairs, 2 supported; sentences: 2 of 4 supported.
    assert (score.n_sentences, score.n_citations) == (4, 4)
    assert score.precision == pytest.approx(2 / 4)
    assert score.recall == pytest.approx(2 / 4)


def test_citation_of_an_unknown_source_is_unsupported_and_no_citations_leave_precision_undefined():
    sources = {1: ["the sky is blue today"]}
    score = citation_score("The sky is blue today [4].", sources, _jaccard, threshold=0.5)
    assert (score.precision, score.recall) == (0.0, 0.0)
    uncited = citation_score("The sky is blue today.", sources, _jaccard, threshold=0.5)
    assert uncited.precision is None and uncited.recall == 0.0
    assert citation_score("", sources, _jaccard, 0.5).recall is None


def test_support_is_the_best_passage_and_the_threshold_decides():
    sources = {1: ["unrelated words here", "the sky is blue"]}
    text = "The sky is blue now [1]."  # Jaccard with the second passage: 4 / 5
    assert citation_score(text, sources, _jaccard, threshold=0.8).precision == 1.0
    assert citation_score(text, sources, _jaccard, threshold=0.81).precision == 0.0


def test_a_long_source_is_shortlisted_by_bm25_and_still_supports_its_sentence():
    filler = [f"unrelated filler sentence number {i} about tomatoes" for i in range(30)]
    sources = {1: [*filler[:17], "the sync bandwidth is limited by max rate", *filler[17:]]}
    calls: list[int] = []

    def counting(a: list[str], b: list[str]) -> np.ndarray:
        calls.append(len(b))
        return _jaccard(a, b)

    text = "The sync bandwidth is limited by max rate [1]."
    assert citation_score(text, sources, counting, threshold=0.9, shortlist=3).precision == 1.0
    assert calls == [3]  # three passages compared, not 31
    assert citation_score(text, sources, counting, threshold=0.9, shortlist=None).precision == 1.0
    assert calls[-1] == 31


# --- BERTScore -----------------------------------------------------------------------------------


def test_deberta_only_from_an_existing_local_folder(tmp_path):
    assert select_bertscore(None).metric == MINILM_METRIC
    assert select_bertscore(tmp_path / "absent").metric == MINILM_METRIC
    spec = select_bertscore(tmp_path)
    assert spec.metric == DEBERTA_METRIC and spec.num_layers == 40 and spec.model_path == tmp_path
    assert "not comparable" in select_bertscore(None).label


def test_minilm_bertscore_orders_answers_and_scores_empty_as_zero():
    spec = select_bertscore(None)
    ref = "Use the --max-rate option to limit the bandwidth of a sync."
    same, close, far, empty = bertscore_f1(
        [ref, "Limit the sync bandwidth with the --max-rate option.", "Tomatoes need water twice a week.", ""],
        [ref] * 4, spec)
    assert same == pytest.approx(1.0, abs=1e-4)
    assert close > far
    assert empty == 0.0
    with pytest.raises(ValueError):
        bertscore_f1(["a"], ["a", "b"], spec)


# --- per-question scoring ------------------------------------------------------------------------


def _questions() -> list[AnsweredQuestion]:
    return [
        AnsweredQuestion("q1", "what limits bandwidth", "use max rate to limit bandwidth", 1,
                         answer="use max rate to limit bandwidth", sentences=[("use max rate to limit bandwidth", ["u1"])]),
        AnsweredQuestion("q2", "what about nothing", None, 2, answer="some answer text here",
                         sentences=[("some answer text here", ["u1"])]),
        AnsweredQuestion("q3", "unanswered one", "a real reference text", 3, answer="", answer_status="no_answer"),
    ]


def _score(questions: list[AnsweredQuestion], variant: str = "final"):
    return score_questions(questions, variant=variant, dataset="test", spec=None, similarity=_jaccard,
                           support_threshold=0.5, source_texts={("q1", "u1"): "use max rate to limit bandwidth."},
                           known_item=None, costs={"q1": (0.01, 100, 20, 2)}, latencies={"q1": (1.5, "k", 0, 10)},
                           echo={"q1": {"rouge_l_f1": 0.25}, "q3": {"rouge_l_f1": 0.0}})


def test_null_references_are_unscorable_not_zero():
    scored = _score(_questions())
    values = by_metric(scored.records)
    assert scored.unscorable == ["q2"]
    assert values["rouge_l_f1"] == {"q1": pytest.approx(1.0), "q2": None, "q3": 0.0}  # no answer scores 0
    row = next(r for r in scored.records if r.question_id == "q2" and r.metric == "rouge_l_f1")
    assert json.loads(row.detail_json) == {"unscorable": "reference is null"}
    summary = {m.metric: m for m in summarize(values, "final", build_evaluation_config())}
    assert summary["rouge_l_f1"].n == 2 and summary["rouge_l_f1"].n_missing == 1
    assert summary["rouge_l_f1"].mean == pytest.approx(0.5)
    assert values["echo_rouge_l_f1"]["q1"] == 0.25 and values["echo_rouge_l_f1"]["q2"] is None


def test_scoring_rows_cover_length_citations_cost_and_latency():
    values = by_metric(_score(_questions()).records)
    assert values["answered"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert values["answer_words"]["q1"] == 6.0
    assert values["citation_precision"]["q1"] == 1.0 and values["citation_recall"]["q1"] == 1.0
    assert values["citation_precision"]["q3"] is None  # no answer: nothing to check
    assert values["cost_usd"]["q1"] == 0.01 and values["tokens_out"]["q1"] == 20.0
    assert values["latency_s"] == {"q1": 1.5, "q2": None, "q3": None}


def test_evaluation_config_rejects_unknown_settings():
    with pytest.raises(ConfigError, match="citation_threshold"):
        build_evaluation_config(["citation_threshold=0.5"])
    assert build_evaluation_config(["confidence=0.9"]).confidence == 0.9


# --- regression gate -----------------------------------------------------------------------------


def test_gate_flags_a_worse_run_and_passes_the_same_run():
    cfg = build_evaluation_config(["bootstrap_resamples=500"])
    rng = np.random.default_rng(0)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0.1, 0.4, 60))}
    worse = {q: v - 0.03 + float(rng.normal(0, 0.01)) for q, v in base.items()}
    same_summary = summarize({"rouge_l_f1": base}, "final", cfg)
    assert compare(same_summary, {"rouge_l_f1": base}, {"rouge_l_f1": base}, "e0", cfg).verdict == "passed"
    assert same_summary[0].diff == 0.0 and same_summary[0].regressed is False
    worse_summary = summarize({"rouge_l_f1": worse}, "final", cfg)
    verdict = compare(worse_summary, {"rouge_l_f1": worse}, {"rouge_l_f1": base}, "e0", cfg)
    assert verdict.verdict == "regressed" and verdict.regressed_metrics == ("rouge_l_f1",)
    assert worse_summary[0].diff_high < 0 and worse_summary[0].n_paired == 60


def test_gate_ignores_ungated_metrics_and_noise():
    cfg = build_evaluation_config(["bootstrap_resamples=500"])
    base = {f"q{i}": float(i % 5) for i in range(40)}
    longer = {q: v + 10 for q, v in base.items()}
    shorter = {q: v - 10 for q, v in base.items()}
    summary = summarize({"answer_words": shorter}, "final", cfg)
    assert compare(summary, {"answer_words": shorter}, {"answer_words": base}, "e0", cfg).verdict == "passed"
    assert summary[0].diff == pytest.approx(-10) and summary[0].regressed is None
    noisy = {q: v + (0.5 if i % 2 else -0.5) for i, (q, v) in enumerate(base.items())}
    summary = summarize({"rouge_l_f1": noisy}, "final", cfg)
    assert compare(summary, {"rouge_l_f1": noisy}, {"rouge_l_f1": base}, "e0", cfg).verdict == "passed"
    assert changed_most(longer, base, 3) == [("q0", 0.0, 10.0), ("q1", 1.0, 11.0), ("q10", 0.0, 10.0)]


def test_gate_pairs_only_questions_both_scored():
    cfg = build_evaluation_config(["bootstrap_resamples=200"])
    now = {"a": 0.5, "b": None, "c": 0.2}
    before = {"a": 0.5, "b": 0.9, "d": 0.1}
    summary = summarize({"rouge_l_f1": now}, "final", cfg)
    compare(summary, {"rouge_l_f1": now}, {"rouge_l_f1": before}, "e0", cfg)
    assert summary[0].n_paired == 1 and summary[0].diff == 0.0


def test_a_metric_true_by_construction_is_reported_but_not_gated():
    from hifirag_core.config import build_config
    from hifirag_core.evaluation.compare import true_by_construction

    cfg = build_evaluation_config(["bootstrap_resamples=300"])
    offline = true_by_construction(build_config(), cfg)
    assert set(offline) == {"citation_precision", "citation_recall"} and "copies" in offline["citation_recall"]
    llm_writer = true_by_construction(build_config(overrides={"backends": {"writer_llm": "openai"}}), cfg)
    assert set(llm_writer) == {"citation_precision"} and "0.6" in llm_writer["citation_precision"]
    both_llm = build_config(overrides={"backends": {"writer_llm": "openai", "filter_llm": "openai"}})
    assert true_by_construction(both_llm, cfg) == {}
    base = {f"q{i}": 1.0 for i in range(30)}
    worse = {q: 0.5 for q in base}
    summary = summarize({"citation_recall": worse}, "final", cfg, offline)
    assert not summary[0].gated and "copies" in summary[0].not_gated_reason
    assert compare(summary, {"citation_recall": worse}, {"citation_recall": base}, "e0", cfg).verdict == "passed"
    gated = summarize({"citation_recall": worse}, "final", cfg)
    assert compare(gated, {"citation_recall": worse}, {"citation_recall": base}, "e0", cfg).verdict == "regressed"


# --- abstention ------------------------------------------------------------------------------------


def test_abstention_precision_recall_and_answered_and_cited_follow_the_labels():
    def q(qid: str, answerable: bool | None, abstained: bool, cites: bool = True, gold: bool = False):
        text = "The sources I found do not answer this question." if abstained else "An answer [1]."
        cited = [] if abstained else [(text, ["u1"] if cites else [])]
        return AnsweredQuestion(qid, "question", None, 1, answer=text, sentences=cited, has_gold=gold,
                                answerable=answerable, abstained=abstained, cites=cites and not abstained)

    questions = [
        q("u1", False, True), q("u2", False, True), q("u3", False, False),  # unanswerable: 2 of 3 abstained
        q("a1", True, False, gold=True), q("a2", True, False, gold=True),  # answerable, gold known
        q("a3", True, True, gold=True),  # a wrong abstention
        q("a4", True, False, cites=False),  # answerable without gold: answered but cites nothing
        q("x1", None, True),  # no label: counted as abstained, in no labelled metric
    ]
    known = {"a1": (True, True), "a2": (True, False), "a3": (True, True)}
    scored = score_questions(questions, variant="final_abstain", dataset="t", spec=None, similarity=_jaccard,
                             support_threshold=0.5, source_texts={}, known_item=known, costs={}, latencies={}, echo={})
    values = by_metric(scored.records)
    assert values["abstained"] == {"u1": 1.0, "u2": 1.0, "u3": 0.0, "a1": 0.0, "a2": 0.0, "a3": 1.0, "a4": 0.0,
                                   "x1": 1.0}
    assert values["abstention_precision"] == {"u1": 1.0, "u2": 1.0, "a3": 0.0}
    assert values["abstention_recall"] == {"u1": 1.0, "u2": 1.0, "u3": 0.0}
    assert values["answered_and_cited"] == {"a1": 1.0, "a2": 0.0, "a3": 0.0, "a4": 0.0}
    summary = {m.metric: m for m in summarize(values, "final_abstain", build_evaluation_config())}
    assert summary["abstention_precision"].mean == pytest.approx(2 / 3)
    assert summary["abstention_recall"].mean == pytest.approx(2 / 3)
    assert summary["answered_and_cited"].mean == pytest.approx(1 / 4)
    assert {"abstention_precision", "abstention_recall", "answered_and_cited"} <= set(
        build_evaluation_config().gated_metrics)
