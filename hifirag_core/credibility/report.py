"""The credibility experiment's Markdown summary and sensitivity plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hifirag_core.credibility.corpus import LABEL_SCHEMES, ExperimentCorpus
from hifirag_core.credibility.priors import resolve_priors
from hifirag_core.credibility.records import CredibilitySummaryRecord, CredibilitySweepRecord
from hifirag_core.credibility.sources import SOURCE_TYPES
from hifirag_core.credibility.update import converged_at

if TYPE_CHECKING:
    from hifirag_core.credibility.experiment import CredibilityExperimentConfig, EmbeddedCorpus, SystemRun

PAPER_P5 = (0.48, 0.72)  # the paper's similarity-only and source-aware P@5 (10 queries, 120 docs)

_SCHEME_TITLES = {
    "topical": "topical labels (primary: relevance independent of source type)",
    "government_only": "government-only labels (faithful low-credibility copies count as not relevant)",
}


def metric_label(metric: str, k: int) -> str:
    """The column heading of a metric."""
    return {
        "precision": f"P@{k}",
        "ndcg": f"NDCG@{k}",
        "reciprocal_rank": f"MRR@{k}",
        "adversarial_hit_rate": f"adv. hit rate@{k}",
        "mean_credibility": f"mean cred.@{k}",
        "high_credibility_ratio": f"high-cred. share@{k}",
    }[metric]


def system_label(system: str) -> str:
    """A system's name in tables; the oracle-update systems are marked as such."""
    return {
        "similarity": "similarity only (baseline)",
        "prior": "x prior",
        "prior_smoothing": "x prior + smoothing",
        "prior_smoothing_update": "x prior + smoothing + update (ORACLE)",
        "prior_update": "x prior + update (ORACLE), no smoothing",
    }.get(system, system)


def _cell(row: CredibilitySummaryRecord) -> str:
    if row.diff is None:
        return f"{row.mean:.3f} [{row.mean_low:.3f}, {row.mean_high:.3f}]"
    return f"{row.mean:.3f} ({row.diff:+.3f} [{row.diff_low:+.3f}, {row.diff_high:+.3f}])"


def results_table(summary: Sequence[CredibilitySummaryRecord], scheme: str, metrics: Sequence[str],
                  systems: Sequence[str], k: int) -> list[str]:
    """Markdown rows: systems by metrics, each cell the mean and the paired difference to the baseline."""
    by_key = {(r.system, r.metric): r for r in summary if r.labels == scheme}
    lines = ["| system | " + " | ".join(metric_label(m, k) for m in metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for system in systems:
        lines.append(f"| {system_label(system)} | " + " | ".join(_cell(by_key[(system, m)]) for m in metrics) + " |")
    return lines


def _sweep_table(sweep: Sequence[CredibilitySweepRecord], k: int) -> list[str]:
    columns = [("topical", "precision"), ("government_only", "precision"), ("topical", "ndcg"),
               ("topical", "reciprocal_rank"), ("topical", "adversarial_hit_rate"), ("topical", "mean_credibility")]
    values = {(r.scale, r.labels, r.metric): r.value for r in sweep}
    scales = sorted({r.scale for r in sweep})
    heads = [f"{metric_label(m, k)}{' (gov.-only labels)' if s == 'government_only' else ''}" for s, m in columns]
    lines = ["| scale s | " + " | ".join(heads) + " |", "|---|" + "---|" * len(columns)]
    for scale in scales:
        lines.append(f"| {scale:g} | " + " | ".join(f"{values[(scale, s, m)]:.3f}" for s, m in columns) + " |")
    return lines


def plot_sweep(sweep: Sequence[CredibilitySweepRecord], path: Path, k: int) -> Path:
    """Two panels over the spread scale: retrieval quality, and adversarial hits with credibility."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    def series(scheme: str, metric: str) -> tuple[list[float], list[float]]:
        points = sorted((r.scale, r.value) for r in sweep if r.labels == scheme and r.metric == metric)
        return [p[0] for p in points], [p[1] for p in points]

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for metric, style in (("precision", "o-"), ("ndcg", "s-"), ("reciprocal_rank", "^-")):
        left.plot(*series("topical", metric), style, label=f"{metric_label(metric, k)} (topical)")
    left.plot(*series("government_only", "precision"), "o--", label=f"{metric_label('precision', k)} (gov.-only labels)")
    for metric, style in (("adversarial_hit_rate", "o-"), ("mean_credibility", "s-"), ("high_credibility_ratio", "^-")):
        right.plot(*series("topical", metric), style, label=metric_label(metric, k))
    for ax, title in ((left, "Retrieval quality"), (right, "Adversarial hits and credibility")):
        ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("prior spread scale s  (0: all equal, 1: paper's priors)")
        ax.set_title(title)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    fig.suptitle("Sensitivity of sim x prior to the spread of the priors")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _weights_section(runs: Mapping[str, SystemRun], present: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for run in runs.values():
        if not run.weight_history:
            continue
        history = run.weight_history
        first, last = history[0], history[-1]
        step = converged_at(history, present)
        lines.append(f"**{system_label(run.name)}**: weights after {len(history) - 1} queries. The paper's "
                     "convergence criterion (mean |change| over the last 3 queries < 0.01, averaged here over the "
                     f"types present in the corpus) holds from query {step if step is not None else 'never'}; one "
                     "query moves a weight by at most eta x 0.5 = 0.025, so that criterion says little, and the "
                     "last column shows when each weight stopped moving.")
        lines.append("")
        lines.append("| source type | initial | final | final value from query |")
        lines.append("|---|---|---|---|")
        for t in SOURCE_TYPES:
            if t in present:
                settled = next(i for i in range(len(history)) if all(h[t] == last[t] for h in history[i:]))
                lines.append(f"| {t} | {first[t]:.3f} | {last[t]:.3f} | {settled} |")
        lines.append("")
    return lines


def _closeness(corpus: ExperimentCorpus, embedded: EmbeddedCorpus) -> str:
    """Mean cosine of each query to its gold page and to the copies made from its own answer."""
    import numpy as np

    copies: dict[str, list[int]] = {}
    for di, doc in enumerate(corpus.docs):
        if doc.kind != "original":
            copies.setdefault(doc.origin_doc_id, []).append(di)
    gold, adversarial, faithful = [], [], []
    for qi, query in enumerate(corpus.queries):
        qv = embedded.query_vectors[qi]
        gold.append(float(qv @ embedded.doc_vectors[corpus.doc_index[query.gold_doc_id]]))
        qid = query.query_id.rsplit("#", 1)[-1]
        for di in copies.get(query.gold_doc_id, []):
            doc = corpus.docs[di]
            if doc.adversarial and doc.origin_qid == qid:
                adversarial.append(float(qv @ embedded.doc_vectors[di]))
            elif doc.kind == "faithful":
                faithful.append(float(qv @ embedded.doc_vectors[di]))
    parts = [f"Mean cosine of a query to its gold page {np.mean(gold):.3f}"]
    if adversarial:
        parts.append(f"to the adversarial copy of its answer {np.mean(adversarial):.3f}")
    if faithful:
        parts.append(f"to a faithful copy of its page {np.mean(faithful):.3f}")
    return ", ".join(parts) + "."


def _mean_relevant(corpus: ExperimentCorpus, scheme: str) -> float:
    grades = corpus.labels[scheme].values()
    return sum(sum(1 for g in q.values() if g > 0) for q in grades) / max(len(grades), 1)


def _precision_ceiling(corpus: ExperimentCorpus, scheme: str, k: int) -> float:
    """Mean over queries of min(relevant, k) / k: the best P@k any ranking could get."""
    grades = corpus.labels[scheme].values()
    return sum(min(sum(1 for g in q.values() if g > 0), k) / k for q in grades) / max(len(grades), 1)


def write_report(out_dir: Path, config: CredibilityExperimentConfig, corpus: ExperimentCorpus,
                 embedded: EmbeddedCorpus, summary: Sequence[CredibilitySummaryRecord],
                 sweep: Sequence[CredibilitySweepRecord], runs: Mapping[str, SystemRun],
                 experiment_id: str, pool_stats: Mapping[str, float] | None = None) -> tuple[Path, Path]:
    """Write ``credibility_summary.md`` and ``credibility_sensitivity.png`` into ``out_dir``."""
    from hifirag_core.credibility.experiment import (
        BASELINE,
        LABEL_FREE_METRICS,
        METRICS,
        PLOT_FILE,
        SUMMARY_FILE,
    )

    k = config.k
    systems = list(runs)
    counts: dict[tuple[str, str], int] = {}
    for doc in corpus.docs:
        counts[(doc.kind, doc.source_type)] = counts.get((doc.kind, doc.source_type), 0) + 1
    present = [t for t in SOURCE_TYPES if any(st == t for _, st in counts)]
    priors = resolve_priors(config.credibility)
    n_adv = sum(1 for d in corpus.docs if d.adversarial)
    changed = sum(len(d.changes) for d in corpus.docs if d.adversarial)
    label_metrics = [m for m in METRICS if m not in LABEL_FREE_METRICS]
    free_metrics = [m for m in METRICS if m in LABEL_FREE_METRICS]

    def mean_of(system: str, metric: str, scheme: str = "topical") -> float:
        return next(r.mean for r in summary if r.system == system and r.metric == metric and r.labels == scheme)

    def diff_of(system: str, metric: str, scheme: str = "topical") -> CredibilitySummaryRecord:
        return next(r for r in summary if r.system == system and r.metric == metric and r.labels == scheme)

    lines = [
        "# Source-aware reranking on MedQuAD with injected low-credibility and adversarial copies",
        "",
        f"Experiment `{experiment_id}` · corpus namespace `{corpus.namespace}` · corpus fingerprint "
        f"`{corpus.data_fingerprint}` · seed {config.seed}",
        "",
        "**A controlled synthetic setting.** The government documents are real MedQuAD pages (NIH/CDC, "
        "CC BY 4.0). Every forum, blog and AI-chat document is synthetic, generated reproducibly from "
        "them: faithful copies (the first sentences of a real answer, lightly reworded) and adversarial "
        "copies (the same, with polarity words reversed, numbers scaled and drug names swapped). Their "
        "URLs have the real shapes of those platforms but the pages were never published. Source types "
        "come from the URL rules (the originals carry `government` as metadata). This is the paper's "
        "threat model: low-credibility documents are identifiable by their source.",
        "",
        "**The `update` systems use ORACLE feedback**: after each query, the adversarial flags and the gold "
        "document's source type (from the labels) drive the weight update. Each query is ranked before its "
        "own feedback is applied, but these rows show the update rule under ideal feedback, not learning "
        "from real use.",
        "",
        "## Setting",
        "",
        f"- {len(corpus.docs):,} documents, {len(corpus.queries)} queries (MedQuAD questions; the gold "
        "document is the page the question comes from).",
        f"- {n_adv} adversarial documents ({changed:,} changed claims in all), "
        f"{sum(1 for d in corpus.docs if d.kind == 'faithful')} faithful low-credibility copies.",
        f"- Retrieval: MiniLM (all-MiniLM-L6-v2) unit vectors, FAISS `IndexFlatIP`; each document is embedded "
        f"as its title plus its first {config.embed_chars} characters. Pool of "
        f"{config.credibility.pool_factor * k} by similarity, top {k} reported.",
        f"- Smoothing: alpha = {config.credibility.smoothing_alpha}, {config.credibility.smoothing_neighbours} "
        f"nearest neighbours; update: eta = {config.update_rate}, delta = {config.delta_match:+} (type matches "
        f"the gold document's) / {config.delta_adversarial:+} (adversarial) / {config.delta_other:+} (otherwise).",
        f"- Embedding took {embedded.seconds:.1f} s"
        + (f" ({embedded.encoded:,} texts through the model, the rest from the on-disk cache)."
           if embedded.encoded is not None else "."),
        f"- Intervals: {config.confidence:.0%} percentile bootstrap over queries, {config.bootstrap_resamples:,} "
        f"resamples, seed {config.bootstrap_seed}; differences are paired against the baseline.",
        *([f"- The pool of {config.credibility.pool_factor * k} holds the gold page for "
           f"{pool_stats['gold_in_pool']:.1%} of queries, {pool_stats['adversarial_in_pool']:.2f} adversarial "
           f"documents on average, and fewer than {k} documents of a type with prior >= "
           f"{config.high_credibility_threshold:.2f} for {pool_stats['pool_short_of_high']:.1%} of queries: there "
           "the top k must include lower-credibility documents whatever the weights (the prior only reorders "
           "the pool)."] if pool_stats else []),
        "- Relevant documents per query (mean): "
        + "; ".join(f"{s} labels {_mean_relevant(corpus, s):.2f}, so P@{k} can reach at most "
                    f"{_precision_ceiling(corpus, s, k):.3f}" for s in LABEL_SCHEMES) + ".",
        "",
        "| kind | " + " | ".join(present) + " |",
        "|---|" + "---|" * len(present),
    ]
    for kind in ("original", "faithful", "adversarial"):
        lines.append(f"| {kind} | " + " | ".join(str(counts.get((kind, t), 0)) for t in present) + " |")
    lines += ["", "Priors (defaults from table 1 as attributed by third-party notes): "
              + ", ".join(f"{t} {priors[t]:.2f}" for t in SOURCE_TYPES), ""]

    lines += ["## Results", "",
              "Each cell: mean over queries, then in brackets the paired difference to similarity-only with "
              "its interval (the baseline row shows its own interval).", ""]
    for scheme in LABEL_SCHEMES:
        lines += [f"### Relevance: {_SCHEME_TITLES[scheme]}", ""]
        lines += results_table(summary, scheme, label_metrics, systems, k)
        lines.append("")
    lines += ["### Source of the top results (independent of the labels)", ""]
    lines += results_table(summary, "topical", free_metrics, systems, k)
    lines.append("")

    weights = _weights_section(runs, present)
    if weights:
        lines += ["## Oracle weight update", ""] + weights

    lines += ["## Sensitivity to the spread of the priors", "",
              "The `x prior` system with lambda_s(t) = clip(mean + s (lambda(t) - mean), 0.10, 1.00), the mean "
              "taken over the eight types: s = 0 makes every weight equal (similarity order), s = 1 is the "
              "paper's table, s = 2 doubles the gaps.", ""]
    lines += _sweep_table(sweep, k)
    lines += ["", f"![sensitivity]({PLOT_FILE})", ""]

    base_p, prior_p = mean_of(BASELINE, "precision"), mean_of("prior", "precision") if "prior" in runs else None
    lines += ["## Compared with the paper", "",
              f"The paper reports P@5 {PAPER_P5[0]:.2f} -> {PAPER_P5[1]:.2f} for similarity-only -> source-aware "
              "on 120 hand-built documents and 10 queries, with 10 hand-written adversarial documents."]
    if prior_p is not None:
        topical = diff_of("prior", "precision")
        gov = diff_of("prior", "precision", "government_only")
        adv = diff_of("prior", "adversarial_hit_rate")
        lines += [
            "",
            f"Here, with {len(corpus.queries)} queries over {len(corpus.docs):,} documents: P@{k} "
            f"{base_p:.3f} -> {prior_p:.3f} with topical labels (difference {topical.diff:+.3f}, interval "
            f"[{topical.diff_low:+.3f}, {topical.diff_high:+.3f}]), "
            f"{mean_of(BASELINE, 'precision', 'government_only'):.3f} -> "
            f"{mean_of('prior', 'precision', 'government_only'):.3f} with government-only labels "
            f"({gov.diff:+.3f} [{gov.diff_low:+.3f}, {gov.diff_high:+.3f}]); the adversarial hit rate goes "
            f"{adv.baseline_mean:.3f} -> {adv.mean:.3f}.",
        ]
    lines += [
        "",
        "What differs between the two settings (facts of the set-ups, whatever the figures):",
        "",
        "- *Labels and ceiling.* The paper's 10 queries cover 5 topics, each with topic-matched relevant "
        "documents among 120. Here a query's relevant documents are those about its MedQuAD focus, which "
        "MedQuAD mostly covers with one page, so P@5 is capped by the ceiling given under Setting and its "
        "absolute value is not comparable with the paper's.",
        "- *What the low-credibility documents are.* Our copy of the paper does not say whether its "
        "non-adversarial low-credibility documents were on topic. Here faithful copies are on topic: with "
        "topical labels they are relevant and demoting them costs precision; with government-only labels "
        "they are not, which is the only way a prior can raise precision by demoting them.",
        f"- *Sample size.* 10 queries against {len(corpus.queries)} here; our copy of the paper gives no "
        "interval, while a mean P@5 over 10 queries moves in steps of 0.02 and has a wide interval.",
        "- *Adversarial documents.* The paper's 10 were hand-written to be close to its queries; ours are "
        "automatic edits of the answer each query was drawn from. " + _closeness(corpus, embedded),
        "",
    ]
    summary_path = out_dir / SUMMARY_FILE
    summary_path.write_text("\n".join(lines), encoding="utf-8")
    plot_path = plot_sweep(sweep, out_dir / PLOT_FILE, k)
    return summary_path, plot_path
