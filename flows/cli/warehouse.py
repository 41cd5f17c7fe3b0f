"""``hifirag sql``, ``runs``, ``funnel``, ``sections`` and ``warehouse check``: reading what runs stored, and
checking that it reads."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table

from flows.cli.common import EXIT_INCOMPLETE, DataRoot, console, err, fail, print_result, report_skipped
from hifirag_core.corpus.store import CorpusError
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.store.queries import funnel_summary, list_runs
from hifirag_core.store.warehouse import Warehouse, WarehouseError


def sql(
    query: Annotated[str, typer.Argument(help="A DuckDB SQL query over the stage views.")],
    format_: Annotated[str, typer.Option("--format", help="table, csv, json or markdown.")] = "table",
    max_width: Annotated[int, typer.Option(help="Truncate cells to this many characters in a table (0: no limit).")] = 80,
    data_root: DataRoot = None,
) -> None:
    """Run SQL over the warehouse views (runs, questions, search_results, ..., llm_calls, scores).

    [bold]Example[/bold]: hifirag sql "SELECT run_id, count(*) FROM answers GROUP BY run_id"
    """
    warehouse = Warehouse(resolve_data_root(data_root))
    try:
        result = warehouse.query(query)
    except WarehouseError as exc:
        fail(exc)
    print_result(result.columns, result.rows, format_, max_width)
    report_skipped(warehouse)


def runs(data_root: DataRoot = None) -> None:
    """List runs with their status, variant, config and counts, newest first.

    [bold]Example[/bold]: hifirag runs
    """
    warehouse = Warehouse(resolve_data_root(data_root))
    result = list_runs(warehouse)
    if not result.rows and result.complete:
        console.print("No runs yet: try `hifirag demo`.")
        return
    print_result(result.columns, result.rows, "table")
    report_skipped(warehouse)


def funnel(
    run_ids: Annotated[list[str], typer.Argument(help="One or more runs (for example one per variant).")],
    data_root: DataRoot = None,
) -> None:
    """Where the gold evidence is lost, stage by stage, for questions whose answer has a known place.

    For the FAQ set: was the gold page in the search results, kept by the URL filter, fetched, its
    section parsed and kept by section ranking, and the page cited in the answer. For a variant that
    looks again (final_deep): the share whose gold section was first kept in a follow-up round, and the
    mean number of follow-up rounds per question.

    [bold]Example[/bold]: hifirag funnel docs_faq-final-1a2b3c4d docs_faq-rag-5e6f7a8b
    """
    try:
        result = funnel_summary(Warehouse(resolve_data_root(data_root)), run_ids)
    except WarehouseError as exc:
        fail(exc)
    steps = result.columns[3:]
    table = Table("step", *[f"{r[0]}\n({r[1]}, {r[2]} q)" for r in result.rows], box=box.SIMPLE_HEAD)
    for i, step in enumerate(steps, 3):
        if step == "follow_up_rounds":  # a mean count, not a share
            table.add_row("follow-up rounds per question", *[f"{r[i]:.2f}" for r in result.rows])
        else:
            label = "gold kept only in a follow-up round" if step == "kept_in_follow_up" else step.replace("_", " ")
            table.add_row(label, *[f"{r[i]:.1%}" for r in result.rows])
    console.print(table)


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
    from hifirag_core.corpus.lookup import stored_page
    from hifirag_core.sectioning import format_section_tree, parse_sections

    body = stored_page(resolve_data_root(data_root), url, name)
    if body is None and live:
        from hifirag_core.backends.factory import build_fetcher
        from hifirag_core.config import build_config

        result = build_fetcher(build_config(overrides={"backends": {"fetch": "http"}})).fetch(url)
        if result.status != "ok" or result.body is None:
            fail(CorpusError(f"could not fetch {url}: {result.status} {result.error or ''}"))
        body = result.body
    if body is None:
        fail(CorpusError(f"{url} is in neither the corpus nor any run's pages; pass --live to fetch it"))
    console.print(format_section_tree(parse_sections(body, url)), highlight=False, markup=False)


def check(
    deep: Annotated[bool, typer.Option("--deep", help="Read every page too and verify its checksum (slower).")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="Move damaged files into the quarantine folder (never "
                                         "deleted) and write their rows again from the stage cache.")] = False,
    run: Annotated[str | None, typer.Option("--run", help="Only this run's files \\[default: every run].")] = None,
    data_root: DataRoot = None,
) -> None:
    """Check that every warehouse file reads (its footer; with --deep every page and checksum), and list what is
    damaged or missing.

    With --repair, each damaged file moves to quarantine/<time>/ under the data root, and the rows it held are
    written again from the stage cache (the persisted stage results); what the cache no longer holds is named,
    with the command that computes it again. Exit code 0: every file reads (or was repaired); 3: damage remains.

    [bold]Example[/bold]: hifirag warehouse check --repair --run docs_faq-final-1a2b3c4d
    """
    from hifirag_core.pipeline.repair import check as find_damage
    from hifirag_core.pipeline.repair import repair as repair_damage

    root = resolve_data_root(data_root)
    warehouse = Warehouse(root)
    pattern = f"*/run_id={run}/*.parquet" if run else "*/run_id=*/*.parquet"
    n_files = sum(1 for _ in warehouse.tables_dir.glob(pattern)) if warehouse.tables_dir.exists() else 0
    try:
        found = find_damage(warehouse, run, deep)
    except WarehouseError as exc:
        fail(exc)
    what = "footers, pages and checksums" if deep else "footers"
    if not found:
        console.print(f"{n_files} file(s) checked ({what}): every one reads.", highlight=False)
        return
    console.print(f"{n_files} file(s) checked ({what}): {len(found)} damaged or missing", highlight=False)
    for damaged in found:
        console.print(f"  {damaged.path.relative_to(root)}  (table {damaged.table}, run {damaged.run_id}): "
                      f"{damaged.reason}", highlight=False, markup=False, soft_wrap=True)
    if not repair:
        runs = sorted({d.run_id for d in found})
        err.print(f"repair with: hifirag warehouse check --repair{f' --run {runs[0]}' if len(runs) == 1 else ''}",
                  highlight=False, markup=False)
        raise typer.Exit(EXIT_INCOMPLETE)
    from flows.cli.common import setup
    from flows.stage_cache import cached_outputs

    setup(root)
    report = repair_damage(warehouse, found, cached_outputs(root))
    for source, target in report.moved:
        console.print(f"moved  {source.relative_to(root)} -> {target.relative_to(root)}", highlight=False,
                      markup=False, soft_wrap=True)
    for (run_id, table), n in sorted(report.rebuilt.items()):
        console.print(f"rebuilt  {n} row(s) of {table}, run {run_id}, from the stage cache", highlight=False,
                      markup=False)
    for line in report.todo:
        err.print(f"not repaired: {line}", highlight=False, markup=False, soft_wrap=True)
    if not report.repaired:
        raise typer.Exit(EXIT_INCOMPLETE)
