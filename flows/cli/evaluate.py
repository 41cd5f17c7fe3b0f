"""``hifirag eval``, ``export-mmu`` and ``evaluate-remote``: scoring runs and services, and the submission file.

An evaluation is planned here, once (its variants' runs included), and the plan goes to the flow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    SitesOpt,
    console,
    err,
    fail,
    field_map,
    id_list,
    runner_params,
    setup,
    steer_overrides,
)
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.store.warehouse import Warehouse, WarehouseError


def eval_(
    dataset: Annotated[str, typer.Option(help="mmu (MMU-RAGent, first 100 by default), faq-a (FAQ pages left out), "
                                         "faq-b (known-item, everything in), answerability[-tune|-report], "
                                         "two-part[-tune|-report] (two FAQ questions asked as one) or a JSONL path.")],
    variants: Annotated[str, typer.Option(help="Variants to evaluate, comma-separated (see `hifirag variants`).")] = "final",
    limit: Annotated[int | None, typer.Option(help="Only the first N questions \\[default: 100 for mmu, all otherwise].")] = None,
    sample: Annotated[int | None, typer.Option(help="N questions spread evenly over the file.")] = None,
    ids: Annotated[str | None, typer.Option(help="Comma-separated question ids.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Pipeline config override key=value for every "
                                                   "variant (repeatable).")] = None,
    eval_set: Annotated[list[str] | None, typer.Option("--eval-set", help="Evaluation setting key=value (repeatable), "
                                                       "e.g. citation_support_threshold=0.6.")] = None,
    profile: ProfileOpt = None,
    config: ConfigOpt = None,
    sites: SitesOpt = None,
    exclude_sites: ExcludeSitesOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    language: LanguageOpt = None,
    length: LengthOpt = None,
    deberta_path: Annotated[Path | None, typer.Option(envvar="HIFIRAG_DEBERTA_PATH", help="Local folder of "
                                                      "microsoft/deberta-xlarge-mnli: BERTScore as the organisers "
                                                      "computed it. Without it, MiniLM BERTScore (its own metric).")] = None,
    baseline: Annotated[str | None, typer.Option(help="Evaluation id to compare with \\[default: the last passing "
                                                 "evaluation of the same dataset fingerprint and variant].")] = None,
    accept: Annotated[bool, typer.Option("--accept", help="Record a regression as accepted: it becomes the baseline "
                                         "and the command exits 0.")] = False,
    fields: Fields = None,
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
    root = setup(data_root)  # Prefect's settings before anything imports it (checking the runner does)
    where = runner_params(runner, dask_address, dask_workers)
    from hifirag_core.evaluation.eval_config import build_evaluation_config
    from hifirag_core.evaluation.eval_steps import plan_evaluation

    names = [v.strip() for v in variants.split(",") if v.strip()]
    settings = list(eval_set or []) + ([f"deberta_path={deberta_path}"] if deberta_path else [])
    try:  # plan (and so check) everything before Prefect starts
        overrides = [*steer_overrides(sites, exclude_sites, after, before, language, length), *(set_ or [])]
        plan = plan_evaluation(dataset, names, cfg=build_evaluation_config(settings), root=root, limit=limit,
                               sample=sample, ids=id_list(ids), overrides=overrides, fields=field_map(fields),
                               baseline=baseline, accept=accept, profile=profile,
                               config_file=str(config) if config else None)
    except EXPECTED as exc:
        fail(exc)
    if deberta_path and not deberta_path.is_dir():
        err.print(f"note: {deberta_path} is not a folder; scoring with MiniLM BERTScore instead", highlight=False)
    from flows.environment import server_starting, stage_cache_at

    with server_starting():
        from flows.eval_flow import evaluate_plan
        from hifirag_core.corpus.build import ensure_corpus

        try:
            for run in plan.runs:
                ensure_corpus(run.cfg, root, ConsoleLog().info)
        except EXPECTED as exc:
            fail(exc)
    try:
        with stage_cache_at(root):
            state = evaluate_plan(plan=plan, report_dir=str(out) if out else None, **where, return_state=True)
    except EXPECTED as exc:
        fail(exc)
    result = state.result(raise_on_failure=False)
    regressed = getattr(result, "outcome", None)
    if regressed is not None:
        result = regressed
    if not isinstance(result, dict):
        if isinstance(result, EXPECTED):
            fail(result)
        raise result if isinstance(result, BaseException) else RuntimeError(f"evaluation ended {state.name}")
    from rich.markdown import Markdown

    console.print(Markdown(result["markdown"]))
    console.print(f"\nReport: [bold]{result['html_path']}[/bold] (Markdown: {result['markdown_path']})", highlight=False)
    console.print(f"Scores: hifirag sql \"SELECT * FROM evaluation_summary WHERE evaluation_id = "
                  f"'{result['evaluation_id']}'\"", highlight=False, markup=False)
    if state.is_failed():
        err.print(f"[red]REGRESSED:[/red] {state.message}", highlight=False)
        raise typer.Exit(1)


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
    from hifirag_core.evaluation.export import build_submission, check_submission, write_submission
    from hifirag_core.serving.contract import NO_ANSWER_RESPONSE

    root = resolve_data_root(data_root)
    try:
        submission = build_submission(Warehouse(root), run_id, citations=citations)
    except EXPECTED as exc:
        fail(exc)
    if submission.no_answer and strict:
        listed = ", ".join(q for q, _ in submission.no_answer[:10])
        fail(WarehouseError(f"{len(submission.no_answer)} question(s) have no answer ({listed}); nothing written "
                             "(drop --strict to write the fixed no-answer sentence for them)"))
    path = write_submission(submission, out or root / "exports" / f"{run_id}.jsonl")
    problems = check_submission(path, [line["query_id"] for line in submission.lines])
    if problems:  # the writer's own contract; a failure here is a bug
        fail(WarehouseError(f"{path}: " + "; ".join(problems)))
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
    fields: Fields = None,
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
        fail(ValueError(f"--endpoint {endpoint!r}: choose evaluate or run"))
    root = setup(data_root)
    from hifirag_core.evaluation.eval_config import build_evaluation_config
    from hifirag_core.evaluation.remote import RemoteError
    from hifirag_core.evaluation.remote import evaluate_remote as evaluate_service

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
                                  ids=id_list(ids), fields=field_map(fields), out=out, baseline=baseline, accept=accept, progress=progress)
    except (*EXPECTED, RemoteError) as exc:
        fail(exc)
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
