"""``hifirag run``, ``demo``, ``answers`` and ``reprocess``: answering questions and reading the answers.

A run is planned here, once: the plan checks the input before Prefect's server starts (a bad file
fails in a fraction of a second and writes nothing), and the same plan object goes to the flow.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from flows.cli.common import (
    EXPECTED,
    AfterOpt,
    BeforeOpt,
    ConfigOpt,
    ConsoleLog,
    DaskAddress,
    DaskWorkers,
    DataRoot,
    ExcludeSitesOpt,
    Fields,
    LanguageOpt,
    LengthOpt,
    ProfileOpt,
    RunnerOpt,
    SetOpt,
    SitesOpt,
    console,
    fail,
    field_map,
    id_list,
    in_prefect,
    print_summary,
    report_skipped,
    runner_params,
    setup,
    steer_overrides,
)
from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS
from hifirag_core.corpus.store import CorpusError
from hifirag_core.pipeline.specs import STAGE_NAMES
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.resources import shared_data_dir
from hifirag_core.store.warehouse import Warehouse


def run(
    questions: Annotated[Path, typer.Argument(help="JSONL questions: MMU-RAGent (query, iid, reference) or FAQ format.")],
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`); the default answers "
                                         "like the paper's final system, searches again for what its first sources "
                                         "miss, and shows whether the sources answer the question (it does not "
                                         "abstain until a judgment holds on corpora it was not fitted on; "
                                         "final_deep abstains; final reproduces the paper's row).")] = DEFAULT_RUN_VARIANT,
    variants: Annotated[str | None, typer.Option(help="Several variants, comma-separated: one run each, "
                                                  "sharing every stage they have in common.")] = None,
    evidence_from: Annotated[str | None, typer.Option(help="Reuse this run's query plans, search results and "
                                                       "pages, so the evidence is identical.")] = None,
    run_id: Annotated[str | None, typer.Option(help="Run id \\[default: derived from questions + config, so a rerun resumes].")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N questions.")] = None,
    sample: Annotated[int | None, typer.Option(help="N questions spread evenly over the file.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated question ids.")] = None,
    set_: SetOpt = None,
    profile: ProfileOpt = None,
    config: ConfigOpt = None,
    sites: SitesOpt = None,
    exclude_sites: ExcludeSitesOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    language: LanguageOpt = None,
    length: LengthOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="Questions in flight at once \\[default: 4].")] = None,
    fields: Fields = None,
    runner: RunnerOpt = "threads",
    dask_address: DaskAddress = None,
    dask_workers: DaskWorkers = 2,
    data_root: DataRoot = None,
) -> None:
    """Answer a file of questions with the HiFi-RAG pipeline and store every stage.

    Runs offline by default (local corpus, offline models); --profile names other backends in one word
    (docs/user-guide.md, "Steering" and "Profiles"). --sites, --exclude-sites, --after, --before,
    --language and --length steer every question; a question's own fields of the same names win.
    Every answer records whether the sources answer its question (answered, partial or not_found);
    the default variant answers and shows that decision beside the answer (--variant final_deep says
    instead that the sources do not answer and lists the closest ones).

    [bold]Example[/bold]: hifirag run ../shared/data/mmu_ragent/t2t_val.jsonl --limit 10 --profile gemini --after 2024-01-01 --length short
    """
    overrides = [*steer_overrides(sites, exclude_sites, after, before, language, length), *(set_ or [])]
    if concurrency is not None:
        overrides.append(f"limits.concurrency={concurrency}")
    where = runner_params(runner, dask_address, dask_workers)
    if variants:
        names = [v.strip() for v in variants.split(",") if v.strip()]
        if run_id:
            fail(ValueError("--run-id names one run; with --variants each variant gets its own"))
    else:
        names = [variant]
    for summary in run_questions(questions, variants=names, run_id=run_id, limit=limit, sample=sample,
                                 ids=id_list(ids), overrides=overrides, data_root=data_root, fields=field_map(fields),
                                 evidence_from=evidence_from, where=where, profile=profile,
                                 config_file=str(config) if config else None):
        print_summary(summary)


def run_questions(questions: Path, *, variants: list[str], data_root: Path | None, where: dict | None = None,
                  **planned) -> list[dict]:
    """One run per variant, each planned (and so checked) before Prefect starts, then answered by the flow."""
    root = setup(data_root)
    from hifirag_core.pipeline.plan import plan_run
    from hifirag_core.store.disk import ensure_free

    try:  # a bad file or variant, or a disk below its floor, fails fast and writes nothing
        plans = [plan_run(questions, variant=name, root=root, **planned) for name in variants]
        for plan in plans:
            ensure_free(root, plan.cfg.limits.min_free_mb)
    except EXPECTED as exc:
        fail(exc)
    return answer_plans(root, plans, where or {})


def answer_plans(root: Path, plans: list, where: dict) -> list[dict]:
    """Build the corpus (on first use) and import the flow while Prefect's server starts, then answer."""
    from flows.environment import server_starting

    with server_starting():
        from flows.answer import answer_runs
        from hifirag_core.corpus.build import ensure_corpus

        try:
            for name in dict.fromkeys(p.cfg.corpus.name for p in plans):
                cfg = next(p.cfg for p in plans if p.cfg.corpus.name == name)
                ensure_corpus(cfg, root, ConsoleLog().info)
        except EXPECTED as exc:
            fail(exc)
    return in_prefect(root, answer_runs, plans=plans, **where)


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
        fail(CorpusError(f"{faq} is missing: the demo needs ../shared/data (or set HIFIRAG_SHARED_DATA)"))
    overrides = [f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}"]
    (summary,) = run_questions(faq, variants=["final"], sample=questions, overrides=overrides, data_root=data_root)
    warehouse = Warehouse(Path(summary["data_root"]))
    print_answers(warehouse, summary["run_id"])
    print_summary(summary)
    print_sql_hints(warehouse, summary["run_id"])


def print_answers(warehouse: Warehouse, run_id: str, question_ids: list[str] | None = None,
                  detail: bool = False, turns: bool = True) -> None:
    """Each answer with its citations and sources (``turns``: and, for a follow-up turn, its thread)."""
    from hifirag_core.evaluation.export import cited_answers
    from hifirag_core.metrics.bootstrap import bootstrap_ci
    from hifirag_core.metrics.text_metrics import rouge_l
    from hifirag_core.store.queries import turn_places

    try:
        answers = cited_answers(warehouse, run_id, question_ids)
        places = turn_places(warehouse, run_id) if turns else {}
    except EXPECTED as exc:
        fail(exc)
    scores = []
    # an answer whose row was in a damaged file is not shown as missing, nor scored (the file is named at the end)
    unread = any(d.table == "answers" and d.run_id == run_id for d in warehouse.skipped.values())
    n_unread = 0
    for n, a in enumerate(answers, 1):
        console.rule(f"[bold]{n}. {a.query}[/bold]", align="left", characters="─")
        if a.question_id in places:
            thread, turn, follows = places[a.question_id]
            after = f", following {follows}" if follows else ""
            console.print(f"  turn {turn} of thread {thread}{after} (--thread shows every turn)", style="dim",
                          highlight=False, markup=False)
        shown = a.cited_text or a.text
        if shown:
            console.print(textwrap.fill(shown, 100) if "\n" not in shown else shown, highlight=False, markup=False)
        elif unread and a.status is None:
            console.print("answer not readable: its row is in a damaged file (named below)", style="yellow")
            n_unread += 1
            continue
        else:
            console.print(f"no answer ({a.status or 'missing'}: {a.error or 'no text'})", style="yellow",
                          highlight=False, markup=False)
        for k, url in enumerate(a.urls, 1):
            console.print(f"  [{k}] {url}", style="cyan", highlight=False, markup=False)
        if detail and a.sentences:
            print_ledger(warehouse, run_id, a.question_id)
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
                      f"(95% bootstrap interval {ci.low:.3f}-{ci.high:.3f}); reference point (measured 2026-11-29): an MMR "
                      "extract over a hybrid top 5 scored 0.143 on the full FAQ set.")
    if n_unread:
        console.print(f"{n_unread} answer(s) not readable, not scored: the run's answers are incomplete",
                      style="yellow")


def print_ledger(warehouse: Warehouse, run_id: str, question_id: str) -> None:
    """The answer's citation ledger: each sentence, the section and source sentence supporting it, the
    support and what decided it, and the stored page snapshot (``citation_ledger``)."""
    from hifirag_core.store.queries import citation_ledger

    ledger = citation_ledger(warehouse, run_id, question_id)
    table = Table("#", "sentence", "cited", "section", "supporting source sentence", "support", "by",
                  "snapshot (sha256, fetched)", box=box.SIMPLE_HEAD)
    for row in ledger.rows:
        r = dict(zip(ledger.columns, row, strict=True))
        first = r["source_rank"] in (None, 1)
        snapshot = (f"{r['content_sha256'][:12]} {r['fetched_at']:%Y-%m-%d %H:%M}\n{r['final_url']}"
                    if r["content_sha256"] else "-")
        table.add_row(str(r["sentence_index"] + 1) if first else "", r["sentence"] if first else "",
                      f"[{r['marker']}]" if r["marker"] else "-", " > ".join(r["heading_path"] or []) or "-",
                      r["supporting_sentence"] or "-", f"{r['support']:.2f}" if r["support"] is not None else "-",
                      f"{r['support_method']}\n{r['decided_by']}" if r["support_method"] else "-", snapshot)
    console.print(table)


def answers(
    run_id: Annotated[str, typer.Argument(help="The run whose answers to show.")],
    question: Annotated[list[str] | None, typer.Option("--question", "-q", help="A question id (repeatable) "
                                                       "\\[default: every question].")] = None,
    detail: Annotated[bool, typer.Option("--detail", help="A table per answer, the citation ledger: each sentence "
                                         "with the section and source sentence supporting it, the support score, "
                                         "what decided it and the stored page snapshot.")] = False,
    thread: Annotated[bool, typer.Option("--thread", help="For a question that is a turn of a thread (a follow-up, "
                                         "or an answer followed up): every turn of its thread in order, each as "
                                         "read and answered, whichever run holds it.")] = False,
    data_root: DataRoot = None,
) -> None:
    """Show a run's answers as a user reads them: each sentence with the \\[k] of the source cited for it.

    The citations are the citation stage's per-sentence decisions (table answer_sentences), whatever
    the writer; the numbered sources follow each answer, then whether the sources answer the question
    (answered, partial or not_found: an answer that abstains says so, lists the closest sources under
    "See also" and cites nothing), and its ROUGE-L where a reference exists. A follow-up turn says which
    thread it is a turn of; with --thread, each chosen question's whole thread is shown instead (view
    thread_turns).

    [bold]Example[/bold]: hifirag answers docs_faq-final-1a2b3c4d --question T1 --detail
    """
    warehouse = Warehouse(resolve_data_root(data_root))
    if thread:
        print_threads(warehouse, run_id, question, detail)
    else:
        print_answers(warehouse, run_id, question, detail)
    report_skipped(warehouse, run_id)


def print_threads(warehouse: Warehouse, run_id: str, question_ids: list[str] | None, detail: bool) -> None:
    """Each chosen question's thread (every question of the run that is a turn of one, by default): its turns in
    order, each with the question as asked and as read, then its answer as ``hifirag answers`` prints it."""
    from hifirag_core.evaluation.export import cited_answers
    from hifirag_core.store.queries import thread_of, turn_places

    try:
        cited_answers(warehouse, run_id, question_ids)  # an unknown run or question fails here, naming it
        places = turn_places(warehouse, run_id)
    except EXPECTED as exc:
        fail(exc)
    chosen = question_ids or list(places)
    if not any(qid in places for qid in chosen):
        console.print(f"No question of {'these' if question_ids else 'run ' + run_id} is a turn of a thread "
                      "(a thread starts when a question follows an answer).", highlight=False, markup=False)
        return
    shown: set[str] = set()
    for qid in chosen:
        if qid not in places or places[qid][0] in shown:
            continue
        shown.add(places[qid][0])
        turns = thread_of(warehouse, run_id, qid)
        rows = [dict(zip(turns.columns, row, strict=True)) for row in turns.rows]
        console.rule(f"[bold]Thread {rows[0]['thread_id']}: {len(rows)} turns[/bold]", characters="═")
        for t in rows:
            console.print(f"turn {t['turn']}: {t['answer_id']}" + (f", following {t['follows']}" if t["follows"] else ""),
                          style="bold", highlight=False, markup=False)
            if t["read_as"] != t["question"]:
                console.print(f"  asked: {t['question']}\n  read as: {t['read_as']}", highlight=False, markup=False)
            if t["follows"]:
                console.print(f"  the turn before kept {t['earlier_sections']} section(s) of {t['earlier_pages']} page(s); "
                              f"{t['carried_sections']} section(s) of {t['carried_pages']} page(s) not read again "
                              f"were carried in and ranked again ({t['carried_kept']} kept); the answer cites "
                              f"{t['cited_from_earlier']} section(s) the turn before kept", style="dim",
                              highlight=False, markup=False)
            print_answers(warehouse, t["run_id"], [t["question_id"]], detail, turns=False)


def print_sql_hints(warehouse: Warehouse, run_id: str) -> None:
    console.print(f"\nThe warehouse: [bold]{warehouse.duckdb_path}[/bold] (DuckDB views over "
                  f"{warehouse.tables_dir}). Try:")
    console.print(f"""  hifirag sql "SELECT stage, count(*) AS calls, sum(cache_hit::INT) AS reused FROM llm_calls WHERE run_id = '{run_id}' GROUP BY stage"
  hifirag sql "SELECT q.query, d.heading, d.rank, d.score FROM questions q JOIN section_decisions d USING (run_id, question_id) WHERE d.kept AND run_id = '{run_id}' ORDER BY q.question_id, d.source_order, d.rank LIMIT 20\"""",
                  highlight=False)


def reprocess(
    run_id: Annotated[str, typer.Argument(help="The run to derive from.")],
    from_stage: Annotated[str, typer.Option("--from", help=f"First stage to recompute: {', '.join(STAGE_NAMES)}.")],
    questions: Annotated[str | None, typer.Option(help="Comma-separated question ids \\[default: all].")] = None,
    set_: SetOpt = None,
    new_run_id: Annotated[str | None, typer.Option(help="Id of the new run \\[default: derived].")] = None,
    profile: ProfileOpt = None,
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
        fail(ValueError(f"--from {from_stage!r}: choose one of {', '.join(STAGE_NAMES)}"))
    root = setup(data_root)  # Prefect's settings before anything imports it (checking the runner does)
    where = runner_params(runner, dask_address, dask_workers)
    from hifirag_core.pipeline.plan import plan_reprocess

    try:
        plan = plan_reprocess(run_id, from_stage=from_stage, question_ids=id_list(questions), overrides=set_ or (),
                              run_id=new_run_id, root=root, profile=profile)
    except EXPECTED as exc:
        fail(exc)
    (summary,) = answer_plans(root, [plan], where)
    print_summary(summary)
