"""The credibility experiment: similarity-only retrieval against source-aware reranking on MedQuAD.

Separable steps, each a plain function a flow can wrap as a task:

    build_experiment_corpus -> embed_experiment -> candidate_pools -> run_systems
        -> score_runs -> summarize / sensitivity_sweep -> write_report

``run_experiment`` runs them in order. Nothing here imports Prefect or writes to the warehouse:
the records come back in ``ExperimentResult.records`` for the warehouse writer to persist.

Systems (each ranks the same similarity pool of ``pool_factor x k`` candidates):
``similarity`` (the baseline: FAISS order), ``prior`` (sim x lambda), ``prior_smoothing`` (+ one-hop
smoothing), ``prior_smoothing_update`` (+ the post-query update, ORACLE feedback) and
``prior_update`` (the update without smoothing, to tell the two effects apart).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hifirag_core.config import CredibilityConfig
from hifirag_core.corpus.sources import shared_data_dir
from hifirag_core.credibility.corpus import (
    CORPUS_NAMESPACE,
    LABEL_SCHEMES,
    CorpusSpec,
    ExperimentCorpus,
    build_corpus,
    embedding_text,
)
from hifirag_core.credibility.priors import resolve_priors, scale_spread
from hifirag_core.credibility.records import (
    CredibilityDocRecord,
    CredibilityQueryRecord,
    CredibilitySummaryRecord,
    CredibilitySweepRecord,
    CredibilityWeightRecord,
)
from hifirag_core.credibility.rerank import CredibilityReranker, Ranking, weight_vector
from hifirag_core.credibility.sources import SOURCE_TYPES
from hifirag_core.credibility.update import FeedbackRule, oracle_feedback, update_weights
from hifirag_core.hashing import stable_hash
from hifirag_core.metrics.bootstrap import DEFAULT_SEED, bootstrap_ci, paired_bootstrap_ci
from hifirag_core.metrics.retrieval import (
    adversarial_hit_rate,
    high_credibility_ratio,
    mean_credibility_at_k,
    ndcg_at_k,
    precision_at_k,
    reciprocal_rank,
)
from hifirag_core.records import Record

SystemName = Literal["similarity", "prior", "prior_smoothing", "prior_smoothing_update", "prior_update"]
BASELINE = "similarity"
METRICS: tuple[str, ...] = ("precision", "ndcg", "reciprocal_rank", "adversarial_hit_rate",
                            "mean_credibility", "high_credibility_ratio")
# metrics that do not depend on the relevance labels (reported once, not per label scheme)
LABEL_FREE_METRICS = frozenset({"adversarial_hit_rate", "mean_credibility", "high_credibility_ratio"})
SUMMARY_FILE = "credibility_summary.md"
PLOT_FILE = "credibility_sensitivity.png"


@dataclass(frozen=True)
class SystemSpec:
    """Which of the paper's optional steps a system uses."""

    prior: bool
    smoothing: bool
    update: bool


SYSTEMS: dict[str, SystemSpec] = {
    "similarity": SystemSpec(prior=False, smoothing=False, update=False),
    "prior": SystemSpec(prior=True, smoothing=False, update=False),
    "prior_smoothing": SystemSpec(prior=True, smoothing=True, update=False),
    "prior_smoothing_update": SystemSpec(prior=True, smoothing=True, update=True),
    "prior_update": SystemSpec(prior=True, smoothing=False, update=True),
}


class TextEncoder(Protocol):
    """What the experiment needs of an embedder: unit vectors in the order of the texts."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class CredibilityExperimentConfig(BaseModel):
    """Every setting of the experiment; its hash (with the corpus fingerprint) is the experiment id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_path: Path | None = None  # None: <shared data>/health/medquad_docs.jsonl.gz
    seed: int = 13
    max_source_docs: int | None = Field(default=None, ge=1)  # None: all 5,486 MedQuAD documents
    n_queries: int = Field(default=300, ge=1)
    min_answer_chars: int = Field(default=200, ge=1)
    adversarial_per_query: int = Field(default=1, ge=0)
    faithful_per_query: int = Field(default=1, ge=0)
    n_distractor_copies: int = Field(default=1000, ge=0)
    copy_sentences: int = Field(default=5, ge=1)
    embed_chars: int = Field(default=500, ge=50)
    k: int = Field(default=5, ge=1)
    # priors, pool_factor, smoothing_alpha and smoothing_neighbours are used; the systems decide
    # whether smoothing applies, so credibility.enabled / credibility.smoothing are ignored here
    credibility: CredibilityConfig = CredibilityConfig(enabled=True)
    update_rate: float = 0.05
    delta_match: float = 0.3
    delta_adversarial: float = -0.5
    delta_other: float = -0.1
    systems: tuple[SystemName, ...] = ("similarity", "prior", "prior_smoothing", "prior_smoothing_update",
                                       "prior_update")
    sweep_scales: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)
    bootstrap_resamples: int = Field(default=10_000, ge=100)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    bootstrap_seed: int = DEFAULT_SEED
    high_credibility_threshold: float = 0.70

    def corpus_spec(self) -> CorpusSpec:
        return CorpusSpec(seed=self.seed, max_source_docs=self.max_source_docs, n_queries=self.n_queries,
                          min_answer_chars=self.min_answer_chars, adversarial_per_query=self.adversarial_per_query,
                          faithful_per_query=self.faithful_per_query, n_distractor_copies=self.n_distractor_copies,
                          copy_sentences=self.copy_sentences)

    def feedback_rule(self) -> FeedbackRule:
        return FeedbackRule(self.update_rate, self.delta_match, self.delta_adversarial, self.delta_other)

    def medquad_path(self) -> Path:
        return self.data_path or shared_data_dir() / "health" / "medquad_docs.jsonl.gz"


@dataclass(frozen=True)
class EmbeddedCorpus:
    """Unit vectors of the documents and the queries, and what embedding them cost."""

    doc_vectors: np.ndarray
    query_vectors: np.ndarray
    seconds: float
    encoded: int | None  # texts that went through the model (None if the encoder does not count)


@dataclass(frozen=True)
class SystemRun:
    """One system's top k for every query, in query order, and its weight history if it updates."""

    name: str
    rankings: list[Ranking]
    weight_history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class ExperimentResult:
    """Everything the experiment produced: records by table, report paths, summary figures."""

    experiment_id: str
    out_dir: Path
    summary_path: Path
    plot_path: Path
    n_docs: int
    n_queries: int
    records: dict[str, list[Record]]
    summary: list[CredibilitySummaryRecord]
    timings: dict[str, float]
    embedding: EmbeddedCorpus

    def metric(self, system: str, metric: str, labels: str = "topical") -> CredibilitySummaryRecord:
        """The summary row of one system and metric."""
        for row in self.summary:
            if row.system == system and row.metric == metric and row.labels == labels:
                return row
        raise KeyError(f"no summary row for {system}/{metric}/{labels}")


# --- steps ---------------------------------------------------------------------------------------


def build_experiment_corpus(config: CredibilityExperimentConfig) -> ExperimentCorpus:
    """Step 1: MedQuAD originals, queries, synthetic copies and labels."""
    path = config.medquad_path()
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: set HIFIRAG_SHARED_DATA to the shared data folder "
                                "or pass data_path in the experiment config")
    return build_corpus(path, config.corpus_spec())


def embed_experiment(corpus: ExperimentCorpus, encoder: TextEncoder,
                     config: CredibilityExperimentConfig) -> EmbeddedCorpus:
    """Step 2: embed the bounded text of every document and every query (cached by the embedder)."""
    before = getattr(encoder, "encoded", None)
    start = time.perf_counter()
    doc_vectors = encoder.encode([embedding_text(d, config.embed_chars) for d in corpus.docs])
    query_vectors = encoder.encode([q.text for q in corpus.queries])
    seconds = time.perf_counter() - start
    after = getattr(encoder, "encoded", None)
    encoded = after - before if isinstance(before, int) and isinstance(after, int) else None
    return EmbeddedCorpus(np.asarray(doc_vectors, np.float32), np.asarray(query_vectors, np.float32), seconds, encoded)


def build_reranker(corpus: ExperimentCorpus, embedded: EmbeddedCorpus) -> CredibilityReranker:
    """The flat index over the corpus with each document's source type."""
    return CredibilityReranker(embedded.doc_vectors, [d.source_type for d in corpus.docs])


def candidate_pools(reranker: CredibilityReranker, embedded: EmbeddedCorpus,
                    config: CredibilityExperimentConfig) -> tuple[np.ndarray, np.ndarray]:
    """Step 3: the similarity pool of ``pool_factor x k`` per query, shared by every system."""
    return reranker.pool(embedded.query_vectors, config.credibility.pool_factor * config.k)


def pool_statistics(corpus: ExperimentCorpus, reranker: CredibilityReranker, pools: tuple[np.ndarray, np.ndarray],
                    config: CredibilityExperimentConfig) -> dict[str, float]:
    """What the pools allow: gold page present, adversarial documents in them, too few credible ones."""
    _, pool_ids = pools
    priors = resolve_priors(config.credibility)
    credible = np.array([priors[d.source_type] >= config.high_credibility_threshold for d in corpus.docs])
    adversarial = np.array([d.adversarial for d in corpus.docs])
    gold = [corpus.doc_index[q.gold_doc_id] for q in corpus.queries]
    return {
        "gold_in_pool": float(np.mean([g in row for g, row in zip(gold, pool_ids, strict=True)])),
        "adversarial_in_pool": float(adversarial[pool_ids].sum(axis=1).mean()),
        "pool_short_of_high": float((credible[pool_ids].sum(axis=1) < config.k).mean()),
    }


def run_system(name: str, corpus: ExperimentCorpus, reranker: CredibilityReranker, pools: tuple[np.ndarray, np.ndarray],
               config: CredibilityExperimentConfig, priors: Mapping[str, float] | None = None) -> SystemRun:
    """Step 4 for one system: rank every query's pool (sequentially, with the update if it has one)."""
    spec = SYSTEMS[name]
    pool_sims, pool_ids = pools
    weights = dict(priors if priors is not None else resolve_priors(config.credibility))
    alpha = config.credibility.smoothing_alpha if spec.smoothing else None
    n_neighbours = config.credibility.smoothing_neighbours
    rule = config.feedback_rule()
    adversarial = np.array([d.adversarial for d in corpus.docs])
    rankings: list[Ranking] = []
    history: list[dict[str, float]] = [dict(weights)] if spec.update else []
    for qi, query in enumerate(corpus.queries):
        type_weights = weight_vector(weights) if spec.prior else None
        ranking = reranker.rerank(pool_sims[qi], pool_ids[qi], config.k, type_weights, alpha, n_neighbours)
        rankings.append(ranking)
        if spec.update:
            # ORACLE: adversarial flags and the gold document's type come from the labels.
            top_types = [SOURCE_TYPES[c] for c in reranker.type_codes[ranking.doc_ids]]
            expected = corpus.docs[corpus.doc_index[query.gold_doc_id]].source_type
            feedback = oracle_feedback(top_types, adversarial[ranking.doc_ids].tolist(), expected, rule)
            weights = update_weights(weights, feedback, rule)
            history.append(dict(weights))
    return SystemRun(name, rankings, history)


def run_systems(corpus: ExperimentCorpus, reranker: CredibilityReranker, pools: tuple[np.ndarray, np.ndarray],
                config: CredibilityExperimentConfig) -> dict[str, SystemRun]:
    """Step 4: every configured system, the baseline always included."""
    if any(SYSTEMS[s].smoothing for s in config.systems):
        reranker.precompute_neighbours(config.credibility.smoothing_neighbours)
    names = dict.fromkeys((BASELINE, *config.systems))
    return {name: run_system(name, corpus, reranker, pools, config) for name in names}


def query_metrics(doc_ids: Sequence[str], credibility: Sequence[float], grades: Mapping[str, float],
                  adversarial: frozenset[str], k: int, high_threshold: float) -> dict[str, float]:
    """The six metrics of one ranked list."""
    return {
        "precision": precision_at_k(doc_ids, grades, k),
        "ndcg": ndcg_at_k(doc_ids, grades, k),
        "reciprocal_rank": reciprocal_rank(doc_ids, grades, k),
        "adversarial_hit_rate": adversarial_hit_rate(doc_ids, adversarial, k),
        "mean_credibility": mean_credibility_at_k(credibility, k),
        "high_credibility_ratio": high_credibility_ratio(credibility, k, high_threshold),
    }


def score_runs(corpus: ExperimentCorpus, runs: Mapping[str, SystemRun], config: CredibilityExperimentConfig,
               experiment_id: str) -> list[CredibilityQueryRecord]:
    """Step 5: per-query metrics of every system under both label schemes.

    Credibility is always measured with the configured (unscaled, un-updated) priors, so systems
    are compared on the same scale whatever weights they ranked with.
    """
    base_priors = resolve_priors(config.credibility)
    adversarial = corpus.adversarial_ids
    out: list[CredibilityQueryRecord] = []
    for name, run in runs.items():
        for step, (query, ranking) in enumerate(zip(corpus.queries, run.rankings, strict=True)):
            docs = [corpus.docs[i] for i in ranking.doc_ids]
            ids = [d.doc_id for d in docs]
            credibility = [base_priors[d.source_type] for d in docs]
            for scheme in LABEL_SCHEMES:
                grades = corpus.labels[scheme][query.query_id]
                values = query_metrics(ids, credibility, grades, adversarial, config.k,
                                       config.high_credibility_threshold)
                out.append(CredibilityQueryRecord(
                    question_id=query.query_id, experiment_id=experiment_id, system=name, labels=scheme,
                    oracle_feedback=SYSTEMS[name].update, step=step, query=query.text, qtype=query.qtype,
                    k=config.k, n_relevant=sum(1 for g in grades.values() if g > 0),
                    top_doc_ids=ids, top_source_types=[d.source_type for d in docs],
                    top_similarities=[float(x) for x in ranking.similarities],
                    top_weights=[float(x) for x in ranking.weights], **values,
                ))
    return out


def summarize(rows: Sequence[CredibilityQueryRecord], config: CredibilityExperimentConfig,
              experiment_id: str) -> list[CredibilitySummaryRecord]:
    """Step 6: mean of each metric with its bootstrap interval and the paired difference to the baseline."""
    table: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in rows:
        per_metric = table.setdefault((row.system, row.labels), {m: [] for m in METRICS})
        for metric in METRICS:
            per_metric[metric].append(getattr(row, metric))
    out: list[CredibilitySummaryRecord] = []
    for (system, scheme), per_metric in table.items():
        baseline = table[(BASELINE, scheme)]
        for metric in METRICS:
            values = per_metric[metric]
            ci = bootstrap_ci(values, config.bootstrap_resamples, config.confidence, config.bootstrap_seed)
            row = CredibilitySummaryRecord(
                experiment_id=experiment_id, system=system, labels=scheme, oracle_feedback=SYSTEMS[system].update,
                metric=metric, k=config.k, n_queries=len(values), mean=ci.mean, mean_low=ci.low,
                mean_high=ci.high, baseline_system=BASELINE, baseline_mean=float(np.mean(baseline[metric])),
                confidence=config.confidence, n_resamples=config.bootstrap_resamples,
            )
            if system != BASELINE:
                paired = paired_bootstrap_ci(values, baseline[metric], config.bootstrap_resamples,
                                             config.confidence, config.bootstrap_seed)
                row.diff, row.diff_low, row.diff_high = paired.mean_diff, paired.low, paired.high
            out.append(row)
    return out


def sensitivity_sweep(corpus: ExperimentCorpus, reranker: CredibilityReranker, pools: tuple[np.ndarray, np.ndarray],
                      config: CredibilityExperimentConfig, experiment_id: str) -> list[CredibilitySweepRecord]:
    """Step 7: the prior system with lambda_s(t) = clip(mean + s (lambda(t) - mean)) for each scale s."""
    base = resolve_priors(config.credibility)
    out: list[CredibilitySweepRecord] = []
    for scale in config.sweep_scales:
        priors = scale_spread(base, scale)
        run = run_system("prior", corpus, reranker, pools, config, priors=priors)
        rows = score_runs(corpus, {"prior": run}, config, experiment_id)
        for scheme in LABEL_SCHEMES:
            scheme_rows = [r for r in rows if r.labels == scheme]
            for metric in METRICS:
                out.append(CredibilitySweepRecord(
                    experiment_id=experiment_id, labels=scheme, scale=float(scale), metric=metric,
                    value=float(np.mean([getattr(r, metric) for r in scheme_rows])),
                    priors_json=json.dumps(priors, sort_keys=True),
                ))
    return out


def weight_records(runs: Mapping[str, SystemRun], experiment_id: str) -> list[CredibilityWeightRecord]:
    """The ORACLE update's weight history of every updating system, one row per type and step."""
    return [CredibilityWeightRecord(experiment_id=experiment_id, system=run.name, step=step, source_type=t, weight=w)
            for run in runs.values() for step, weights in enumerate(run.weight_history) for t, w in weights.items()]


def doc_records(corpus: ExperimentCorpus, experiment_id: str) -> list[CredibilityDocRecord]:
    """The corpus as rows, so an analyst can join rankings to documents."""
    return [CredibilityDocRecord(experiment_id=experiment_id, namespace=corpus.namespace, doc_id=d.doc_id, url=d.url,
                                 title=d.title, source_type=d.source_type, kind=d.kind, origin_doc_id=d.origin_doc_id,
                                 origin_qid=d.origin_qid, focus=d.focus, changes=list(d.changes), n_chars=len(d.text))
            for d in corpus.docs]


def experiment_id_for(config: CredibilityExperimentConfig, corpus: ExperimentCorpus) -> str:
    """Hash of the settings that shape results and of the corpus content (not of the data path)."""
    settings = config.model_dump(mode="json", exclude={"data_path"})
    return stable_hash({"config": settings, "corpus": corpus.data_fingerprint})


def run_experiment(config: CredibilityExperimentConfig, out_dir: Path, embedder: TextEncoder) -> ExperimentResult:
    """All steps in order; writes the Markdown summary and the plot into ``out_dir``."""
    from hifirag_core.credibility.report import write_report  # matplotlib only when reporting

    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock
        clock = now

    corpus = build_experiment_corpus(config)
    experiment_id = experiment_id_for(config, corpus)
    lap("build_corpus")
    embedded = embed_experiment(corpus, embedder, config)
    lap("embed")
    reranker = build_reranker(corpus, embedded)
    pools = candidate_pools(reranker, embedded, config)
    runs = run_systems(corpus, reranker, pools, config)
    lap("run_systems")
    query_rows = score_runs(corpus, runs, config, experiment_id)
    summary = summarize(query_rows, config, experiment_id)
    sweep = sensitivity_sweep(corpus, reranker, pools, config, experiment_id)
    weights = weight_records(runs, experiment_id)
    lap("score")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path, plot_path = write_report(out_dir, config, corpus, embedded, summary, sweep, runs, experiment_id,
                                           pool_statistics(corpus, reranker, pools, config))
    lap("report")
    records: dict[str, list[Record]] = {
        CredibilityDocRecord.TABLE: list(doc_records(corpus, experiment_id)),
        CredibilityQueryRecord.TABLE: list(query_rows),
        CredibilitySummaryRecord.TABLE: list(summary),
        CredibilitySweepRecord.TABLE: list(sweep),
        CredibilityWeightRecord.TABLE: list(weights),
    }
    return ExperimentResult(experiment_id, out_dir, summary_path, plot_path, len(corpus.docs), len(corpus.queries),
                            records, summary, timings, embedded)


def corpus_counts(corpus: ExperimentCorpus) -> Counter[tuple[str, str]]:
    """Documents by (kind, source type)."""
    return Counter((d.kind, d.source_type) for d in corpus.docs)


def write_tables(result: ExperimentResult, folder: Path) -> list[Path]:
    """The records as one Parquet file per table, for a standalone run without the warehouse."""
    import pyarrow.parquet as pq

    from hifirag_core.records import TABLES, to_table

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for table, rows in result.records.items():
        path = folder / f"{table}.parquet"
        pq.write_table(to_table(rows, TABLES[table]), path)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone runner until the flow and CLI wrap ``run_experiment``.

    Example: ``python -m hifirag_core.credibility.experiment --out bench/out/credibility --set n_queries=300``
    """
    import argparse

    from hifirag_core.config import DEFAULT_DATA_ROOT, ConfigError, parse_overrides
    from hifirag_core.embeddings import Embedder

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder for the summary, the plot and tables/")
    parser.add_argument("--cache", type=Path, default=DEFAULT_DATA_ROOT / "cache" / "embeddings.sqlite",
                        help="on-disk vector cache (default: %(default)s)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="experiment setting, e.g. --set n_queries=300 --set credibility.smoothing_alpha=0.05")
    args = parser.parse_args(argv)
    try:
        config = CredibilityExperimentConfig.model_validate(parse_overrides(args.overrides))
    except (ConfigError, ValueError) as exc:
        parser.error(str(exc))
    result = run_experiment(config, args.out, Embedder(args.cache))
    write_tables(result, args.out / "tables")
    print(result.summary_path.read_text(encoding="utf-8"))
    print(f"experiment {result.experiment_id}: {result.summary_path}, {result.plot_path}, tables in {args.out / 'tables'}")
    print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "BASELINE",
    "CORPUS_NAMESPACE",
    "CredibilityExperimentConfig",
    "EmbeddedCorpus",
    "ExperimentResult",
    "SYSTEMS",
    "SystemRun",
    "build_experiment_corpus",
    "build_reranker",
    "candidate_pools",
    "pool_statistics",
    "corpus_counts",
    "embed_experiment",
    "run_experiment",
    "run_system",
    "run_systems",
    "score_runs",
    "sensitivity_sweep",
    "summarize",
    "write_tables",
]
