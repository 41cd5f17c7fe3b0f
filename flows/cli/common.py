"""What every command shares: the consoles, the common options, clear errors, and starting a flow.

Prefect and the model libraries are imported inside the commands that need them, after the
environment is configured, so ``hifirag sql`` and ``hifirag runs`` start in a fraction of a second.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hifirag_core.backend_registry import SEARCH_CHOICES
from hifirag_core.config import ConfigError
from hifirag_core.corpus.store import CorpusError
from hifirag_core.errors import MissingSecretError
from hifirag_core.language import LanguageError
from hifirag_core.llm.examples import ExamplesError
from hifirag_core.profiles import PROFILES
from hifirag_core.questions import InputError
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.steering import SteeringError
from hifirag_core.store.disk import DISK_FULL, DiskFullError
from hifirag_core.store.warehouse import Warehouse, WarehouseError

# Piped output (a file, another program) gets wide lines rather than a table folded to 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=200)
err = Console(stderr=True)

DataRoot = Annotated[
    Path | None,
    typer.Option("--data-root", help="Where the warehouse, corpus and caches live "
                 "(default: $HIFIRAG_DATA_ROOT, else warehouse/data in a checkout, else the per-user data "
                 "folder).", show_default=False),
]
RunnerOpt = Annotated[str, typer.Option(help="Where questions run: threads (this process) or dask (a local "
                                          "cluster of --dask-workers processes, or --dask-address).")]
DaskAddress = Annotated[str | None, typer.Option(help="An existing Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                                                 "(its workers need the data root and PREFECT_API_URL).")]
DaskWorkers = Annotated[int, typer.Option(help="Processes of the local Dask cluster.")]
Fields = Annotated[str | None, typer.Option(help="Field names of a custom file: id=qid,query=q,reference=gold.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Config override key=value (repeatable); e.g. "
                                                  f"backends.search={'|'.join(SEARCH_CHOICES)}, or several at once: "
                                                  "search.providers=searxng,duckduckgo,folder (`hifirag providers`).")]
ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", help="Backends in one word: "
    + ", ".join(p.name + (":MODEL@URL" if p.takes_model else "") for p in PROFILES.values())
    + ", or a profile of your config file \\[default: the config file's, else offline].", show_default=False)]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", envvar="HIFIRAG_CONFIG", help="A TOML file of your settings (sections of the config, a default "
    "profile, profiles of your own). Precedence: defaults, this file, --profile, the variant, --set.",
    show_default=False)]
# Steering (docs/user-guide.md, "Steering"): each is a steer.* setting; a question's own field wins.
SitesOpt = Annotated[str | None, typer.Option(help="Only these sites, comma-separated (example.com takes its "
                                              "subdomains too; =example.com that host only).", show_default=False)]
ExcludeSitesOpt = Annotated[str | None, typer.Option(help="Never these sites, comma-separated.", show_default=False)]
AfterOpt = Annotated[str | None, typer.Option(help="Only sources published on or after this day (YYYY-MM-DD).",
                                              show_default=False)]
BeforeOpt = Annotated[str | None, typer.Option(help="Only sources published on or before this day (YYYY-MM-DD).",
                                               show_default=False)]
LanguageOpt = Annotated[str | None, typer.Option(help="The answer's language: auto (the question's) or a code such "
                                                 "as fr \\[default: auto].", show_default=False)]
LengthOpt = Annotated[str | None, typer.Option(help="short (the direct answer, at most about 3 sentences), standard "
                                               "(the paper's) or long (in sections) \\[default: standard].",
                                               show_default=False)]


def steer_overrides(sites: str | None = None, exclude_sites: str | None = None, after: str | None = None,
                    before: str | None = None, language: str | None = None, length: str | None = None) -> list[str]:
    """The steering options as ``--set`` pairs (checked with the rest of the config)."""
    given = {"sites": sites, "exclude_sites": exclude_sites, "after": after, "before": before, "language": language,
             "length": length}
    return [f"steer.{name}={value}" for name, value in given.items() if value is not None]

# The errors a command reports as a clear message (exit 2) rather than a traceback.
EXPECTED = (InputError, ConfigError, CorpusError, ExamplesError, WarehouseError, MissingSecretError, SteeringError,
            LanguageError, DiskFullError)


# A result that left out a damaged file: printed, then one line per file on stderr, and this exit code.
EXIT_INCOMPLETE = 3


def report_skipped(warehouse: Warehouse, run_id: str | None = None) -> None:
    """End a command whose reads left out damaged files (of ``run_id``, for a command that reads one run): one
    line each (the file, its table and run, the command that repairs it), and exit ``EXIT_INCOMPLETE``, so the
    result never reads as complete."""
    skipped = [d for d in warehouse.skipped.values() if run_id is None or d.run_id == run_id]
    if not skipped:
        return
    for damaged in skipped:
        err.print(damaged.line(warehouse.root), style="yellow", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_INCOMPLETE)


def fail(exc: Exception) -> NoReturn:
    err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)  # one line
    raise typer.Exit(2)


def setup(data_root: Path | None) -> Path:
    """Configure the process for Prefect and the models (before either is imported); the data root."""
    from flows.environment import configure

    root = resolve_data_root(data_root)
    configure(root)
    return root


def runner_params(runner: str, dask_address: str | None, dask_workers: int) -> dict:
    """The flows' runner parameters, checked before Prefect starts."""
    from flows.runners import RunnerChoice

    try:
        RunnerChoice(runner, dask_address, dask_workers)  # type: ignore[arg-type]
    except ValueError as exc:
        fail(exc)
    return {"runner": runner, "dask_address": dask_address, "dask_workers": dask_workers}


def field_map(fields: str | None) -> dict[str, str] | None:
    """``--fields id=qid,query=q`` as a mapping."""
    if not fields:
        return None
    try:
        return dict(pair.split("=", 1) for pair in fields.split(","))
    except ValueError:
        fail(ValueError(f"--fields {fields!r}: expected name=field pairs separated by commas"))


def id_list(ids: str | None) -> list[str] | None:
    """``--ids a,b`` as a list (None: every question)."""
    return [i.strip() for i in ids.split(",") if i.strip()] if ids else None


def starting_flow(module: str, name: str):
    """A flow, imported while Prefect's temporary server starts; the server is up when it returns."""
    from flows.environment import server_starting

    with server_starting():
        return getattr(importlib.import_module(module), name)


def in_prefect(root: Path, flow_fn, **params):
    """Call a flow with its stage cache under ``root``, turning expected errors into clear exits."""
    from prefect.exceptions import FailedRun

    from flows.environment import stage_cache_at

    try:
        with stage_cache_at(root):
            return flow_fn(**params)
    except EXPECTED as exc:
        fail(exc)
    except FailedRun as exc:  # a flow that stopped on a full disk ends Failed with its one line
        if str(exc).startswith(DISK_FULL):
            fail(exc)
        raise


class ConsoleLog:
    """A logger's ``info`` that prints to stderr, for the steps a command takes before its flow starts."""

    def info(self, message: str) -> None:
        err.print(message, highlight=False, markup=False)


def print_summary(summary: dict) -> None:
    table = Table(title=f"Run {summary['run_id']}: {summary['status']}", show_header=False)
    for key in ("n_questions", "n_answered", "n_abstained", "n_looked_again", "follow_up_rounds", "n_failed",
                "wall_seconds", "stage_computations", "cache_hits", "llm_calls_paid", "llm_calls_reused",
                "llm_calls_unbilled", "search_calls", "cost_usd", "duckdb_path"):
        if key in summary and (summary[key] or key not in ("n_looked_again", "follow_up_rounds")):
            table.add_row(key.replace("_", " "), str(summary[key]))
    console.print(table)
    for note in summary.get("notes", []):
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)  # a note is one line


def _cell(value, max_width: int) -> str:
    text = "" if value is None else str(value)
    return text if not max_width or len(text) <= max_width else text[: max_width - 1] + "…"


def print_result(columns: Sequence[str], rows: Sequence[tuple], format_: str, max_width: int = 80) -> None:
    """Rows as a table, CSV, JSON or Markdown."""
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
        fail(ValueError(f"unknown format {format_!r}: use table, csv, json or markdown"))
