"""The credibility experiment: when does a source prior help retrieval, when does it hurt, at what strength?

Separable steps, each a plain function a flow can wrap as a task:

    plan_experiment -> realize_corpora -> embed_corpora -> run_sweep -> score_sweep
        -> summarize -> choose_strength / hurt_points -> experiment records

``run_experiment`` runs them in order. Nothing here imports Prefect, writes a file or renders a
report (``report.py`` does, from an ``ExperimentResult``): records come back in
``ExperimentResult.records`` for the warehouse writer.

At every correlation c between corruption and source type (``corpus.corruption_rates``) and every
strength lambda, three systems rank the same similarity pool of ``pool_factor x ndcg_k``:

* ``prior``: sim x prior(type) ** lambda;
* ``prior_smoothing``: the prior smoothed over each document's nearest neighbours, then ** lambda;
* ``prior_update``: the paper's update rule run over the tune half's queries, with feedback
  simulated from the correctness of the documents each query showed; its learned weights are
  frozen for the report half.

lambda = 0 is similarity only, the baseline of every gain. Anything chosen (the default lambda) is
chosen on the ``tune`` half of the queries and reported on the ``report`` half.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hifirag_core.config import CredibilityConfig
from hifirag_core.credibility.priors import resolve_priors
from hifirag_core.credibility.rerank import CredibilityReranker, Ranking, weight_vector
from hifirag_core.credibility.source_types import SOURCE_TYPES
from hifirag_core.credibility.update import FeedbackRule, correctness_feedback, update_weights
from hifirag_core.evaluation.credibility_corpus import (
    DEFAULT_TYPE_SHARES,
    REALISTIC_RATES,
    CorpusPlan,
    CorpusSpec,
    ExperimentCorpus,
    embedding_text,
    plan_corpus,
    realize,
)
from hifirag_core.evaluation.credibility_labels import hit_ids
from hifirag_core.hashing import stable_hash
from hifirag_core.metrics.bootstrap import DEFAULT_SEED, bootstrap_ci, paired_bootstrap_ci
from hifirag_core.metrics.retrieval import (
    adversarial_hit_rate,
    mean_credibility_at_k,
    ndcg_at_k,
    precision_at_k,
)
from hifirag_core.records import Record
from hifirag_core.records.credibility import (
    CredibilityDocRecord,
    CredibilityQueryRecord,
    CredibilityRateRecord,
    CredibilitySummaryRecord,
    CredibilityWeightRecord,
)
from hifirag_core.resources import shared_data_dir

SystemName = Literal["prior", "prior_smoothing", "prior_update"]
CorpusType = Literal["government", "peer_reviewed", "established_news", "organization_report", "blog",
                     "user_generated", "ai_generated"]
BASELINE = "similarity"
METRICS: tuple[str, ...] = ("precision", "ndcg", "adversarial_hit_rate", "topical_precision", "mean_credibility")
HALVES: tuple[str, ...] = ("tune", "report")


class TextEncoder(Protocol):
    """What the experiment needs of an embedder: unit vectors in the order of the texts."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class CredibilityExperimentConfig(BaseModel):
    """Every setting of the experiment; its hash (with the corpus fingerprint) is the experiment id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_path: Path | None = None  # None: <shared data>/health/medquad_docs.jsonl.gz
    seed: int = 13
    n_queries: int = Field(default=600, ge=2)
    min_answer_chars: int = Field(default=200, ge=1)
    renditions: tuple[int, int] = (3, 10)
    sibling_questions: int = Field(default=1, ge=0)
    sibling_renditions: int = Field(default=2, ge=0)
    n_background: int = Field(default=500, ge=0)
    excerpt_sentences: tuple[int, int] = (2, 4)
    type_shares: dict[CorpusType, float] = Field(default_factory=lambda: dict(DEFAULT_TYPE_SHARES))
    realistic_rates: dict[CorpusType, float] = Field(default_factory=lambda: dict(REALISTIC_RATES))
    realistic_at: float = Field(default=0.5, gt=0, lt=1)
    correlations: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    strengths: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
    systems: tuple[SystemName, ...] = ("prior", "prior_smoothing", "prior_update")
    k: int = Field(default=5, ge=1)  # P@k, the adversarial hit rate, the documents a user is shown
    ndcg_k: int = Field(default=10, ge=1)
    embed_chars: int = Field(default=600, ge=50)
    # priors, pool_factor, smoothing_alpha and smoothing_neighbours are used; the systems decide
    # whether smoothing applies and the sweep sets the strength
    credibility: CredibilityConfig = CredibilityConfig(enabled=True)
    update_rate: float = 0.05
    delta_correct: float = 0.3
    delta_corrupted: float = -0.5
    # the default strength: best tune-half gain in this metric at the realistic correlation, among
    # the strengths that lose at most max_loss_uncorrelated of it where corruption ignores type
    tune_metric: Literal["precision", "ndcg"] = "precision"
    max_loss_uncorrelated: float = Field(default=0.01, ge=0)
    bootstrap_resamples: int = Field(default=10_000, ge=100)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    bootstrap_seed: int = DEFAULT_SEED

    @model_validator(mode="after")
    def _sweep_has_its_anchors(self) -> CredibilityExperimentConfig:
        if 0.0 not in self.strengths:
            raise ValueError("strengths must include 0 (similarity only, the baseline of every gain)")
        missing = {0.0, self.realistic_at} - set(self.correlations)
        if missing:
            raise ValueError(f"correlations must include {sorted(missing)}: the default strength is chosen "
                             "at the realistic correlation with a bound on the loss at none")
        if any(not 0.0 <= c <= 1.0 for c in self.correlations) or any(s < 0 for s in self.strengths):
            raise ValueError("correlations must lie in [0, 1] and strengths be at least 0")
        if self.k > self.ndcg_k:
            raise ValueError(f"k ({self.k}) must not exceed ndcg_k ({self.ndcg_k}): both read one ranking")
        return self

    def corpus_spec(self) -> CorpusSpec:
        return CorpusSpec(seed=self.seed, n_queries=self.n_queries, min_answer_chars=self.min_answer_chars,
                          renditions=self.renditions, sibling_questions=self.sibling_questions,
                          sibling_renditions=self.sibling_renditions, n_background=self.n_background,
                          excerpt_sentences=self.excerpt_sentences, type_shares=dict(self.type_shares),
                          realistic_rates=dict(self.realistic_rates), realistic_at=self.realistic_at)

    def feedback_rule(self) -> FeedbackRule:
        return FeedbackRule(self.update_rate, self.delta_correct, self.delta_corrupted)

    def medquad_path(self) -> Path:
        return self.data_path or shared_data_dir() / "health" / "medquad_docs.jsonl.gz"

    def pool_size(self) -> int:
        """The paper's pool of 3k, for the deepest k reported."""
        return self.credibility.pool_factor * self.ndcg_k


@dataclass(frozen=True)
class EmbeddedCorpus:
    """Unit vectors of one corpus's documents and of the queries."""

    doc_vectors: np.ndarray
    query_vectors: np.ndarray


@dataclass(frozen=True)
class Embedding:
    """The vectors of every corpus, and what embedding them cost."""

    corpora: dict[float, EmbeddedCorpus]
    n_texts: int  # distinct texts across the corpora and the queries
    seconds: float
    encoded: int | None  # texts that went through the model (None if the encoder does not count)


@dataclass(frozen=True)
class SystemRun:
    """One system's ranking of every query at one correlation and strength (top ndcg_k, query order)."""

    system: str
    correlation: float
    strength: float
    rankings: list[Ranking]
    weight_history: list[dict[str, float]] = field(default_factory=list)  # prior_update, tune half

    @property
    def feedback(self) -> bool:
        return self.system == "prior_update" and self.strength > 0


@dataclass(frozen=True)
class CorrelationStats:
    """What one corpus allows, independent of any system."""

    correlation: float
    n_corrupted: int
    prior_correct_corr: float  # Pearson correlation of a document's prior with it being correct
    hits_per_query: float  # relevant-and-correct documents per query in the corpus
    hits_in_pool: float  # of those, in the similarity pool
    precision_ceiling: float  # mean of min(hits, k) / k over the report half


@dataclass(frozen=True)
class StrengthChoice:
    """The default strength chosen on the tune half, and the figures it was chosen from."""

    strength: float
    metric: str
    realistic_at: float
    max_loss_uncorrelated: float
    gains: dict[float, tuple[float, float]]  # strength -> (tune gain at realistic, tune gain at none)
    eligible: tuple[float, ...]


@dataclass(frozen=True)
class HurtPoint:
    """Where a system starts to hurt at one correlation, on the report half."""

    system: str
    correlation: float
    metric: str
    best_strength: float  # the strength with the highest mean gain (0 if none is positive)
    first_below_zero: float | None  # smallest strength whose mean gain is negative
    first_significant: float | None  # smallest strength whose whole interval is below zero


@dataclass
class ExperimentResult:
    """Everything the experiment produced: records by table, summary figures, the choice, timings."""

    experiment_id: str
    config: CredibilityExperimentConfig
    n_docs: int
    n_queries: dict[str, int]  # per half
    records: dict[str, list[Record]]
    summary: list[CredibilitySummaryRecord]
    rates: list[CredibilityRateRecord]
    stats: list[CorrelationStats]
    choice: StrengthChoice
    hurt: list[HurtPoint]
    corruption_kinds: dict[str, int]  # edits carried by the corrupted texts, over all renditions
    timings: dict[str, float]
    embedding: Embedding
    namespace: str
    fingerprint: str

    def cell(self, correlation: float, strength: float, system: str, metric: str,
             half: str = "report") -> CredibilitySummaryRecord:
        """The summary row of one sweep cell (strength 0 is the baseline, whatever the system)."""
        name = BASELINE if strength == 0 else system
        for row in self.summary:
            if (row.correlation, row.strength, row.system, row.metric, row.half) == (
                    correlation, strength, name, metric, half):
                return row
        raise KeyError(f"no summary row for c={correlation} lambda={strength} {system}/{metric}/{half}")


# --- steps ---------------------------------------------------------------------------------------


def plan_experiment(config: CredibilityExperimentConfig) -> CorpusPlan:
    """Step 1: the queries and every rendition with both of its texts."""
    path = config.medquad_path()
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: set HIFIRAG_SHARED_DATA to the shared data folder "
                                "or pass data_path in the experiment config")
    return plan_corpus(path, config.corpus_spec())


def realize_corpora(plan: CorpusPlan, config: CredibilityExperimentConfig) -> dict[float, ExperimentCorpus]:
    """Step 2: the corpus at every correlation of the sweep (the same documents, other corruptions)."""
    spec = config.corpus_spec()
    return {c: realize(plan, c, spec) for c in config.correlations}


def embed_corpora(corpora: Mapping[float, ExperimentCorpus], encoder: TextEncoder,
                  config: CredibilityExperimentConfig) -> Embedding:
    """Step 3: embed every distinct text once (a faithful text is shared by the corpora it appears in)."""
    queries = next(iter(corpora.values())).queries
    texts: dict[str, int] = {}
    for corpus in corpora.values():
        for doc in corpus.docs:
            texts.setdefault(embedding_text(doc, config.embed_chars), len(texts))
    for query in queries:
        texts.setdefault(query.text, len(texts))
    before = getattr(encoder, "encoded", None)
    start = time.perf_counter()
    vectors = np.asarray(encoder.encode(list(texts)), dtype=np.float32)
    seconds = time.perf_counter() - start
    after = getattr(encoder, "encoded", None)
    encoded = after - before if isinstance(before, int) and isinstance(after, int) else None
    query_vectors = vectors[[texts[q.text] for q in queries]]
    embedded = {c: EmbeddedCorpus(vectors[[texts[embedding_text(d, config.embed_chars)] for d in corpus.docs]],
                                  query_vectors)
                for c, corpus in corpora.items()}
    return Embedding(embedded, len(texts), seconds, encoded)


def build_reranker(corpus: ExperimentCorpus, embedded: EmbeddedCorpus) -> CredibilityReranker:
    """The flat index over one corpus with each document's source type."""
    return CredibilityReranker(embedded.doc_vectors, [d.source_type for d in corpus.docs])


def learn_weights(corpus: ExperimentCorpus, reranker: CredibilityReranker, pools: tuple[np.ndarray, np.ndarray],
                  strength: float, config: CredibilityExperimentConfig) -> tuple[dict[int, Ranking], list[dict[str, float]]]:
    """The update rule over the tune half, in query order: each query ranked, then its shown top k judged.

    Only the tune half's queries are read, and of their results only whether each shown document
    is correct; the returned rankings are the tune queries' (prequential) ones.
    """
    pool_sims, pool_ids = pools
    weights = resolve_priors(config.credibility)
    history = [dict(weights)]
    rankings: dict[int, Ranking] = {}
    rule = config.feedback_rule()
    for qi, query in enumerate(corpus.queries):
        if query.half != "tune":
            continue
        ranking = reranker.rerank(pool_sims[qi], pool_ids[qi], config.ndcg_k, weight_vector(weights),
                                  strength=strength)
        rankings[qi] = ranking
        shown = [corpus.docs[i] for i in ranking.doc_ids[:config.k]]
        feedback = correctness_feedback([d.source_type for d in shown], [corpus.correct[d.doc_id] for d in shown], rule)
        weights = update_weights(weights, feedback, rule)
        history.append(dict(weights))
    return rankings, history


def run_system(system: str, corpus: ExperimentCorpus, reranker: CredibilityReranker,
               pools: tuple[np.ndarray, np.ndarray], strength: float, config: CredibilityExperimentConfig) -> SystemRun:
    """Step 4 for one cell: every query's top ``ndcg_k`` under one system at one strength."""
    pool_sims, pool_ids = pools
    priors = weight_vector(resolve_priors(config.credibility))
    if system == BASELINE or strength == 0:
        return SystemRun(BASELINE, corpus.correlation, 0.0,
                         [reranker.rerank(s, i, config.ndcg_k, None) for s, i in zip(pool_sims, pool_ids, strict=True)])
    if system == "prior_update":
        learned, history = learn_weights(corpus, reranker, pools, strength, config)
        final = weight_vector(history[-1])
        rankings = [learned[qi] if qi in learned else reranker.rerank(pool_sims[qi], pool_ids[qi], config.ndcg_k, final,
                                                        strength=strength)
                    for qi in range(len(corpus.queries))]
        return SystemRun(system, corpus.correlation, strength, rankings, history)
    alpha = config.credibility.smoothing_alpha if system == "prior_smoothing" else None
    rankings = [reranker.rerank(s, i, config.ndcg_k, priors, alpha, config.credibility.smoothing_neighbours, strength)
                for s, i in zip(pool_sims, pool_ids, strict=True)]
    return SystemRun(system, corpus.correlation, strength, rankings)


def run_sweep(corpus: ExperimentCorpus, embedded: EmbeddedCorpus, config: CredibilityExperimentConfig) -> list[SystemRun]:
    """Step 4 at one correlation: the baseline, then every system at every strength above 0."""
    reranker = build_reranker(corpus, embedded)
    pools = reranker.pool(embedded.query_vectors, config.pool_size())
    if "prior_smoothing" in config.systems:
        reranker.precompute_neighbours(config.credibility.smoothing_neighbours)
    runs = [run_system(BASELINE, corpus, reranker, pools, 0.0, config)]
    for strength in sorted(s for s in config.strengths if s > 0):
        runs += [run_system(system, corpus, reranker, pools, strength, config) for system in config.systems]
    return runs


def query_metrics(doc_ids: Sequence[str], credibility: Sequence[float], relevant: frozenset[str],
                  hits: frozenset[str], corrupted: frozenset[str], config: CredibilityExperimentConfig) -> dict[str, float]:
    """The metrics of one ranked list (``doc_ids`` holds its top ``ndcg_k``)."""
    return {
        "precision": precision_at_k(doc_ids, hits, config.k),
        "ndcg": ndcg_at_k(doc_ids, hits, config.ndcg_k),
        "adversarial_hit_rate": adversarial_hit_rate(doc_ids, corrupted, config.k),
        "topical_precision": precision_at_k(doc_ids, relevant, config.k),
        "mean_credibility": mean_credibility_at_k(credibility, config.k),
    }


def score_runs(corpus: ExperimentCorpus, runs: Sequence[SystemRun], config: CredibilityExperimentConfig,
               experiment_id: str) -> list[CredibilityQueryRecord]:
    """Step 5: per-query metrics of every run at one correlation.

    Credibility is always the configured prior of the type (never an updated weight), so systems
    are compared on one scale whatever weights they ranked with.
    """
    priors = resolve_priors(config.credibility)
    corrupted = corpus.corrupted_ids
    out: list[CredibilityQueryRecord] = []
    for run in runs:
        for step, (query, ranking) in enumerate(zip(corpus.queries, run.rankings, strict=True)):
            docs = [corpus.docs[i] for i in ranking.doc_ids]
            ids = [d.doc_id for d in docs]
            relevant = corpus.relevant[query.query_id]
            hits = hit_ids(relevant, corpus.correct)
            out.append(CredibilityQueryRecord(
                question_id=query.query_id, experiment_id=experiment_id, correlation=corpus.correlation,
                strength=run.strength, system=run.system, half=query.half, feedback=run.feedback, step=step,
                query=query.text, qtype=query.qtype, k=config.k, n_relevant=len(relevant), n_hits=len(hits),
                top_doc_ids=ids, top_source_types=[d.source_type for d in docs],
                top_similarities=[round(float(x), 6) for x in ranking.similarities],
                top_weights=[round(float(x), 6) for x in ranking.weights],
                **query_metrics(ids, [priors[d.source_type] for d in docs], relevant, hits, corrupted, config),
            ))
    return out


def summarize(rows: Sequence[CredibilityQueryRecord], config: CredibilityExperimentConfig,
              experiment_id: str) -> list[CredibilitySummaryRecord]:
    """Step 6: per cell and half, each metric's mean and its paired gain over similarity.

    The report half gets 95% bootstrap intervals over its queries; the tune half only means (it
    chooses, it does not report).
    """
    cells: dict[tuple[float, float, str, str], list[CredibilityQueryRecord]] = {}
    for row in rows:
        cells.setdefault((row.correlation, row.strength, row.system, row.half), []).append(row)
    out: list[CredibilitySummaryRecord] = []
    for (correlation, strength, system, half), cell in sorted(cells.items()):
        baseline = cells[(correlation, 0.0, BASELINE, half)]
        if [r.question_id for r in cell] != [r.question_id for r in baseline]:
            raise ValueError(f"cell {correlation}/{strength}/{system} does not rank the baseline's queries")
        for metric in METRICS:
            values = [getattr(r, metric) for r in cell]
            base = [getattr(r, metric) for r in baseline]
            row = CredibilitySummaryRecord(
                experiment_id=experiment_id, correlation=correlation, strength=strength, system=system, half=half,
                feedback=cell[0].feedback, metric=metric, k=config.k, n_queries=len(values),
                mean=float(np.mean(values)), baseline_mean=float(np.mean(base)),
                diff=float(np.mean(values) - np.mean(base)), confidence=config.confidence,
            )
            if half == "report":
                ci = bootstrap_ci(values, config.bootstrap_resamples, config.confidence, config.bootstrap_seed)
                row.mean_low, row.mean_high, row.n_resamples = ci.low, ci.high, config.bootstrap_resamples
                if system != BASELINE:
                    paired = paired_bootstrap_ci(values, base, config.bootstrap_resamples, config.confidence,
                                                 config.bootstrap_seed)
                    row.diff_low, row.diff_high = paired.low, paired.high
                else:
                    row.diff_low = row.diff_high = 0.0
            out.append(row)
    return out


def choose_strength(summary: Sequence[CredibilitySummaryRecord], config: CredibilityExperimentConfig) -> StrengthChoice:
    """Step 7: the default strength of the plain prior, from tune-half figures only.

    The strength with the highest tune-half gain at the realistic correlation, among those whose
    tune-half loss where corruption ignores source type (correlation 0) is at most
    ``max_loss_uncorrelated``; ties go to the smaller strength. A user does not know how strongly
    corruption follows source type on their data, so the default must not cost much when it does
    not at all.
    """
    gain = {(r.correlation, r.strength): r.diff for r in summary
            if r.half == "tune" and r.metric == config.tune_metric and r.system in ("prior", BASELINE)}
    strengths = sorted(config.strengths)
    gains = {s: (gain[(config.realistic_at, s)], gain[(0.0, s)]) for s in strengths}
    eligible = tuple(s for s in strengths if gains[s][1] >= -config.max_loss_uncorrelated)
    best = max(eligible, key=lambda s: (round(gains[s][0], 12), -s))
    return StrengthChoice(best, config.tune_metric, config.realistic_at, config.max_loss_uncorrelated, gains, eligible)


def hurt_points(summary: Sequence[CredibilitySummaryRecord], config: CredibilityExperimentConfig,
                metric: str = "precision") -> list[HurtPoint]:
    """Step 8: per system and correlation, on the report half, where the gain turns negative."""
    rows = {(r.correlation, r.strength, r.system): r for r in summary if r.half == "report" and r.metric == metric}
    out: list[HurtPoint] = []
    for system in config.systems:
        for c in sorted(config.correlations):
            cells = [(s, rows[(c, s, system)]) for s in sorted(config.strengths) if s > 0]
            best = max(cells, key=lambda sr: sr[1].diff)
            below = next((s for s, r in cells if r.diff < 0), None)
            significant = next((s for s, r in cells if r.diff_high is not None and r.diff_high < 0), None)
            out.append(HurtPoint(system, c, metric, best[0] if best[1].diff > 0 else 0.0, below, significant))
    return out


def correlation_stats(corpus: ExperimentCorpus, embedded: EmbeddedCorpus,
                      config: CredibilityExperimentConfig) -> CorrelationStats:
    """What one corpus allows: how far prior and correctness go together, and how many hits the pool holds."""
    priors = resolve_priors(config.credibility)
    prior = np.array([priors[d.source_type] for d in corpus.docs])
    correct = np.array([corpus.correct[d.doc_id] for d in corpus.docs], dtype=np.float64)
    corr = float(np.corrcoef(prior, correct)[0, 1]) if correct.std() > 0 and prior.std() > 0 else 0.0
    reranker = build_reranker(corpus, embedded)
    _, pool_ids = reranker.pool(embedded.query_vectors, config.pool_size())
    hits, in_pool, ceiling = [], [], []
    for qi, query in enumerate(corpus.queries):
        found = {corpus.doc_index[d] for d in hit_ids(corpus.relevant[query.query_id], corpus.correct)}
        hits.append(len(found))
        in_pool.append(len(found & set(pool_ids[qi].tolist())))
        if query.half == "report":
            ceiling.append(min(len(found), config.k) / config.k)
    return CorrelationStats(corpus.correlation, len(corpus.corrupted_ids), corr, float(np.mean(hits)),
                            float(np.mean(in_pool)), float(np.mean(ceiling)) if ceiling else 0.0)


def rate_records(corpus: ExperimentCorpus, stats: CorrelationStats, config: CredibilityExperimentConfig,
                 experiment_id: str) -> list[CredibilityRateRecord]:
    """Each type's configured share and rate, and what the draws made of them."""
    priors = resolve_priors(config.credibility)
    rows = []
    for t in SOURCE_TYPES:
        if t not in corpus.rates:
            continue
        docs = [d for d in corpus.docs if d.source_type == t]
        rows.append(CredibilityRateRecord(
            experiment_id=experiment_id, correlation=corpus.correlation, source_type=t, prior=priors[t],
            share=config.type_shares[t], rate=corpus.rates[t], n_docs=len(docs),
            n_corrupted=sum(d.corrupted for d in docs), prior_correct_corr=stats.prior_correct_corr,
        ))
    return rows


def weight_records(runs: Sequence[SystemRun], experiment_id: str) -> list[CredibilityWeightRecord]:
    """The learned weights after each tune-half query, one row per type and step."""
    return [CredibilityWeightRecord(experiment_id=experiment_id, correlation=run.correlation, strength=run.strength,
                                    system=run.system, step=step, source_type=t, weight=w)
            for run in runs for step, weights in enumerate(run.weight_history) for t, w in weights.items()]


def doc_records(corpus: ExperimentCorpus, experiment_id: str) -> list[CredibilityDocRecord]:
    """The corpus at one correlation as rows, so an analyst can join rankings to documents."""
    return [CredibilityDocRecord(experiment_id=experiment_id, namespace=corpus.namespace, correlation=corpus.correlation,
                                 doc_id=d.doc_id, url=d.url, title=d.title, source_type=d.source_type, focus=d.focus,
                                 question_key=d.question_key, origin_doc_id=d.origin_doc_id, origin_qid=d.origin_qid,
                                 corrupted=d.corrupted, corruption=d.corruption, changes=list(d.changes),
                                 n_chars=len(d.text))
            for d in corpus.docs]


def experiment_id_for(config: CredibilityExperimentConfig, plan: CorpusPlan) -> str:
    """Hash of the settings that shape results and of the corpus content (not of the data path)."""
    settings = config.model_dump(mode="json", exclude={"data_path"})
    return stable_hash({"config": settings, "corpus": plan.fingerprint})


def run_experiment(config: CredibilityExperimentConfig, embedder: TextEncoder) -> ExperimentResult:
    """All steps in order; the result holds every record and the figures the report needs."""
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock
        clock = now

    plan = plan_experiment(config)
    experiment_id = experiment_id_for(config, plan)
    corpora = realize_corpora(plan, config)
    lap("build_corpus")
    embedding = embed_corpora(corpora, embedder, config)
    lap("embed")
    query_rows: list[CredibilityQueryRecord] = []
    weights: list[CredibilityWeightRecord] = []
    rates: list[CredibilityRateRecord] = []
    docs: list[CredibilityDocRecord] = []
    stats: list[CorrelationStats] = []
    for c, corpus in corpora.items():
        embedded = embedding.corpora[c]
        runs = run_sweep(corpus, embedded, config)
        query_rows += score_runs(corpus, runs, config, experiment_id)
        weights += weight_records(runs, experiment_id)
        stats.append(correlation_stats(corpus, embedded, config))
        rates += rate_records(corpus, stats[-1], config, experiment_id)
        docs += doc_records(corpus, experiment_id)
    lap("run_sweep")
    summary = summarize(query_rows, config, experiment_id)
    lap("bootstrap")
    kinds: dict[str, int] = {}
    for r in plan.renditions:
        kinds[r.corruption] = kinds.get(r.corruption, 0) + 1
    records: dict[str, list[Record]] = {
        CredibilityDocRecord.TABLE: list(docs),
        CredibilityRateRecord.TABLE: list(rates),
        CredibilityQueryRecord.TABLE: list(query_rows),
        CredibilitySummaryRecord.TABLE: list(summary),
        CredibilityWeightRecord.TABLE: list(weights),
    }
    return ExperimentResult(
        experiment_id=experiment_id, config=config, n_docs=len(plan.renditions),
        n_queries={h: sum(q.half == h for q in plan.queries) for h in HALVES}, records=records, summary=summary,
        rates=rates, stats=stats, choice=choose_strength(summary, config), hurt=hurt_points(summary, config),
        corruption_kinds=kinds, timings=timings, embedding=embedding, namespace=next(iter(corpora.values())).namespace,
        fingerprint=plan.fingerprint,
    )


__all__ = [
    "BASELINE",
    "HALVES",
    "METRICS",
    "CorrelationStats",
    "CredibilityExperimentConfig",
    "EmbeddedCorpus",
    "Embedding",
    "ExperimentResult",
    "HurtPoint",
    "StrengthChoice",
    "SystemRun",
    "build_reranker",
    "choose_strength",
    "embed_corpora",
    "hurt_points",
    "learn_weights",
    "plan_experiment",
    "realize_corpora",
    "run_experiment",
    "run_sweep",
    "run_system",
    "score_runs",
    "summarize",
]
