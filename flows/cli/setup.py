"""``hifirag prepare``, ``prepare-models``, ``doctor`` and ``variants``: setting up, and what is configured."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from flows.cli.common import EXPECTED, ConfigOpt, DataRoot, ProfileOpt, SetOpt, console, fail
from hifirag_core.resources import data_root as resolve_data_root


def prepare() -> None:
    """Everything a first run would otherwise pay for, done now (`make setup` runs it): MiniLM's ONNX
    export (as prepare-models) and Prefect's database under PREFECT_HOME (.prefect in a checkout).

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


def prepare_models() -> None:
    """Make the ONNX export of MiniLM now (once per machine; `make setup` does it), so no run pays for it.

    Runs that embed use ONNX Runtime on this export; without it they make it on first use (about 5 s),
    or use sentence-transformers where ONNX Runtime is missing. The export goes to the model cache
    (HIFIRAG_MODEL_CACHE, default ~/.cache/hifirag/models); on a cluster, run this on every machine.

    [bold]Example[/bold]: hifirag prepare-models
    """
    from hifirag_core.retrieval.embeddings import Embedder

    embedder = Embedder(None)
    started = time.perf_counter()
    try:
        runtime = embedder.prepare()
    except EXPECTED as exc:
        fail(exc)
    console.print(f"MiniLM ({embedder.model_path}) runs on {runtime} "
                  f"(ready in {time.perf_counter() - started:.1f} s)", highlight=False)


def doctor(
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`).")] = "final",
    set_: SetOpt = None,
    profile: ProfileOpt = None,
    config: ConfigOpt = None,
    reddit_url: Annotated[str | None, typer.Option(help="The Reddit thread the praw check reads "
                                                   "\\[default: a long-archived AMA].")] = None,
    http_url: Annotated[str | None, typer.Option(help="The page the direct-HTTP check fetches "
                                                 "\\[default: https://example.com/].")] = None,
    data_root: DataRoot = None,
) -> None:
    """Check every backend the configuration selects with one cheap call: what works, what is missing, what it costs.

    A model gets the paper's query-plan prompt with the structured-output schema every filter call
    sends, so a server that refuses the response format shows up here. Keys are named, never printed.
    With --profile (or the config file's profile), it first says what that profile still lacks: a
    server's URL or model name, a key. Exits 1 when a check failed or something is missing.

    [bold]Example[/bold]: hifirag doctor --profile llama-cpp:local@http://127.0.0.1:8080/v1
    """
    from hifirag_core.backends.doctor import HTTP_PROBE_URL, REDDIT_PROBE_URL, check_backends, profile_gaps
    from hifirag_core.pipeline.variants import variant_overrides
    from hifirag_core.profiles import load_config_file, resolve_config
    from hifirag_core.secrets import install_log_redaction

    install_log_redaction()
    try:
        file = load_config_file(config)
        cfg = resolve_config(variant=variant, variant_settings=variant_overrides(variant), overrides=list(set_ or []),
                             profile=profile, file=file)
    except EXPECTED as exc:
        fail(exc)
    chosen = profile or file.profile
    gaps = profile_gaps(chosen, cfg) if chosen else []
    if chosen:
        console.print(f"Profile [bold]{escape(chosen)}[/bold]" + (f" (config file {escape(str(file.path))})"
                                                                  if file.path else "") + ": "
                      + ("nothing is missing." if not gaps else "it still lacks:"), highlight=False)
        for gap in gaps:
            console.print(f"  - {escape(gap)}", highlight=False)
    checks = check_backends(cfg, resolve_data_root(data_root), reddit_url=reddit_url or REDDIT_PROBE_URL,
                            http_url=http_url or HTTP_PROBE_URL)
    table = Table("role", "backend", "status", "what works, or what is missing", "cost", box=box.SIMPLE_HEAD)
    colour = {"ok": "green", "missing": "yellow", "failed": "red"}
    for c in checks:
        table.add_row(c.role, c.backend, f"[{colour[c.status]}]{c.status}[/]", escape(c.detail), escape(c.cost))
    console.print(table)
    if gaps or any(c.status != "ok" for c in checks):
        raise typer.Exit(1)


def providers() -> None:
    """List the search and fetch backends: the keys each needs (and whether this environment has them), the
    settings it must have, the steering it sends in its own request and what a call costs.

    It prints the backends table (hifirag_core/backend_registry.py) that the config's choices, the keys a run
    checks before it starts and `hifirag doctor` come from. Several search providers at once: --set
    search.providers=searxng,duckduckgo,folder (docs/user-guide.md, "Search providers").

    [bold]Example[/bold]: hifirag providers
    """
    from hifirag_core import backend_registry as registry
    from hifirag_core.secrets import optional_secret

    table = Table("backend", "role", "what it is", "keys", "settings", "steering in its own request", "cost",
                  box=box.SIMPLE_HEAD)
    for row in registry.BACKENDS:
        keys = "; ".join(f"{' or '.join(k.env)} ({'set' if optional_secret(k.name) else 'not set'})"
                         for k in row.keys) or "none"
        name = row.name + (f" (ends {row.ends.isoformat()})" if row.ends else "")
        table.add_row(name, row.role, escape(row.summary), escape(keys), escape(", ".join(row.settings) or "-"),
                      escape(row.steering if row.role == "search" else "-"), escape(registry.cost_text(row)))
    console.print(table)


def variants() -> None:
    """List the named configurations and what each changes, then the settings that depart from the paper.

    [bold]Example[/bold]: hifirag variants
    """
    from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT, DEPARTURES, VARIANTS

    table = Table("variant", "overrides")
    for name, overrides in VARIANTS.items():
        shown = f"{name} (default of run and serve)" if name == DEFAULT_RUN_VARIANT else name
        table.add_row(shown, json.dumps(overrides) if overrides else "(the defaults)")
    console.print(table)
    console.print(f"The default, {DEFAULT_RUN_VARIANT}, answers and shows whether the sources answer: a default "
                  "abstains only once its judgment meets the transfer targets on a corpus it was not fitted on "
                  "(issue 26), and it missed them on encyclopedia pages (issue 41); a corpus's own calibration, fitted on "
                  "probes from its pages, missed them too, and is what the default shows. --variant final_deep "
                  "abstains.",
                  highlight=False, markup=False)
    departures = Table("setting", "where it departs from the paper", "why", title="Departures from the paper")
    for setting, where, why in DEPARTURES:
        departures.add_row(setting, where, why)
    console.print(departures, markup=False)
