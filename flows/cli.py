"""The ``hifirag`` command: a thin shell over the flows, the warehouse and the corpus.

Prefect and the model libraries are imported inside the commands that need them, after the
environment is configured, so ``hifirag sql`` and ``hifirag runs`` start in a fraction of a second.
"""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hifirag_core.backends.base import MissingSecretError
from hifirag_core.config import ConfigError, parse_overrides
from hifirag_core.corpus.sources import FAQ_PAGE_PATTERNS, shared_data_dir
from hifirag_core.corpus.store import CorpusError
from hifirag_core.examples import ExamplesError
from hifirag_core.pipeline import STAGE_NAMES
from hifirag_core.questions import InputError
from hifirag_core.runs import data_root as resolve_data_root
from hifirag_core.variants import DEFAULT_RUN_VARIANT
from hifirag_core.warehouse import Warehouse, WarehouseError

app = typer.Typer(
    help="HiFi-RAG: hierarchical filtering and two-pass generation as a Prefect batch pipeline, "
    "with every stage's output in a Parquet/DuckDB warehouse.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
corpus_app = typer.Typer(help="Build and search the local corpus (the offline web).", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")
testset_app = typer.Typer(help="Build test sets: fresh-knowledge question-answer pairs.", no_args_is_help=True)
app.add_typer(testset_app, name="testset")

# Piped output (a file, another program) gets wide lines rather than a table folded to 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=200)
err = Console(stderr=True)

DataRoot = Annotated[
    Path | None,
    typer.Option("--data-root", help="Where the warehouse, corpus and caches live "
                 "(default: $HIFIRAG_DATA_ROOT, else warehouse/data).", show_default=False),
]
RunnerOpt = Annotated[str, typer.Option(help="Where questions run: threads (this process) or dask (a local "
                                          "cluster of --dask-workers processes, or --dask-address).")]
DaskAddress = Annotated[str | None, typer.Option(help="An existing Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                                                 "(its workers need the data root and PREFECT_API_URL).")]
DaskWorkers = Annotated[int, typer.Option(help="Processes of the local Dask cluster.")]
EXPECTED = (InputError, ConfigError, CorpusError, ExamplesError, WarehouseError, MissingSecretError)


def _runner(runner: str, dask_address: str | None, dask_workers: int) -> dict:
    """The flows' runner parameters, checked before Prefect starts."""
    from flows.runners import RunnerChoice

    try:
        RunnerChoice(runner, dask_address, dask_workers)  # type: ignore[arg-type]
    except ValueError as exc:
        _fail(exc)
    return {"runner": runner, "dask_address": dask_address, "dask_workers": dask_workers}


def _fail(exc: Exception) -> None:
    err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True)
    raise typer.Exit(2)


def _setup(data_root: Path | None) -> Path:
    from flows.environment import configure

    root = resolve_data_root(data_root)
    configure(root)
    return root


# --- run ---------------------------------------------------------------------------------------


@app.command()
def run(
    questions: Annotated[Path, typer.Argument(help="JSONL questions: MMU-RAGent (query, iid, reference) or FAQ format.")],
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`); the default answers "
                                         "like the paper's final system but says so when the sources found do not "
                                         "answer the question (final reproduces the paper's row).")] = DEFAULT_RUN_VARIANT,
    variants: Annotated[str | None, typer.Option(help="Several variants, comma-separated: one run each, "
                                                  "sharing every stage they have in common.")] = None,
    evidence_from: Annotated[str | None, typer.Option(help="Reuse this run's query plans, search results and "
                                                       "pages, so the evidence is identical.")] = None,
    run_id: Annotated[str | None, typer.Option(help="Run id \\[default: derived from questions + config, so a rerun resumes].")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N questions.")] = None,
    sample: Annotated[int | None, typer.Option(help="N questions spread evenly over the file.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated question ids.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable).")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Questions in flight at once \\[default: 4].")] = None,
    fields: Annotated[str | None, typer.Option(help="Field names of a custom file: id=qid,query=q,reference=gold.")] = None,
    runner: RunnerOpt = "threads",
    dask_address: DaskAddress = None,
    dask_workers: DaskWorkers = 2,
    data_root: DataRoot = None,
) -> None:
    """Answer a file of questions with the HiFi-RAG pipeline and store every stage.

    Runs offline by default (local corpus, offline models); see the README for real backends. Every
    answer records whether the sources answer its question (answered, partial or not_found); with the
    default variant a not_found answer says so and lists the closest sources instead of answering.

    [bold]Example[/bold]: hifirag run ../shared/data/mmu_ragent/t2t_val.jsonl --limit 10 --set url_filter.max_urls=4
    """
    overrides = list(set_ or [])
    if concurrency is not None:
        overrides.append(f"limits.concurrency={concurrency}")
    where = _runner(runner, dask_address, dask_workers)
    try:
        field_map = dict(pair.split("=", 1) for pair in fields.split(",")) if fields else None
    except ValueError:
        _fail(ValueError(f"--fields {fields!r}: expected name=field pairs separated by commas"))
    if variants:
        names = [v.strip() for v in variants.split(",") if v.strip()]
        if run_id:
            _fail(ValueError("--run-id names one run; with --variants each variant gets its own"))
    else:
        names = [variant]
    for summary in _run_flow(questions, variants=names, run_id=run_id, limit=limit, sample=sample,
                             ids=ids.split(",") if ids else None, overrides=overrides, data_root=data_root,
                             fields=field_map, evidence_from=evidence_from, **where):
        _print_summary(summary)


def _run_flow(questions: Path, *, variants: list[str], data_root: Path | None, run_id: str | None = None,
              **kwargs) -> list[dict]:
    """One run per variant (several share one Dask cluster); each planned, so checked, before Prefect starts."""
    root = _setup(data_root)
    from hifirag_core.runs import plan_run

    planned = {k: kwargs.get(k) for k in ("overrides", "limit", "sample", "ids", "fields", "evidence_from")}
    try:  # a bad file or variant fails fast and writes nothing
        for name in variants:
            plan_run(questions, variant=name, run_id=run_id, root=root, **planned)
    except EXPECTED as exc:
        _fail(exc)
    from flows.environment import server_starting

    with server_starting():  # imports, and the corpus on first use, while Prefect's server starts
        from flows.answer import answer_questions, answer_variants, ensure_corpus_for

        try:
            ensure_corpus_for(plan_run(questions, variant=variants[0], run_id=run_id, root=root, **planned),
                              _ConsoleLog())
        except EXPECTED as exc:
            _fail(exc)
    if len(variants) == 1:
        return [_in_prefect(root, answer_questions, questions=str(questions), variant=variants[0], run_id=run_id,
                            data_root=str(root), **kwargs)]
    return _in_prefect(root, answer_variants, questions=str(questions), variants=variants, data_root=str(root),
                       **kwargs)


class _ConsoleLog:
    """A logger's ``info`` that prints to stderr, for the steps a command takes before its flow starts."""

    def info(self, message: str) -> None:
        err.print(message, highlight=False, markup=False)


def _flow(module: str, name: str):
    """A flow, imported while Prefect's temporary server starts; the server is up when it returns."""
    import importlib

    from flows.environment import server_starting

    with server_starting():
        return getattr(importlib.import_module(module), name)


def _in_prefect(root: Path, flow_fn, **params):
    """Call a flow with its stage cache under ``root``, turning expected errors into clear exits."""
    from flows.environment import stage_cache_at

    try:
        with stage_cache_at(root):
            return flow_fn(**params)
    except EXPECTED as exc:
        _fail(exc)
    raise AssertionError("unreachable")


def _print_summary(summary: dict) -> None:
    table = Table(title=f"Run {summary['run_id']}: {summary['status']}", show_header=False)
    for key in ("n_questions", "n_answered", "n_abstained", "n_failed", "wall_seconds", "stage_computations", "cache_hits",
                "llm_calls_paid", "llm_calls_reused", "llm_calls_unbilled", "duckdb_path"):
        if key in summary:
            table.add_row(key.replace("_", " "), str(summary[key]))
    console.print(table)
    for note in summary.get("notes", []):
        console.print(f"note: {note}")


# --- demo --------------------------------------------------------------------------------------


@app.command()
def demo(
    questions: Annotated[int, typer.Option(help="How many FAQ questions (spread over the set).")] = 20,
    data_root: DataRoot = None,
) -> None:
    """The main job, offline: FAQ questions answered from the docs corpus without its FAQ pages.

    Builds the corpus on first use, answers the questions, prints each answer with its cited URLs,
    scores the answers against the gold FAQ answers with ROUGE-L, and shows where the DuckDB file is.

    [bold]Example[/bold]: hifirag demo --questions 20
    """
    faq = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
    if not faq.exists():
        _fail(CorpusError(f"{faq} is missing: the demo needs ../shared/data (or set HIFIRAG_SHARED_DATA)"))
    overrides = [f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}"]
    (summary,) = _run_flow(faq, variants=["final"], limit=None, sample=questions, ids=None, overrides=overrides,
                           data_root=data_root, fields=None, evidence_from=None)
    warehouse = Warehouse(Path(summary["data_root"]))
    _print_answers(warehouse, summary["run_id"])
    _print_summary(summary)
    _print_sql_hints(warehouse, summary["run_id"])


def _print_answers(warehouse: Warehouse, run_id: str, question_ids: list[str] | None = None,
                   detail: bool = False) -> None:
    from hifirag_core.evaluation.export import cited_answers
    from hifirag_core.metrics.bootstrap import bootstrap_ci
    from hifirag_core.metrics.text import rouge_l

    try:
        answers = cited_answers(warehouse, run_id, question_ids)
    except EXPECTED as exc:
        _fail(exc)
    scores = []
    for n, a in enumerate(answers, 1):
        console.rule(f"[bold]{n}. {a.query}[/bold]", align="left", characters="─")
        shown = a.cited_text or a.text
        if shown:
            console.print(textwrap.fill(shown, 100) if "\n" not in shown else shown, highlight=False, markup=False)
        else:
            console.print(f"no answer ({a.status or 'missing'}: {a.error or 'no text'})", style="yellow",
                          highlight=False, markup=False)
        for k, url in enumerate(a.urls, 1):
            console.print(f"  [{k}] {url}", style="cyan", highlight=False, markup=False)
        if detail and a.sentences:
            table = Table("#", "sentence", "cited", "support", "decided by", box=box.SIMPLE_HEAD)
            for i, s in enumerate(a.sentences, 1):
                marks = "".join(f"[{a.urls.index(u) + 1}]" for u in s.urls if u in a.urls) or "-"
                table.add_row(str(i), s.sentence, marks, f"{s.support:.2f}" if s.support is not None else "-",
                              s.method)
            console.print(table)
        if a.answerability:
            score = f" (evidence score {a.answerability_score:.2f})" if a.answerability_score is not None else ""
            console.print(f"  do the sources answer it: {a.answerability}{score}", style="dim", highlight=False,
                          markup=False)
        if a.reference:
            f1 = rouge_l(a.text or "", a.reference)[2]
            scores.append(f1)
            console.print(f"  ROUGE-L F1 vs gold answer: {f1:.3f}", style="dim")
    if len(scores) > 1:
        ci = bootstrap_ci(scores)
        console.rule()
        console.print(f"[bold]ROUGE-L F1[/bold] over {len(scores)} questions: mean {ci.mean:.3f} "
                      f"(95% bootstrap interval {ci.low:.3f}-{ci.high:.3f}); reference point from FACTS.md: an MMR "
                      "extract over a hybrid top 5 scored 0.143 on the full FAQ set.")


@app.command()
def answers(
    run_id: Annotated[str, typer.Argument(help="The run whose answers to show.")],
    question: Annotated[list[str] | None, typer.Option("--question", "-q", help="A question id (repeatable) "
                                                       "\\[default: every question].")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="A table per answer: each sentence with its sources, "
                                         "support score and what decided them.")] = False,
    data_root: DataRoot = None,
) -> None:
    """Show a run's answers as a user reads them: each sentence with the \\[k] of the source cited for it.

    The citations are the citation stage's per-sentence decisions (table answer_sentences), whatever
    the writer; the numbered sources follow each answer, then whether the sources answer the question
    (answered, partial or not_found: an answer that abstains says so, lists the closest sources under
    "See also" and cites nothing), and its ROUGE-L where a reference exists.

    [bold]Example[/bold]: hifirag answers docs_faq-final-1a2b3c4d --question T1 --detail
    """
    _print_answers(Warehouse(resolve_data_root(data_root)), run_id, question, detail)


def _print_sql_hints(warehouse: Warehouse, run_id: str) -> None:
    console.print(f"\nThe warehouse: [bold]{warehouse.duckdb_path}[/bold] (DuckDB views over "
                  f"{warehouse.tables_dir}). Try:")
    console.print(f"""  hifirag sql "SELECT stage, count(*) AS calls, sum(cache_hit::INT) AS reused FROM llm_calls WHERE run_id = '{run_id}' GROUP BY stage"
  hifirag sql "SELECT q.query, d.heading, d.rank, d.score FROM questions q JOIN section_decisions d USING (run_id, question_id) WHERE d.kept AND run_id = '{run_id}' ORDER BY q.question_id, d.source_order, d.rank LIMIT 20\"""",
                  highlight=False)


# --- evaluation --------------------------------------------------------------------------------


@app.command("eval")
def eval_(
    dataset: Annotated[str, typer.Option(help="mmu (MMU-RAGent, first 100 by default), faq-a (FAQ pages left out), "
                                         "faq-b (known-item, everything in) or a JSONL path.")],
    variants: Annotated[str, typer.Option(help="Variants to evaluate, comma-separated (see `hifirag variants`).")] = "final",
    limit: Annotated[int | None, typer.Option(help="Only the first N questions \\[default: 100 for mmu, all otherwise].")] = None,
    sample: Annotated[int | None, typer.Option(help="N questions spread evenly over the file.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated question ids.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Pipeline config override key=value for every "
                                                   "variant (repeatable).")] = None,
    eval_set: Annotated[list[str] | None, typer.Option("--eval-set", help="Evaluation setting key=value (repeatable), "
                                                       "e.g. citation_support_threshold=0.6.")] = None,
    deberta_path: Annotated[Path | None, typer.Option(envvar="HIFIRAG_DEBERTA_PATH", help="Local folder of "
                                                      "microsoft/deberta-xlarge-mnli: BERTScore as the organisers "
                                                      "computed it. Without it, MiniLM BERTScore (its own metric).")] = None,
    baseline: Annotated[str | None, typer.Option(help="Evaluation id to compare with \\[default: the last passing "
                                                 "evaluation of the same dataset fingerprint and variant].")] = None,
    accept: Annotated[bool, typer.Option("--accept", help="Record a regression as accepted: it becomes the baseline "
                                         "and the command exits 0.")] = False,
    fields: Annotated[str | None, typer.Option(help="Field names of a custom file: id=qid,query=q,reference=gold.")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the Markdown and HTML reports "
                                              "\\[default: <data root>/reports/evaluations].")] = None,
    runner: RunnerOpt = "threads",
    dask_address: DaskAddress = None,
    dask_workers: DaskWorkers = 2,
    data_root: DataRoot = None,
) -> None:
    """Evaluate variants: run (or reuse) them, score every question, compare with the last evaluation, report.

    Prints each variant's metrics with 95% bootstrap intervals (ROUGE-L, BERTScore beside its echo
    floor, citation precision and recall, the known-item check on faq-b, length, cost and latency per
    question), the paired difference to the last passing evaluation of the same data and variant, and
    the paths of the Markdown and HTML reports. Exits 1 when a gated metric regressed (its interval
    lies entirely below zero), 2 on bad input.

    [bold]Example[/bold]: hifirag eval --dataset faq-a --variants final,rag_filters --sample 40
    """
    where = _runner(runner, dask_address, dask_workers)
    root = _setup(data_root)
    from hifirag_core.evaluation.config import build_evaluation_config
    from hifirag_core.evaluation.evaluate import plan_evaluation

    names = [v.strip() for v in variants.split(",") if v.strip()]
    try:
        field_map = dict(pair.split("=", 1) for pair in fields.split(",")) if fields else None
    except ValueError:
        _fail(ValueError(f"--fields {fields!r}: expected name=field pairs separated by commas"))
    settings = list(eval_set or []) + ([f"deberta_path={deberta_path}"] if deberta_path else [])
    id_list = [i.strip() for i in ids.split(",") if i.strip()] if ids else None
    try:  # validate everything before Prefect starts
        cfg = build_evaluation_config(settings)
        plan_evaluation(dataset, names, cfg=cfg, root=root, limit=limit, sample=sample, ids=id_list,
                        overrides=set_ or [], fields=field_map, baseline=baseline, accept=accept)
    except EXPECTED as exc:
        _fail(exc)
    if deberta_path and not deberta_path.is_dir():
        err.print(f"note: {deberta_path} is not a folder; scoring with MiniLM BERTScore instead", highlight=False)
    from flows.environment import stage_cache_at

    evaluate = _flow("flows.evaluate", "evaluate")

    params = dict(dataset=dataset, variants=names, limit=limit, sample=sample, ids=id_list, overrides=set_ or [],
                  eval_settings=settings, data_root=str(root), fields=field_map, baseline=baseline, accept=accept,
                  report_dir=str(out) if out else None, **where)
    try:
        with stage_cache_at(root):
            state = evaluate(**params, return_state=True)
    except EXPECTED as exc:
        _fail(exc)
    result = state.result(raise_on_failure=False)
    regressed = getattr(result, "outcome", None)
    if regressed is not None:
        result = regressed
    if not isinstance(result, dict):
        if isinstance(result, EXPECTED):
            _fail(result)
        raise result if isinstance(result, BaseException) else RuntimeError(f"evaluation ended {state.name}")
    from rich.markdown import Markdown

    console.print(Markdown(result["markdown"]))
    console.print(f"\nReport: [bold]{result['html_path']}[/bold] (Markdown: {result['markdown_path']})", highlight=False)
    console.print(f"Scores: hifirag sql \"SELECT * FROM evaluation_summary WHERE evaluation_id = "
                  f"'{result['evaluation_id']}'\"", highlight=False, markup=False)
    if state.is_failed():
        err.print(f"[red]REGRESSED:[/red] {state.message}", highlight=False)
        raise typer.Exit(1)


@app.command("export-mmu")
def export_mmu(
    run_id: Annotated[str, typer.Argument(help="The run whose answers to export.")],
    out: Annotated[Path | None, typer.Option(help="Output JSONL \\[default: <data root>/exports/<run id>.jsonl].")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse (exit 2, no file) when a question has no answer, "
                                         "instead of writing the fixed no-answer sentence.")] = False,
    citations: Annotated[bool, typer.Option("--citations", help="Each response with its per-sentence \\[k] citations "
                                            "and the numbered source URLs (the organisers score plain text).")] = False,
    data_root: DataRoot = None,
) -> None:
    """Write the MMU-RAGent static submission file: {"query_id", "generated_response"} per line.

    Every question of the run appears once, in file order, with a non-empty response. A question
    without an answer gets a fixed sentence saying no answer was found (the format cannot mark an
    answer as missing); the command lists those ids. With --strict it writes nothing instead. With
    --citations each response is the answer as `hifirag answers` shows it: every sentence with the
    \\[k] of the source the citation check found for it, then the sources.

    [bold]Example[/bold]: hifirag export-mmu mmu_ragent-final-1a2b3c4d --out submission.jsonl
    """
    from hifirag_core.evaluation.export import (
        NO_ANSWER_RESPONSE,
        build_submission,
        check_submission,
        write_submission,
    )

    root = resolve_data_root(data_root)
    try:
        submission = build_submission(Warehouse(root), run_id, citations=citations)
    except EXPECTED as exc:
        _fail(exc)
    if submission.no_answer and strict:
        listed = ", ".join(q for q, _ in submission.no_answer[:10])
        _fail(WarehouseError(f"{len(submission.no_answer)} question(s) have no answer ({listed}); nothing written "
                             "(drop --strict to write the fixed no-answer sentence for them)"))
    path = write_submission(submission, out or root / "exports" / f"{run_id}.jsonl")
    problems = check_submission(path, [line["query_id"] for line in submission.lines])
    if problems:  # the writer's own contract; a failure here is a bug
        _fail(WarehouseError(f"{path}: " + "; ".join(problems)))
    console.print(f"Wrote {len(submission.lines)} responses to [bold]{path}[/bold] (run status "
                  f"{submission.run_status}, dataset {submission.dataset}).", highlight=False)
    if submission.dataset and submission.dataset != "mmu_ragent":
        err.print(f"note: run {run_id} answered the {submission.dataset} set, not MMU-RAGent", highlight=False)
    if submission.no_answer:
        console.print(f"[yellow]{len(submission.no_answer)} question(s) had no answer[/yellow] and got the fixed "
                      f"response {NO_ANSWER_RESPONSE!r}:", highlight=False)
        for qid, why in submission.no_answer:
            console.print(f"  {qid}: {why}", highlight=False, markup=False)
    else:
        console.print("Every question has an answer.")


# --- serving -----------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 5010,
    profile: Annotated[str, typer.Option(help="Backends: offline (local corpus, offline models), gemini (Gemini, "
                                         "Google search, direct crawling) or openai (an OpenAI-compatible server).")] = "offline",
    concurrency: Annotated[int | None, typer.Option(help="Questions answered at once; more get 503 with Retry-After "
                                                    "\\[default: limits.concurrency, 4].")] = None,
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`).")] = "final",
    set_: Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable).")] = None,
    deadline: Annotated[float, typer.Option(help="Seconds a request may take before it gets what exists "
                                            "(at most 600, the competition's limit).")] = 570.0,
    heartbeat: Annotated[float, typer.Option(help="Seconds of silence after which a stream repeats its last message.")] = 15.0,
    max_body: Annotated[int, typer.Option(help="Largest request body accepted, in bytes (larger: 413).")] = 65536,
    data_root: DataRoot = None,
) -> None:
    """Serve the pipeline with the MMU-RAGent API: GET /health, POST /evaluate and a streaming POST /run.

    /run streams "data: {json}" messages: the query plan, the URLs kept, the sections kept, then the
    answer, then a last message with complete true, the report and its citations. Every request joins
    the day's service run in the warehouse (stage cache included: a repeated question computes nothing).
    Stops on Ctrl-C or SIGTERM after the questions in flight are answered and recorded.

    [bold]Example[/bold]: hifirag serve --port 5010 --profile offline --concurrency 4
    """
    root = _setup(data_root)
    from pydantic import ValidationError

    from hifirag_core.serving.settings import ServiceSettings

    try:
        settings = ServiceSettings(data_root=root, profile=profile, variant=variant, overrides=tuple(set_ or ()),
                                   concurrency=concurrency, deadline_s=deadline, heartbeat_s=heartbeat,
                                   max_body_bytes=max_body)
    except ValidationError as exc:
        _fail(ConfigError("; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())))
    from flows.service import Service
    from flows.service import serve as run_service

    try:
        service = Service(settings)
    except EXPECTED as exc:
        _fail(exc)
    run_service(service, host, port)


@app.command("evaluate-remote")
def evaluate_remote(
    url: Annotated[str, typer.Argument(help="Base URL of a service speaking the MMU-RAGent contract.")],
    dataset: Annotated[str, typer.Option(help="mmu (first 100 by default), faq-a, faq-b or a JSONL path.")] = "mmu",
    endpoint: Annotated[str, typer.Option(help="evaluate (the static endpoint) or run (the stream, checked "
                                          "against the contract).")] = "evaluate",
    label: Annotated[str | None, typer.Option(help="Name of the service in the evaluation "
                                              "\\[default: remote-<host>-<port>].")] = None,
    parallel: Annotated[int, typer.Option(help="Questions in flight at once (a full service's 503 is retried "
                                          "after its Retry-After).")] = 4,
    timeout: Annotated[float, typer.Option(help="Seconds one question may take (the competition's limit: 600).")] = 600.0,
    limit: Annotated[int | None, typer.Option(help="Only the first N questions \\[default: 100 for mmu].")] = None,
    sample: Annotated[int | None, typer.Option(help="N questions spread evenly over the file.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated question ids.")] = None,
    fields: Annotated[str | None, typer.Option(help="Field names of a custom file: id=qid,query=q,reference=gold.")] = None,
    out: Annotated[Path | None, typer.Option(help="Where to write result.jsonl "
                                             "\\[default: <data root>/reports/remote/<run id>/result.jsonl].")] = None,
    eval_set: Annotated[list[str] | None, typer.Option("--eval-set", help="Evaluation setting key=value (repeatable).")] = None,
    deberta_path: Annotated[Path | None, typer.Option(envvar="HIFIRAG_DEBERTA_PATH", help="Local folder of "
                                                      "microsoft/deberta-xlarge-mnli (else MiniLM BERTScore).")] = None,
    baseline: Annotated[str | None, typer.Option(help="Evaluation id to compare with \\[default: the last passing "
                                                 "evaluation of this label on the same questions].")] = None,
    accept: Annotated[bool, typer.Option("--accept", help="Record a regression as accepted.")] = False,
    data_root: DataRoot = None,
) -> None:
    """Evaluate any service that speaks the MMU-RAGent contract (this one, or another team's) on our questions.

    Sends each question to POST /evaluate (or streams POST /run), writes result.jsonl in the organisers'
    static format ({"query_id", "generated_response"} per line), stores the answers as a run and scores
    them with the same metrics, intervals and regression gate as `hifirag eval`. Exits 1 when a gated
    metric regressed against the last evaluation of the same label, 2 on bad input or an unreachable service.

    [bold]Example[/bold]: hifirag evaluate-remote http://127.0.0.1:5010 --dataset mmu --limit 20
    """
    if endpoint not in ("evaluate", "run"):
        _fail(ValueError(f"--endpoint {endpoint!r}: choose evaluate or run"))
    root = _setup(data_root)
    from hifirag_core.evaluation.config import build_evaluation_config
    from hifirag_core.evaluation.remote import RemoteError
    from hifirag_core.evaluation.remote import evaluate_remote as evaluate_service

    try:
        field_map = dict(pair.split("=", 1) for pair in fields.split(",")) if fields else None
    except ValueError:
        _fail(ValueError(f"--fields {fields!r}: expected name=field pairs separated by commas"))
    settings = list(eval_set or []) + ([f"deberta_path={deberta_path}"] if deberta_path else [])
    done = 0

    def progress(answer) -> None:
        nonlocal done
        done += 1
        state = "answered" if answer.status == "ok" else answer.status
        err.print(f"[{done}] {answer.question_id}: {state} in {answer.seconds:.1f}s", highlight=False, markup=False,
                  soft_wrap=True)

    try:
        result = evaluate_service(url, dataset, cfg=build_evaluation_config(settings), root=root, endpoint=endpoint,
                                  label=label, parallel=parallel, timeout_s=timeout, limit=limit, sample=sample,
                                  ids=[i.strip() for i in ids.split(",") if i.strip()] if ids else None,
                                  fields=field_map, out=out, baseline=baseline, accept=accept, progress=progress)
    except (*EXPECTED, RemoteError) as exc:
        _fail(exc)
    from rich.markdown import Markdown

    console.print(Markdown(result["markdown"]))
    console.print(f"\nresult.jsonl: [bold]{result['result_path']}[/bold]\nReport: {result['html_path']}\n"
                  f"Answers: run {result['run_id']} (hifirag sql \"SELECT * FROM answers WHERE run_id = "
                  f"'{result['run_id']}'\")", highlight=False)
    for qid, why in result["not_answered"].items():
        console.print(f"  not answered {qid}: {why}", highlight=False, markup=False)
    for qid, problems in list(result["contract_problems"].items())[:10]:
        console.print(f"  contract {qid}: {'; '.join(problems[:3])}", highlight=False, markup=False)
    if result["regressed"]:
        err.print(f"[red]REGRESSED:[/red] {', '.join(m for ms in result['regressed'].values() for m in ms)}",
                  highlight=False)
        raise typer.Exit(1)


# --- warehouse ---------------------------------------------------------------------------------


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A DuckDB SQL query over the stage views.")],
    format_: Annotated[str, typer.Option("--format", help="table, csv, json or markdown.")] = "table",
    max_width: Annotated[int, typer.Option(help="Truncate cells to this many characters in a table (0: no limit).")] = 80,
    data_root: DataRoot = None,
) -> None:
    """Run SQL over the warehouse views (runs, questions, search_results, ..., llm_calls, scores).

    [bold]Example[/bold]: hifirag sql "SELECT run_id, count(*) FROM answers GROUP BY run_id"
    """
    try:
        result = Warehouse(resolve_data_root(data_root)).query(query)
    except WarehouseError as exc:
        _fail(exc)
    _print_result(result.columns, result.rows, format_, max_width)


def _cell(value, max_width: int) -> str:
    text = "" if value is None else str(value)
    return text if not max_width or len(text) <= max_width else text[: max_width - 1] + "…"


def _print_result(columns: list[str], rows: list[tuple], format_: str, max_width: int = 80) -> None:
    if format_ == "json":
        console.print_json(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=str))
    elif format_ == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif format_ == "markdown":
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for r in rows:
            print("| " + " | ".join(_cell(v, max_width).replace("|", "\\|") for v in r) + " |")
    elif format_ == "table":
        table = Table(show_lines=False, box=box.SIMPLE_HEAD)
        for name in columns:  # never squeeze a header below its own width
            table.add_column(name, min_width=min(len(name), 24), overflow="ellipsis", no_wrap=True)
        for r in rows:
            table.add_row(*(_cell(v, max_width) for v in r))
        console.print(table)
        console.print(f"{len(rows)} row(s)", style="dim")
    else:
        _fail(ValueError(f"unknown format {format_!r}: use table, csv, json or markdown"))


@app.command()
def runs(data_root: DataRoot = None) -> None:
    """List runs with their status, variant, config and counts, newest first.

    [bold]Example[/bold]: hifirag runs
    """
    result = Warehouse(resolve_data_root(data_root)).query(
        """SELECT run_id, status, variant, coalesce(parent_run_id, '') AS parent, config_hash AS config,
                  n_questions AS questions, n_answered AS answered, cache_hits AS reused,
                  llm_calls_paid AS paid_calls, round(wall_seconds, 1) AS seconds,
                  strftime(started_at, '%m-%d %H:%M') AS started
           FROM runs ORDER BY started_at DESC"""
    )
    if not result.rows:
        console.print("No runs yet: try `hifirag demo`.")
        return
    _print_result(result.columns, result.rows, "table")


@app.command()
def variants() -> None:
    """List the named configurations and what each changes, then the settings that depart from the paper.

    [bold]Example[/bold]: hifirag variants
    """
    from hifirag_core.variants import DEPARTURES, VARIANTS

    table = Table("variant", "overrides")
    for name, overrides in VARIANTS.items():
        table.add_row(name, json.dumps(overrides) if overrides else "(the defaults)")
    console.print(table)
    departures = Table("setting", "where it departs from the paper", "why", title="Departures from the paper")
    for setting, where, why in DEPARTURES:
        departures.add_row(setting, where, why)
    console.print(departures, markup=False)


@app.command()
def prepare() -> None:
    """Everything a first run would otherwise pay for, done now (`make setup` runs it): MiniLM's ONNX
    export (as prepare-models) and Prefect's database under PREFECT_HOME (the project's .prefect).

    A temporary Prefect server creates and migrates its database the first time it starts (about 9 s
    on two cores); this starts one and stops it, so the first `hifirag demo` does not wait for that.

    [bold]Example[/bold]: hifirag prepare
    """
    prepare_models()
    from flows.environment import configure, make_server_database

    configure(resolve_data_root(None))
    started = time.perf_counter()
    home = make_server_database()
    if home is None:
        console.print("Prefect: the server PREFECT_API_URL names keeps its own database", highlight=False)
        return
    console.print(f"Prefect's database is ready under {home} ({time.perf_counter() - started:.1f} s)",
                  highlight=False)


@app.command("prepare-models")
def prepare_models() -> None:
    """Make the ONNX export of MiniLM now (once per machine; `make setup` does it), so no run pays for it.

    Runs that embed use ONNX Runtime on this export; without it they make it on first use (about 5 s),
    or use sentence-transformers where ONNX Runtime is missing. The export goes to the model cache
    (HIFIRAG_MODEL_CACHE, default ~/.cache/hifirag/models); on a cluster, run this on every machine.

    [bold]Example[/bold]: hifirag prepare-models
    """
    from hifirag_core.embeddings import Embedder

    embedder = Embedder(None)
    started = time.perf_counter()
    try:
        runtime = embedder.prepare()
    except EXPECTED as exc:
        _fail(exc)
    console.print(f"MiniLM ({embedder.model_path}) runs on {runtime} "
                  f"(ready in {time.perf_counter() - started:.1f} s)", highlight=False)


@app.command()
def doctor(
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`).")] = "final",
    set_: Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable), as "
                                                   "for `hifirag run`.")] = None,
    reddit_url: Annotated[str | None, typer.Option(help="The Reddit thread the praw check reads "
                                                   "\\[default: a long-archived AMA].")] = None,
    http_url: Annotated[str | None, typer.Option(help="The page the direct-HTTP check fetches "
                                                 "\\[default: https://example.com/].")] = None,
    data_root: DataRoot = None,
) -> None:
    """Check every backend the configuration selects with one cheap call: what works, what is missing, what it costs.

    A model gets the paper's query-plan prompt with the structured-output schema every filter call
    sends, so a server that refuses the response format shows up here. Keys are named, never printed.
    Exits 1 when a check failed or something is missing.

    [bold]Example[/bold]: hifirag doctor --set backends.filter_llm=openai --set models.openai_base_url=http://127.0.0.1:8080/v1
    """
    from hifirag_core.config import build_config
    from hifirag_core.doctor import HTTP_PROBE_URL, REDDIT_PROBE_URL, check_backends
    from hifirag_core.secrets import install_log_redaction
    from hifirag_core.variants import variant_overrides

    install_log_redaction()
    try:
        cfg = build_config(variant_overrides(variant), parse_overrides(list(set_ or [])), variant=variant)
    except EXPECTED as exc:
        _fail(exc)
    checks = check_backends(cfg, resolve_data_root(data_root), reddit_url=reddit_url or REDDIT_PROBE_URL,
                            http_url=http_url or HTTP_PROBE_URL)
    table = Table("role", "backend", "status", "what works, or what is missing", "cost", box=box.SIMPLE_HEAD)
    colour = {"ok": "green", "missing": "yellow", "failed": "red"}
    for c in checks:
        table.add_row(c.role, c.backend, f"[{colour[c.status]}]{c.status}[/]", escape(c.detail), escape(c.cost))
    console.print(table)
    if any(c.status != "ok" for c in checks):
        raise typer.Exit(1)


@app.command()
def reprocess(
    run_id: Annotated[str, typer.Argument(help="The run to derive from.")],
    from_stage: Annotated[str, typer.Option("--from", help=f"First stage to recompute: {', '.join(STAGE_NAMES)}.")],
    questions: Annotated[str | None, typer.Option(help="Comma-separated question ids \\[default: all].")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable).")] = None,
    new_run_id: Annotated[str | None, typer.Option(help="Id of the new run \\[default: derived].")] = None,
    runner: RunnerOpt = "threads",
    dask_address: DaskAddress = None,
    dask_workers: DaskWorkers = 2,
    data_root: DataRoot = None,
) -> None:
    """Derive a new run from RUN_ID, recomputing from one stage on and reusing everything before it.

    The questions not chosen keep all of the parent's rows, so the new run is complete in every view;
    `hifirag runs` shows its parent.

    [bold]Example[/bold]: hifirag reprocess docs_faq-final-1a2b3c4d --from section_rank --set prompts.dir=./my-prompts
    """
    if from_stage not in STAGE_NAMES:
        _fail(ValueError(f"--from {from_stage!r}: choose one of {', '.join(STAGE_NAMES)}"))
    where = _runner(runner, dask_address, dask_workers)
    root = _setup(data_root)
    from hifirag_core.runs import plan_reprocess

    ids = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
    try:
        plan_reprocess(run_id, from_stage=from_stage, question_ids=ids, overrides=set_ or (), run_id=new_run_id,
                       root=root)
    except EXPECTED as exc:
        _fail(exc)
    reprocess_flow = _flow("flows.reprocess", "reprocess")

    summary = _in_prefect(root, reprocess_flow, run_id=run_id, from_stage=from_stage, questions=ids,
                          overrides=set_ or [], new_run_id=new_run_id, data_root=str(root), **where)
    _print_summary(summary)


@app.command()
def funnel(
    run_ids: Annotated[list[str], typer.Argument(help="One or more runs (for example one per variant).")],
    data_root: DataRoot = None,
) -> None:
    """Where the gold evidence is lost, stage by stage, for questions whose answer has a known place.

    For the FAQ set: was the gold page in the search results, kept by the URL filter, fetched, its
    section parsed and kept by section ranking, and the page cited in the answer.

    [bold]Example[/bold]: hifirag funnel docs_faq-final-1a2b3c4d docs_faq-rag-5e6f7a8b
    """
    warehouse = Warehouse(resolve_data_root(data_root))
    marks = ",".join("?" * len(run_ids))
    try:
        result = warehouse.query(f"SELECT * FROM evidence_funnel_summary WHERE run_id IN ({marks})", run_ids)
    except WarehouseError as exc:
        _fail(exc)
    if not result.rows:
        _fail(WarehouseError("none of these runs has questions with a known gold page (the FAQ set has them)"))
    steps = result.columns[3:]
    table = Table("step", *[f"{r[0]}\n({r[1]}, {r[2]} q)" for r in result.rows], box=box.SIMPLE_HEAD)
    for i, step in enumerate(steps, 3):
        table.add_row(step.replace("_", " "), *[f"{r[i]:.1%}" for r in result.rows])
    console.print(table)


@app.command()
def credibility(
    queries: Annotated[int, typer.Option(help="Queries drawn from MedQuAD's questions (half tune, half report).")] = 600,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Experiment setting key=value (repeatable), "
                                                   "e.g. strengths=\\[0,0.5,1] or correlations=\\[0,0.5,1].")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for the Markdown summary and the plot "
                                             "\\[default: <data root>/reports/credibility].")] = None,
    data_root: DataRoot = None,
) -> None:
    """When does the source prior help retrieval? Sweep its strength against how well source predicts truth.

    MedQuAD answers rendered as seven kinds of page, some corrupted (changed dose, negated claim,
    wrong date) at rates that follow source type from not at all to totally. Similarity x
    prior ** lambda, with smoothing and with weights learned from simulated feedback: P@5 and
    nDCG@10 of relevant-and-correct documents, the adversarial hit rate and topical P@5, with
    bootstrap intervals; the default lambda is chosen on the tune half of the queries. Writes a
    Markdown summary and a plot, and every table to the warehouse. The first run embeds about
    5,500 texts (minutes on two cores); the vectors are cached, so later runs take about a minute.

    [bold]Example[/bold]: hifirag credibility --queries 600 --set 'strengths=\\[0,0.25,0.5,1]'
    """
    root = _setup(data_root)
    settings = [f"n_queries={queries}", *(set_ or [])]
    from hifirag_core.credibility.experiment import CredibilityExperimentConfig

    try:
        config = CredibilityExperimentConfig.model_validate(parse_overrides(settings))
    except (ConfigError, ValueError) as exc:
        _fail(ValueError(f"invalid experiment setting: {exc}"))
    if not config.medquad_path().exists():
        _fail(CorpusError(f"{config.medquad_path()} is missing: the experiment reads MedQuAD from the shared data"))
    credibility_experiment = _flow("flows.credibility", "credibility_experiment")

    result = _in_prefect(root, credibility_experiment, settings=settings, data_root=str(root),
                         out_dir=str(out) if out else None)
    console.print(Path(result["summary"]).read_text(encoding="utf-8"), highlight=False, markup=False)
    console.print(f"\nDefault strength (tune half): lambda = {result['default_strength']:g}\nPlot: {result['plot']}\n"
                  f"Tables: run {result['run_id']} (credibility_summary, credibility_query_results, "
                  "credibility_rates, credibility_corpus, credibility_weights)", highlight=False, markup=False)


@app.command()
def sections(
    url: Annotated[str, typer.Argument(help="A page URL (or a Reddit thread URL) to parse.")],
    live: Annotated[bool, typer.Option("--live", help="Fetch the page over HTTP if no run or corpus has it.")] = False,
    name: Annotated[str, typer.Option(help="Corpus to look in.")] = "docs",
    data_root: DataRoot = None,
) -> None:
    """Show how a page is parsed into sections: its heading tree with anchors, sizes and previews.

    The page comes from the local corpus, else from the pages a run fetched, else (with --live)
    from the web.

    [bold]Example[/bold]: hifirag sections https://docs.python.org/3.11/faq/design.html
    """
    from hifirag_core.blobs import BlobStore
    from hifirag_core.corpus.store import normalize_url
    from hifirag_core.runtime import corpus_at
    from hifirag_core.sectioning import format_section_tree, parse_sections

    root = resolve_data_root(data_root)
    blobs = BlobStore(root / "blobs")
    corpus = corpus_at(root, name)
    page = corpus.page(url) if corpus.exists() else None
    body: bytes | None = blobs.get(page.sha256) if page else None
    if body is None:
        rows = Warehouse(root).query(
            "SELECT content_sha256 FROM pages WHERE url = ? AND status = 'ok' ORDER BY fetched_at DESC LIMIT 1",
            [normalize_url(url)]).rows
        body = blobs.get(rows[0][0]) if rows and rows[0][0] in blobs else None
    if body is None and live:
        from hifirag_core.backends.factory import build_fetcher
        from hifirag_core.config import build_config

        result = build_fetcher(build_config(overrides={"backends": {"fetch": "http"}})).fetch(url)
        if result.status != "ok" or result.body is None:
            _fail(CorpusError(f"could not fetch {url}: {result.status} {result.error or ''}"))
        body = result.body
    if body is None:
        _fail(CorpusError(f"{url} is in neither the corpus nor any run's pages; pass --live to fetch it"))
    console.print(format_section_tree(parse_sections(body, url)), highlight=False, markup=False)


# --- corpus ------------------------------------------------------------------------------------


@corpus_app.command("build")
def corpus_build(
    folder: Annotated[Path | None, typer.Option(help="A folder of HTML pages instead of the documentation tarballs.")] = None,
    base_url: Annotated[str | None, typer.Option(help="The URL the folder's pages live under (with --folder): "
                                                 "dir/page.html becomes BASE/dir/page.html, dir/index.html BASE/dir/.")] = None,
    manifest: Annotated[Path | None, typer.Option(help="With --folder: a JSONL file of the pages to take, one "
                                                  '{"path", "url", "title"?} per line (path relative to the '
                                                  "folder), for crawls and mirrors whose paths are not their URLs.")] = None,
    tarballs: Annotated[Path | None, typer.Option(help="A folder of *.html.tar.xz \\[default: ../shared/data/docs_html].")] = None,
    name: Annotated[str, typer.Option(help="Corpus name (selected with --set corpus.name=...).")] = "docs",
    data_root: DataRoot = None,
) -> None:
    """Build (or rebuild) the local corpus: page bytes, text and a BM25 index.

    Without options it reads the five documentation tarballs of ../shared/data/docs_html, or, when
    that folder is absent, fetches the same Debian packages with apt-get. With --folder, every *.html
    file gets --base-url plus its path (dir/index.html becomes dir/); with --folder and --manifest, the
    manifest says each page's URL (and optionally its title) instead.

    [bold]Example[/bold]: hifirag corpus build --folder ./mirror --manifest ./mirror/pages.jsonl --name mysite
    """
    from rich.progress import Progress

    from hifirag_core.corpus.build import build_default, build_from_folder, build_from_tarballs
    from hifirag_core.runtime import corpus_at

    if folder is not None and not base_url and manifest is None:
        _fail(ValueError("--folder needs --base-url (the URL its pages are published under) or --manifest "
                         "(each page's URL)"))
    if manifest is not None and folder is None:
        _fail(ValueError("--manifest lists pages of a folder: pass --folder too"))
    target = corpus_at(resolve_data_root(data_root), name)
    try:
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("parsing pages", total=None)

            def tick(n: int) -> None:
                progress.update(bar, completed=n, description=f"parsing pages ({n})")

            if folder is not None:
                built = build_from_folder(target.root, target.blobs, folder, base_url, tick, manifest=manifest)
            elif tarballs is not None:
                built = build_from_tarballs(target.root, target.blobs, tarballs, tick)
            else:
                built = build_default(target.root, target.blobs, tick, log=lambda m: err.print(m))
    except (CorpusError, OSError, ValueError) as exc:
        _fail(exc)
    manifest = built.manifest()
    console.print(f"Built corpus {name!r}: {manifest['pages']} pages from {', '.join(manifest['sites'])} "
                  f"in {built.root}")


@corpus_app.command("search")
def corpus_search(
    query: Annotated[str, typer.Argument(help="What to search for.")],
    num: Annotated[int, typer.Option(help="How many results.")] = 10,
    exclude: Annotated[list[str] | None, typer.Option(help="URL glob to leave out (repeatable).")] = None,
    name: Annotated[str, typer.Option(help="Corpus name.")] = "docs",
    data_root: DataRoot = None,
) -> None:
    """Search the local corpus the way the pipeline's search stage does.

    [bold]Example[/bold]: hifirag corpus search "vacuum full lock" --num 5
    """
    from hifirag_core.runtime import open_corpus

    try:
        hits = open_corpus(resolve_data_root(data_root), name).index(tuple(exclude or ())).search(query, num)
    except CorpusError as exc:
        _fail(exc)
    for rank, hit in enumerate(hits, 1):
        console.print(f"[bold]{rank}. {hit.title}[/bold]\n   [cyan]{hit.url}[/cyan]\n   {hit.snippet}", highlight=False)


# --- test sets ---------------------------------------------------------------------------------


@testset_app.command("fresh")
def testset_fresh(
    after: Annotated[str, typer.Option(help="Cutoff day, YYYY-MM-DD: every pair rests on a source published after it.")],
    n: Annotated[int, typer.Option("--n", help="How many pairs to keep.")],
    out: Annotated[Path, typer.Option(help="The JSONL to write (MMU-RAGent: query, reference, iid); the provenance "
                                      "goes beside it as NAME.provenance.json.")],
    style: Annotated[str, typer.Option(help="Examples to imitate: mmu:N (MMU-RAGent validation, never its first 100 "
                                       "lines) or FILE.jsonl:N.")] = "mmu:10",
    seed: Annotated[int, typer.Option(help="Chooses the examples and seeds every generator call.")] = 0,
    source: Annotated[str, typer.Option(help="gemini (Google Search grounding, needs GEMINI_API_KEY), offline (the "
                                        "labelled stand-in over the local corpus) or auto (gemini when the key "
                                        "is set).")] = "auto",
    model: Annotated[str | None, typer.Option(help="Generating model, also asked without search for the baseline "
                                              "check \\[default: models.writer].")] = None,
    testset_set: Annotated[list[str] | None, typer.Option("--testset-set", help="Builder setting key=value "
                                                          "(repeatable), e.g. near_duplicate_threshold=0.9.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Pipeline config override key=value (repeatable).")] = None,
    data_root: DataRoot = None,
) -> None:
    """Build a fresh-knowledge test set: question-answer pairs about what was published after a day.

    With a Gemini key, prompt A.6 goes to Gemini with Google Search grounding; each pair keeps the
    sources that grounded it, fetched and dated. A pair is dropped, with its reason, when no source is
    dated after the cutoff, when it nearly duplicates another pair, or when the same model answers it
    without search. Without a key, a clearly labelled offline stand-in draws pairs from the local
    corpus's pages dated after the cutoff. Prints how many pairs each check dropped.

    [bold]Example[/bold]: hifirag testset fresh --after 2025-02-01 --n 100 --style mmu:10 --out fresh-2025.jsonl
    """
    root = _setup(data_root)
    from hifirag_core.testset.plan import plan_fresh_set

    settings = list(testset_set or []) + ([f"model={model}"] if model else [])
    values = {"after": after, "n": n, "style": style, "seed": seed, "source": source}
    try:  # validate before Prefect starts
        plan = plan_fresh_set(values, out=out, data_root=root, settings=settings, overrides=set_ or [])
    except (*EXPECTED, ValueError) as exc:
        _fail(exc)
    if plan.source == "offline":
        err.print("[yellow]No Gemini key (GEMINI_API_KEY): building the OFFLINE STAND-IN from the local corpus, "
                  "not fresh knowledge.[/yellow]", highlight=False)
    build_fresh_testset = _flow("flows.testset", "build_fresh_testset")

    result = _in_prefect(root, build_fresh_testset, **values, out=str(out), settings=settings,
                         overrides=set_ or [], data_root=str(root))
    from rich.markdown import Markdown

    console.print(Markdown(result["markdown"]))
    console.print(f"Pairs: [bold]{result['out']}[/bold]\nProvenance: {result['provenance']}\n"
                  f"Evaluate it: hifirag eval --dataset {result['out']} --variants "
                  "baseline_q,baseline_prompt,rag,rag_url_filter,rag_filters,final", highlight=False)
    if result["status"] != "complete":
        err.print(f"[yellow]note:[/yellow] {result['counts']['kept']} of {n} pairs kept before the generator "
                  "ran out; raise --testset-set max_calls=... or lower --n", highlight=False)


def _reflow_help(*apps: typer.Typer) -> None:
    """Help from docstrings, each paragraph one line: Rich wraps it to the terminal instead of keeping
    the source's line breaks."""
    for sub in apps:
        for info in sub.registered_commands:
            doc = inspect.getdoc(info.callback) if info.callback else None
            if info.help is None and doc:
                info.help = "\n\n".join(" ".join(par.split()) for par in doc.split("\n\n"))


_reflow_help(app, corpus_app, testset_app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
