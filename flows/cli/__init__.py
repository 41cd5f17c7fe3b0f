"""The ``hifirag`` command: a thin shell over the flows, the warehouse and the corpus.

Each command lives with its group (``run``, ``evaluate``, ``warehouse``, ``setup``, ``serve``, ``mcp_server``,
``corpus``, ``experiments``) as a plain function; this module only names them. A command checks its input, calls
one function of ``hifirag_core`` or one flow, and prints.
"""

from __future__ import annotations

import inspect

import typer

from flows.cli import common, corpus, evaluate, experiments, mcp_server, run, serve, setup, warehouse

app = typer.Typer(
    help="HiFi-RAG: hierarchical filtering and two-pass generation as a Prefect batch pipeline, "
    "with every stage's output in a Parquet/DuckDB warehouse.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
corpus_app = typer.Typer(help="Build and search the local corpus (the offline web).", no_args_is_help=True)
testset_app = typer.Typer(help="Build test sets: fresh-knowledge question-answer pairs.", no_args_is_help=True)
warehouse_app = typer.Typer(help="Check the warehouse's files and repair damaged ones.", no_args_is_help=True)

COMMANDS = {
    app: {
        "run": run.run, "demo": run.demo, "answers": run.answers, "reprocess": run.reprocess,
        "eval": evaluate.eval_, "export-mmu": evaluate.export_mmu, "evaluate-remote": evaluate.evaluate_remote,
        "serve": serve.serve, "mcp": mcp_server.mcp,
        "sql": warehouse.sql, "runs": warehouse.runs, "funnel": warehouse.funnel, "sections": warehouse.sections,
        "variants": setup.variants, "prepare": setup.prepare, "prepare-models": setup.prepare_models,
        "doctor": setup.doctor, "providers": setup.providers,
        "credibility": experiments.credibility,
    },
    corpus_app: {"build": corpus.build, "calibrate": corpus.calibrate, "search": corpus.search},
    testset_app: {"fresh": experiments.fresh_testset},
    warehouse_app: {"check": warehouse.check},
}


def _help(function) -> str | None:
    """Help from the docstring, each paragraph one line: Rich wraps it to the terminal instead of keeping
    the source's line breaks."""
    doc = inspect.getdoc(function)
    return "\n\n".join(" ".join(par.split()) for par in doc.split("\n\n")) if doc else None


for group, commands in COMMANDS.items():
    for name, function in commands.items():
        group.command(name, help=_help(function))(function)
app.add_typer(corpus_app, name="corpus")
app.add_typer(testset_app, name="testset")
app.add_typer(warehouse_app, name="warehouse")


def main() -> None:
    from flows.environment import ServerStartError, exit_on_sigterm

    exit_on_sigterm()
    try:
        app()
    except ServerStartError as exc:
        common.err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True)
        raise SystemExit(1) from None
