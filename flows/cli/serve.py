"""``hifirag serve``: the pipeline behind the MMU-RAGent API (the app itself is ``hifirag_core.serving.app``)."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.common import EXPECTED, ConfigOpt, DataRoot, ProfileOpt, SetOpt, fail, setup
from hifirag_core.config import ConfigError
from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface). Beyond loopback "
                                      "the service needs a token in $HIFIRAG_SERVICE_TOKEN.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 5010,
    profile: ProfileOpt = None,
    config: ConfigOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="Questions answered at once; more get 503 with Retry-After "
                                                    "\\[default: limits.concurrency, 4].")] = None,
    variant: Annotated[str, typer.Option(help="Named configuration (see `hifirag variants`): the default looks "
                                         "again when its sources fall short, answers, and shows whether they answer, "
                                         "as `hifirag run` does (no variant's judgment holds on every kind of "
                                         "corpus yet); final_deep abstains instead; final is the paper's row.")] = DEFAULT_RUN_VARIANT,
    set_: SetOpt = None,
    deadline: Annotated[float, typer.Option(help="Seconds a request may take before it gets what exists "
                                            "(at most 600, the competition's limit).")] = 570.0,
    heartbeat: Annotated[float, typer.Option(help="Seconds of silence after which a stream repeats its last message.")] = 15.0,
    max_body: Annotated[int, typer.Option(help="Largest request body accepted, in bytes (larger: 413).")] = 65536,
    allow_host: Annotated[list[str] | None, typer.Option(
        envvar="HIFIRAG_ALLOWED_HOSTS",
        help="A host name clients reach the service by, beside localhost, 127.0.0.1, ::1 and --host (repeat it, "
             "or list names in $HIFIRAG_ALLOWED_HOSTS); requests naming another host get 421.")] = None,
    data_root: DataRoot = None,
) -> None:
    """Serve the pipeline with the MMU-RAGent API: GET /health, POST /evaluate and a streaming POST /run.

    /run streams "data: {json}" messages: the query plan, the URLs kept, the sections kept, then the
    answer, then a last message with complete true, the report and its citations. Every request joins
    the day's service run in the warehouse (stage cache included: a repeated question computes nothing).
    Stops on Ctrl-C or SIGTERM after the questions in flight are answered and recorded.

    A request may steer its question with the optional fields sites, exclude_sites, after, before,
    language and length, and set depth, the follow-up research rounds it allows (0 to the variant's
    research.max_rounds; docs/serving.md); a bad value gets 422. The pages at / (Ask, runs, answers
    sentence by sentence) take the same fields.

    Only JSON bodies, the service's own host names and its own pages' origin are accepted. Beyond loopback
    (--host 0.0.0.0) the token in $HIFIRAG_SERVICE_TOKEN is required: `Authorization: Bearer` for the API,
    a sign-in at /signin for the pages.

    [bold]Example[/bold]: hifirag serve --port 5010 --profile offline --concurrency 4
    """
    root = setup(data_root)
    from pydantic import ValidationError

    from hifirag_core.secrets import optional_secret
    from hifirag_core.serving.access import Access
    from hifirag_core.serving.settings import ServiceSettings

    try:  # before anything starts: beyond loopback without a token is an error naming the variable
        access = Access.for_bind(host, allow_host or (), optional_secret("service_token"))
    except ConfigError as exc:
        fail(exc)

    try:
        settings = ServiceSettings(data_root=root, profile=profile, config_file=config, variant=variant,
                                   overrides=tuple(set_ or ()),
                                   concurrency=concurrency, deadline_s=deadline, heartbeat_s=heartbeat,
                                   max_body_bytes=max_body)
    except ValidationError as exc:
        fail(ConfigError("; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())))
    from flows.environment import server_starting

    with server_starting():  # the service's own temporary Prefect server (unless PREFECT_API_URL names one)
        from flows.service import build_service
        from hifirag_core.serving.app import serve as run_service

        try:
            service = build_service(settings)
        except EXPECTED as exc:
            fail(exc)
    run_service(service, host, port, access)
