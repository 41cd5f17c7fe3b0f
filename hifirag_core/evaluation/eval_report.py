"""What an evaluation shows: the Markdown tables (terminal and Prefect artifact) and one self-contained HTML page.

The HTML page embeds its plots as base64 PNG (matplotlib, Agg backend) and carries no external
reference (no script, stylesheet, font or image URL), so it can be mailed or archived as one file.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from hifirag_core.evaluation.compare import MetricValues, Verdict, changed_most
from hifirag_core.records.evaluation import EvaluationMetricRecord

# Quality metrics in display order; the semantic one appears under whichever name the run used.
QUALITY = ("rouge_l_f1", "bertscore_deberta_f1", "bertscore_minilm_f1", "citation_precision", "citation_recall",
           "gold_section_kept", "gold_section_cited", "gold_sections_all_cited", "abstention_precision", "abstention_recall",
           "answered_and_cited")
LABELS = {
    "rouge_l_f1": "ROUGE-L F1",
    "bertscore_deberta_f1": "DeBERTaScore F1",
    "bertscore_minilm_f1": "BERTScore F1 (MiniLM)",
    "citation_precision": "citation precision",
    "citation_recall": "citation recall",
    "gold_section_kept": "gold section kept",
    "gold_page_cited": "gold page cited",
    "gold_section_cited": "gold section kept + cited",
    "gold_sections_all_cited": "every gold section kept + cited",
    "abstention_precision": "abstention precision",
    "abstention_recall": "abstention recall",
    "answered_and_cited": "answerable: answered + cited",
    "abstained": "abstained",
    "answered": "answered",
    "answer_words": "answer words",
    "cost_usd": "cost/q (USD)",
    "tokens_in": "tokens in/q",
    "tokens_out": "tokens out/q",
    "latency_s": "latency/q (s)",
}
FUNNEL_STEPS = ("in_search_results", "kept_by_url_filter", "fetched", "gold_section_parsed", "gold_section_kept",
                "cited")


@dataclass
class StageCost:
    """A stage of a run: seconds when computed, per question, and its model calls' tokens and cost."""

    stage: str
    seconds_per_question: float | None
    computed_share: float
    cost_usd: float
    tokens: int


@dataclass
class VariantResult:
    """One variant of an evaluation: its run, its scores and summary, and the gate's outcome."""

    variant: str
    run_id: str
    summary: list[EvaluationMetricRecord]
    values: MetricValues
    n_questions: int
    n_answered: int
    unscorable: list[str]
    verdict: Verdict
    baseline_evaluation_id: str | None = None
    baseline_run_id: str | None = None
    baseline_values: MetricValues | None = None
    stages: list[StageCost] = field(default_factory=list)
    funnel: dict[str, float] | None = None

    def metric(self, name: str) -> EvaluationMetricRecord | None:
        return next((m for m in self.summary if m.metric == name), None)


@dataclass
class EvaluationReport:
    """Everything the tables and the page show."""

    evaluation_id: str
    dataset: str
    dataset_note: str
    dataset_fingerprint: str
    semantic_label: str | None
    support_threshold: float
    confidence: float
    variants: list[VariantResult]
    queries: dict[str, str]
    created_at: datetime
    changed_questions: int = 10


def _quality(report: EvaluationReport) -> list[str]:
    present = {m.metric for v in report.variants for m in v.summary if m.n}
    return [m for m in QUALITY if m in present]


def _ci(rec: EvaluationMetricRecord | None, digits: int = 3) -> str:
    if rec is None or rec.mean is None:
        return "—"
    return f"{rec.mean:.{digits}f} [{rec.low:.{digits}f}, {rec.high:.{digits}f}]"


def _num(rec: EvaluationMetricRecord | None, fmt: str) -> str:
    return "—" if rec is None or rec.mean is None else format(rec.mean, fmt)


def results_table(report: EvaluationReport) -> list[str]:
    """Markdown: a row per variant (each metric with its interval, length, cost and latency per question),
    and the echo floor row: the question itself given as the answer."""
    quality = _quality(report)
    heads = ["variant", "answered", *[LABELS[m] for m in quality], "words", "cost/q (USD)", "latency/q (s)"]
    lines = ["| " + " | ".join(heads) + " |", "|---" * len(heads) + "|"]
    for v in report.variants:
        latency = v.metric("latency_s")
        missing = f" ({latency.n_missing} unknown)" if latency and latency.n_missing else ""
        cells = [v.variant, f"{v.n_answered}/{v.n_questions}", *[_ci(v.metric(m)) for m in quality],
                 _num(v.metric("answer_words"), ".0f"), _num(v.metric("cost_usd"), ".4f"),
                 _num(latency, ".2f") + missing]
        lines.append("| " + " | ".join(cells) + " |")
    first = report.variants[0] if report.variants else None
    if first is not None and any(first.metric(f"echo_{m}") for m in quality):
        echo_words = [len(q.split()) for q in report.queries.values()]
        cells = ["*echo floor (question as answer)*", "—",
                 *[_ci(first.metric(f"echo_{m}")) if first.metric(f"echo_{m}") else "" for m in quality],
                 f"{sum(echo_words) / max(1, len(echo_words)):.0f}", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def comparison_table(report: EvaluationReport) -> list[str]:
    """Markdown: each metric's paired difference to the baseline evaluation, with its interval."""
    lines = ["| variant | metric | baseline | now | difference [95% CI] | questions | |", "|---|---|---|---|---|---|---|"]
    for v in report.variants:
        for rec in v.summary:
            if rec.diff is None or rec.metric.startswith("echo_") or rec.metric not in LABELS:
                continue
            mark = "**regressed**" if rec.regressed else ("gated" if rec.gated else
                                                          ("not gated (by construction)" if rec.not_gated_reason else ""))
            lines.append(f"| {v.variant} | {LABELS[rec.metric]} | {rec.baseline_mean:.3f} | {rec.mean:.3f} | "
                         f"{rec.diff:+.3f} [{rec.diff_low:+.3f}, {rec.diff_high:+.3f}] | {rec.n_paired} | {mark} |")
    return lines if len(lines) > 2 else []


def verdict_lines(report: EvaluationReport) -> list[str]:
    """One line per variant: first evaluation, passed or regressed, against which evaluation."""
    out = []
    for v in report.variants:
        if v.verdict.verdict == "first":
            out.append(f"- `{v.variant}`: first evaluation of this dataset and variant: nothing to compare with; "
                       "it becomes the baseline.")
        elif v.verdict.verdict == "regressed":
            metrics = ", ".join(LABELS.get(m, m) for m in v.verdict.regressed_metrics)
            out.append(f"- `{v.variant}`: **REGRESSED** against `{v.baseline_evaluation_id}` (run "
                       f"`{v.baseline_run_id}`): {metrics} (interval of the paired difference entirely below 0).")
        else:
            out.append(f"- `{v.variant}`: {v.verdict.verdict}; no gated metric's interval lies below 0 against "
                       f"`{v.baseline_evaluation_id}` (run `{v.baseline_run_id}`).")
    return out


def markdown(report: EvaluationReport) -> str:
    """The evaluation's Markdown summary: the results table, the verdicts and the comparison."""
    lines = [f"## Evaluation `{report.evaluation_id}`", "",
             f"{report.dataset_note}; dataset fingerprint `{report.dataset_fingerprint}`. "
             f"Means with {report.confidence:.0%} bootstrap intervals."]
    if report.semantic_label:
        lines.append(f"Semantic metric: {report.semantic_label}; read it beside the echo floor and the answer "
                     "length, never alone.")
    unscorable = sorted({q for v in report.variants for q in v.unscorable})
    if unscorable:
        lines.append(f"Unscorable (reference is null, not scored): {', '.join(unscorable)}.")
    lines += ["", *results_table(report), "", "### Regression gate", "", *verdict_lines(report)]
    constructed = [f"- `{v.variant}`: {LABELS.get(rec.metric, rec.metric)} is reported, not gated: "
                   f"{rec.not_gated_reason}." for v in report.variants for rec in v.summary if rec.not_gated_reason]
    if constructed:
        lines += ["", *constructed]
    comparison = comparison_table(report)
    if comparison:
        lines += ["", *comparison]
    return "\n".join(lines) + "\n"


# --- plots ---------------------------------------------------------------------------------------


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def plot_metrics(report: EvaluationReport) -> str | None:
    """A panel per quality metric: each variant's mean with its interval; the echo floor dashed."""
    quality = _quality(report)
    if not quality or not report.variants:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(quality), figsize=(3.2 * len(quality), 3.4), squeeze=False)
    names = [v.variant for v in report.variants]
    for ax, metric in zip(axes[0], quality, strict=True):
        for x, v in enumerate(report.variants):
            rec = v.metric(metric)
            if rec is None or rec.mean is None:
                continue
            ax.errorbar([x], [rec.mean], yerr=[[rec.mean - rec.low], [rec.high - rec.mean]], fmt="o", capsize=4,
                        color="tab:red" if rec.regressed else "tab:blue")
        echo = report.variants[0].metric(f"echo_{metric}")
        if echo is not None and echo.mean is not None:
            ax.axhline(echo.mean, linestyle="--", color="gray", linewidth=1, label="echo floor")
            ax.legend(fontsize=7, loc="best")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(LABELS[metric], fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def plot_cost_quality(report: EvaluationReport) -> str | None:
    """Quality against cost per question and against latency per question, one point per variant."""
    quality = _quality(report)
    if not quality:
        return None
    primary = quality[0]
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, axis_metric in zip(axes, ("cost_usd", "latency_s"), strict=True):
        plotted = 0
        for v in report.variants:
            q, x = v.metric(primary), v.metric(axis_metric)
            if q is None or q.mean is None or x is None or x.mean is None:
                continue
            plotted += 1
            ax.errorbar([x.mean], [q.mean], yerr=[[q.mean - q.low], [q.high - q.mean]], fmt="o", capsize=3)
            ax.annotate(v.variant, (x.mean, q.mean), textcoords="offset points", xytext=(5, 4), fontsize=8)
        if not plotted:
            ax.text(0.5, 0.5, f"no {LABELS[axis_metric]} recorded", ha="center", va="center", transform=ax.transAxes,
                    color="gray")
        ax.set_xlabel(LABELS[axis_metric])
        ax.set_ylabel(LABELS[primary])
        ax.grid(alpha=0.3)
    axes[0].set_title("quality against cost", fontsize=9)
    axes[1].set_title("quality against latency", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def plot_stages(report: EvaluationReport) -> str | None:
    """Seconds and model cost per question for each stage, a bar per variant."""
    variants = [v for v in report.variants if v.stages]
    if not variants:
        return None
    plt = _pyplot()
    stages = list(dict.fromkeys(s.stage for v in variants for s in v.stages))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / len(variants)
    paid = any(s.cost_usd for v in variants for s in v.stages)
    for i, v in enumerate(variants):
        by_stage = {s.stage: s for s in v.stages}
        xs = [j + i * width for j in range(len(stages))]
        axes[0].bar(xs, [(by_stage[s].seconds_per_question or 0.0) if s in by_stage else 0.0 for s in stages],
                    width, label=v.variant)
        if paid:
            axes[1].bar(xs, [by_stage[s].cost_usd if s in by_stage else 0.0 for s in stages], width, label=v.variant)
    for ax, title in zip(axes, ("seconds per question when computed", "model cost per question (USD)"), strict=True):
        ax.set_xticks([j + width * (len(variants) - 1) / 2 for j in range(len(stages))], stages, rotation=30,
                      ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    if not paid:  # offline or fully reused: say so, not an empty axis with ±0.04 ticks
        axes[1].set_axis_off()
        axes[1].text(0.5, 0.5, "no paid model calls", ha="center", va="center", transform=axes[1].transAxes,
                     color="gray")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def plot_funnel(report: EvaluationReport) -> str | None:
    """The evidence funnel: share of questions still holding the gold evidence after each stage."""
    variants = [v for v in report.variants if v.funnel]
    if not variants:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for v in variants:
        ax.plot(range(len(FUNNEL_STEPS)), [v.funnel.get(s, 0.0) for s in FUNNEL_STEPS], marker="o", label=v.variant)
    ax.set_xticks(range(len(FUNNEL_STEPS)), [s.replace("_", " ") for s in FUNNEL_STEPS], rotation=20, ha="right",
                  fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of questions")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


# --- the page ------------------------------------------------------------------------------------


def _sql_for(question_id: str, run_ids: Sequence[str]) -> str:
    runs = ", ".join("'" + r.replace("'", "''") + "'" for r in run_ids)
    qid = question_id.replace("'", "''")
    return (f"SELECT * FROM question_trace WHERE run_id IN ({runs}) AND question_id = '{qid}';\n"
            f"SELECT run_id, stage, status, cached, seconds FROM stage_runs WHERE run_id IN ({runs}) "
            f"AND question_id = '{qid}' ORDER BY run_id, stage;\n"
            f"SELECT run_id, url, heading, kept, rank, score FROM section_decisions WHERE run_id IN ({runs}) "
            f"AND question_id = '{qid}' AND kept ORDER BY run_id, source_order, rank;")


def changed_pairs(report: EvaluationReport) -> list[tuple[str, str, str, MetricValues, MetricValues, str]]:
    """(title, earlier run, later run, earlier values, later values, metric) for each comparison shown."""
    quality = _quality(report)
    if not quality:
        return []
    metric = quality[0]
    pairs = []
    for v in report.variants:
        if v.baseline_values is not None and v.baseline_run_id:
            pairs.append((f"{v.variant}: baseline evaluation {v.baseline_evaluation_id} → this one",
                          v.baseline_run_id, v.run_id, v.baseline_values, v.values, metric))
    first = report.variants[0] if report.variants else None
    for v in report.variants[1:]:
        pairs.append((f"{first.variant} → {v.variant}", first.run_id, v.run_id, first.values, v.values, metric))
    return pairs


def _md_table_html(lines: Sequence[str]) -> str:
    """A Markdown pipe table as an HTML table (cells escaped; **x** and *x* become bold and italic)."""
    if not lines:
        return ""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def fmt(cell: str) -> str:
        text = html.escape(cell)
        if text.startswith("**") and text.endswith("**"):
            return f"<strong>{text[2:-2]}</strong>"
        if text.startswith("*") and text.endswith("*") and len(text) > 1:
            return f"<em>{text[1:-1]}</em>"
        return text.replace("`", "")

    head = "".join(f"<th>{fmt(c)}</th>" for c in cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{fmt(c)}</td>" for c in cells(line)) + "</tr>" for line in lines[2:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; }
img { max-width: 100%; } pre { background: #f6f6f6; padding: 6px; font-size: 0.78em; white-space: pre-wrap; }
.regressed { color: #b00020; font-weight: bold; } .passed { color: #0a7d2c; } .note { color: #555; font-size: 0.9em; }
details { margin: 2px 0; }
"""


def to_html(report: EvaluationReport) -> str:
    """The self-contained report page."""
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Evaluation {e(report.evaluation_id)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>Evaluation {e(report.evaluation_id)}</h1>",
             f"<p class='note'>{e(report.dataset_note)}. Dataset fingerprint {e(report.dataset_fingerprint)}; "
             f"created {e(report.created_at.strftime('%Y-%m-%d %H:%M UTC'))}. Means with {report.confidence:.0%} "
             "percentile bootstrap intervals over questions.</p>"]
    if report.semantic_label:
        parts.append(f"<p class='note'>Semantic metric: {e(report.semantic_label)}. It is shown beside the echo "
                     "floor (the question itself given as the answer) and the answer length; do not rank on it "
                     "alone.</p>")
    parts.append(f"<p class='note'>Citation support: MiniLM cosine of an answer sentence to the best sentence of a "
                 f"cited source's kept sections, supported at ≥ {report.support_threshold:.2f}.</p>")
    unscorable = sorted({q for v in report.variants for q in v.unscorable})
    if unscorable:
        parts.append(f"<p class='note'>Unscorable (reference is null; reported, not scored): {e(', '.join(unscorable))}"
                     "</p>")
    parts += ["<h2>Results</h2>", _md_table_html(results_table(report)), "<h2>Regression gate</h2><ul>"]
    for v, line in zip(report.variants, verdict_lines(report), strict=True):
        css = "regressed" if v.verdict.verdict == "regressed" else "passed"
        parts.append(f"<li class='{css}'>{e(line[2:].replace('**', '').replace('`', ''))}</li>")
    parts.append("</ul>")
    parts.append(_md_table_html(comparison_table(report)))
    for title, image in (("Metrics per variant", plot_metrics(report)),
                         ("Cost and latency against quality", plot_cost_quality(report)),
                         ("Time and cost per stage", plot_stages(report)),
                         ("Evidence funnel", plot_funnel(report))):
        if image:
            parts.append(f"<h2>{e(title)}</h2><img alt='{e(title)}' src='data:image/png;base64,{image}'>")
    parts.append(_changed_html(report))
    parts.append("</body></html>")
    return "\n".join(parts)


def _changed_html(report: EvaluationReport) -> str:
    pairs = changed_pairs(report)
    if not pairs or report.changed_questions == 0:
        return ""
    e = html.escape
    out = ["<h2>Questions that changed most</h2>",
           "<p class='note'>Paste a question's SQL into <code>hifirag sql</code> (or DuckDB on hifirag.duckdb) to see "
           "its rows stage by stage in both runs. When both sides are the same run id, the run was recomputed "
           "after a code change and only its current rows remain.</p>"]
    for title, before_run, after_run, before, after, metric in pairs:
        rows = changed_most(after.get(metric, {}), before.get(metric, {}), report.changed_questions)
        out.append(f"<h3>{e(title)} ({e(LABELS.get(metric, metric))})</h3>")
        if not rows:
            out.append("<p class='note'>No question changed.</p>")
            continue
        out.append("<table><thead><tr><th>question</th><th>before</th><th>after</th><th>change</th><th>stage rows"
                   "</th></tr></thead><tbody>")
        for qid, b, a in rows:
            sql = _sql_for(qid, list(dict.fromkeys([before_run, after_run])))
            out.append(f"<tr><td>{e(report.queries.get(qid, qid))}<br><small>{e(qid)}</small></td>"
                       f"<td class='num'>{b:.3f}</td><td class='num'>{a:.3f}</td><td class='num'>{a - b:+.3f}</td>"
                       f"<td><details><summary>SQL</summary><pre>{e(sql)}</pre></details></td></tr>")
        out.append("</tbody></table>")
    return "\n".join(out)
