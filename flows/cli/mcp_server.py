"""``hifirag mcp``: the service's answering as MCP tools (the server itself is ``hifirag_core.serving.mcp_server``)."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from flows.cli.common import EXPECTED, ConfigOpt, DataRoot, ProfileOpt, SetOpt, fail, setup
from hifirag_core.config import ConfigError
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT


def mcp(
    http: Annotated[str | None, typer.Option(
        "--http", metavar="HOST:PORT",
        help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio. Beyond loopback it needs the "
             "token in $HIFIRAG_SERVICE_TOKEN (clients send Authorization: Bearer).")] = None,
    profile: ProfileOpt = None,
    config: ConfigOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="Questions answered at once; more are refused "
                                                    "\\[default: limits.concurrency, 4].")] = None,
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`), as for "
                                         "`hifirag serve`.")] = DEFAULT_RUN_VARIANT,
    set_: SetOpt = None,
    deadline: Annotated[float, typer.Option(help="Seconds a question may take before `ask` returns what "
                                            "exists (at most 600).")] = 570.0,
    max_body: Annotated[int, typer.Option(help="Largest HTTP request body accepted, in bytes.")] = 65536,
    allow_host: Annotated[list[str] | None, typer.Option(
        envvar="HIFIRAG_ALLOWED_HOSTS",
        help="With --http: a host name clients reach the server by, beside localhost, 127.0.0.1, ::1 and "
             "HOST (repeatable); other names get 421.")] = None,
    data_root: DataRoot = None,
) -> None:
    """Serve the pipeline to MCP clients (agents, editors): the tools ask, sql and runs.

    ask answers a question with the steering of POST /run (sites, exclude_sites, after, before, language,
    length, depth) through the same path as `hifirag serve` (its limits, deadline, budget, stage cache and
    day's service run), reports each finished stage as a progress notification, and returns the answer,
    its citations and the run and question ids. sql runs one read-only statement over the warehouse views
    (at most 1000 rows, 10 s); runs lists the newest runs with their counts.

    By default the server speaks over stdin and stdout: an MCP client starts `hifirag mcp` itself, and no
    token is needed (nothing but the protocol is written to stdout; the log goes to stderr). With --http
    HOST:PORT it listens for streamable HTTP at http://HOST:PORT/mcp, with the access rules of `hifirag
    serve`: its own host names, no foreign Origin, and beyond loopback the token in $HIFIRAG_SERVICE_TOKEN
    (Authorization: Bearer); without it, exit 2.

    [bold]Example[/bold]: hifirag mcp --profile offline   (stdio);   hifirag mcp --http 127.0.0.1:5020
    """
    address = _address(http) if http is not None else None
    with contextlib.redirect_stdout(sys.stderr):  # over stdio, stdout is the protocol's alone
        service, access = _start(address, allow_host, data_root, profile, config, variant, set_, concurrency,
                                 deadline, max_body)
    import asyncio

    from hifirag_core.serving.mcp_server import serve_http, serve_stdio

    if address is None:
        asyncio.run(serve_stdio(service))
    else:
        asyncio.run(serve_http(service, *address, access))


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        fail(ConfigError(f"--http {value!r}: give HOST:PORT, e.g. 127.0.0.1:5020"))
    return host, int(port)


def _start(address, allow_host, data_root, profile, config, variant, set_, concurrency, deadline, max_body):
    """The service, built as `hifirag serve` builds it, and the HTTP access rule (None over stdio)."""
    root = setup(data_root)
    from pydantic import ValidationError

    from hifirag_core.secrets import optional_secret
    from hifirag_core.serving.access import Access
    from hifirag_core.serving.settings import ServiceSettings

    access = None
    if address is not None:
        try:  # before anything starts: beyond loopback without a token is an error naming the variable
            access = Access.for_bind(address[0], allow_host or (), optional_secret("service_token"))
        except ConfigError as exc:
            fail(exc)
    try:
        settings = ServiceSettings(data_root=root, profile=profile, config_file=config, variant=variant,
                                   overrides=tuple(set_ or ()), concurrency=concurrency, deadline_s=deadline,
                                   max_body_bytes=max_body)
    except ValidationError as exc:
        fail(ConfigError("; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())))
    _log_to_stderr()
    from flows.environment import server_starting

    with server_starting():  # the temporary Prefect server (unless PREFECT_API_URL names one)
        from flows.service import build_service

        try:
            service = build_service(settings)
        except EXPECTED as exc:
            fail(exc)
    return service, access


def _log_to_stderr() -> None:
    """The service's log on stderr, through the secret scrubber, as `hifirag serve` logs."""
    import logging

    from hifirag_core.secrets import RedactingFilter
    from hifirag_core.serving.service import log

    for name in ("uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).addFilter(RedactingFilter())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
