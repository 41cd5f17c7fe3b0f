"""``hifirag mcp``: the service's answering, the warehouse and its runs as MCP tools (the official ``mcp`` SDK).

Three tools, over stdio or streamable HTTP:

* ``ask``: a question, with the ``/run`` API's optional steering, depth and ``follows`` (the ``answer_id`` of an
  earlier ``ask`` it follows up), answered by the very path that answers ``/run`` (``Service.admit`` and
  ``Service.stream``: the same slots, deadline, budget, stage cache and day's service run); each finished stage
  is an MCP progress notification, and the result is the answer with its citations and the ids of its rows
  (run, question, and the answer id a follow-up names).
* ``sql``: one read-only statement over the warehouse views, with a row limit and a time limit
  (``hifirag_core.store.queries.read_only_query``).
* ``runs``: the newest runs with their counts (``list_runs``, as ``hifirag runs`` prints them).

Over HTTP the server sits behind the service's own access guard (``hifirag_core.serving.access``): its host
names, no foreign ``Origin``, and beyond loopback the token in ``$HIFIRAG_SERVICE_TOKEN`` as
``Authorization: Bearer``. Over stdio the client started the process, so no token is asked.

Nothing here knows Prefect: ``flows.service`` gives the ``Service`` its answerer, as for ``hifirag serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from hifirag_core.pipeline.question_steering import steering_conflicts
from hifirag_core.serving.access import Access, AccessGuard
from hifirag_core.serving.contract import STEP_SEPARATOR, BadRequest, RunRequest, parse_request, parse_sse
from hifirag_core.serving.service import Service
from hifirag_core.store.queries import list_runs, read_only_query
from hifirag_core.store.warehouse import WarehouseError
from hifirag_core.turns import AnswerRef, ThreadError

MAX_SQL_ROWS = 1000  # the most rows `sql` returns, whatever a client asks
DEFAULT_SQL_ROWS = 100
SQL_TIMEOUT_S = 10.0
MAX_RUNS = 200
_GROWING = re.compile(r"^\*\*[^*\n]+\*\* \(writing\):")  # a draft still being written (report.writing_step)

INSTRUCTIONS = (
    "HiFi-RAG answers questions from the web (or its local corpus) with a citation per sentence. `ask` runs "
    "the pipeline (minutes with a model; progress is reported per stage) and returns the answer, its cited "
    "URLs and the run and question ids; pass its answer_id as `follows` to ask a follow-up question about it "
    "(\"and on Windows?\"). `sql` reads the warehouse views (questions, answers, citation_ledger, "
    "stage_costs, ...) by those ids; `runs` lists the newest runs."
)


def create_mcp_server(service: Service, *, sql_timeout_s: float = SQL_TIMEOUT_S) -> MCPServer:
    """The MCP server over one running ``Service`` (the caller starts and stops the service)."""
    server = MCPServer("hifirag", instructions=INSTRUCTIONS)

    @server.tool()
    async def ask(question: Annotated[str, Field(description="The question, as a person would ask it.")],
                  ctx: Context,
                  sites: Annotated[list[str] | str | None, Field(
                      description="Domains whose pages may be sources (example.com takes its subdomains, "
                                  "=example.com that host only).")] = None,
                  exclude_sites: Annotated[list[str] | str | None, Field(
                      description="Domains whose pages never are.")] = None,
                  after: Annotated[str | None, Field(description="YYYY-MM-DD: sources published on or after.")] = None,
                  before: Annotated[str | None, Field(description="YYYY-MM-DD: sources published on or before.")] = None,
                  language: Annotated[str | None, Field(
                      description="The answer's language: auto (the question's) or a code such as fr.")] = None,
                  length: Annotated[str | None, Field(description="short, standard or long.")] = None,
                  depth: Annotated[int | None, Field(
                      description="Follow-up research rounds allowed when the sources fall short (0 to the "
                                  "service's maximum).")] = None,
                  follows: Annotated[str | None, Field(
                      description="The answer_id of an earlier answer of this service that this question follows "
                                  "up (\"and on Windows?\"): the question is read in its light, and that answer's "
                                  "sources join the new searches.")] = None) -> dict[str, Any]:
        """Answer a question with sources: the answer (Markdown, each sentence followed by the [k] of the
        sources that support it, then the numbered sources), its cited URLs in [k] order, the run_id and
        question_id of its rows in the warehouse (for `sql`), and its answer_id (for a follow-up's `follows`).

        The optional steering is the service's POST /run's, checked as it checks it; a field left out takes the
        service's own setting, and a bad value is an error naming the field, as is a `follows` that names no
        answer of this service that was given.
        """
        fields = {"question": question, "sites": sites, "exclude_sites": exclude_sites, "after": after,
                  "before": before, "language": language, "length": length, "depth": depth, "follows": follows}
        request = _checked(service, {k: v for k, v in fields.items() if v is not None})
        try:
            earlier = await asyncio.to_thread(service.earlier_turn, request.follows) if request.follows else None
        except ThreadError as exc:
            raise ToolError(f"invalid request: {exc}") from None
        problem = service.disk_problem()
        if problem is not None:
            raise ToolError(problem)
        ticket = service.admit(request.question, "mcp:ask", steering=request.steering(), earlier=earlier)
        if ticket is None:
            raise ToolError(f"the service is answering {service.gate.capacity} questions, its limit; "
                            f"retry in about {service.gate.retry_after()} s")
        ids = {"run_id": ticket.plan.run_id, "question_id": ticket.question.id,
               "answer_id": AnswerRef(ticket.plan.run_id, ticket.question.id).id}
        last: dict[str, Any] | None = None
        finished = 0
        # The /run stream itself (its deadline, heartbeats and redaction), closed at once should the client
        # cancel, so that the request is recorded as disconnected while the pipeline finishes and stores its rows.
        async with contextlib.aclosing(service.stream(ticket)) as stream:
            async for chunk in stream:
                for message in parse_sse(chunk.decode("utf-8").split("\n")).messages:
                    last = message
                    steps = (message.get("intermediate_steps") or "").split(STEP_SEPARATOR)
                    if message.get("is_intermediate") and len(steps) > finished and not _GROWING.match(steps[-1]):
                        finished = len(steps)  # a finished stage's step (a draft still growing sends none)
                        await ctx.report_progress(finished, None, steps[-1].strip().split("\n", 1)[0])
        if last is None or last.get("error"):
            reason = (last or {}).get("error") or "the stream ended without a message"
            raise ToolError(f"{reason} (run {ids['run_id']}, question {ids['question_id']})")
        return {"answer": last.get("final_report") or "", "citations": list(last.get("citations") or []),
                **ids, "steps": finished}

    @server.tool()
    async def sql(query: Annotated[str, Field(description="One SELECT (or EXPLAIN of one) in DuckDB's SQL.")],
                  max_rows: Annotated[int, Field(description="Rows returned at most (1 to 1000).")] = DEFAULT_SQL_ROWS,
                  ) -> dict[str, Any]:
        """Run one read-only SQL statement (SELECT, or EXPLAIN of one; DuckDB's dialect) over the warehouse views:
        runs, questions, answers, citation_ledger, search_results, pages, sections, stage_costs, llm_calls,
        served_requests, ... Writes, EXPLAIN ANALYZE, files outside the warehouse and settings are refused.
        Returns columns, rows (at most max_rows, itself at most 1000; truncated says there were more) and stops
        a query that runs longer than the server's time limit.

        Example: SELECT sentence_index, marker, url, supporting_sentence FROM citation_ledger
        WHERE run_id = '...' AND question_id = '...' ORDER BY sentence_index, source_rank
        """
        limit = max(1, min(int(max_rows), MAX_SQL_ROWS))
        try:
            result = await asyncio.to_thread(read_only_query, service.warehouse, query, max_rows=limit,
                                             timeout_s=sql_timeout_s)
        except WarehouseError as exc:
            raise ToolError(str(exc)) from None
        return {"columns": result.columns, "rows": _plain(result.rows), "row_limit": result.row_limit,
                "truncated": result.truncated}

    @server.tool()
    async def runs(limit: Annotated[int, Field(description="Runs listed at most (1 to 200).")] = 20) -> dict[str, Any]:
        """The newest runs (at most limit, itself at most 200) with their status, variant, config and counts:
        questions, answered, reused (from the stage cache), paid model calls, seconds. A served question's run
        is the day's service run, service-<profile>-<variant>-<config>-<YYYYMMDD>."""
        result = await asyncio.to_thread(list_runs, service.warehouse, max(1, min(int(limit), MAX_RUNS)))
        return {"columns": result.columns, "rows": _plain(result.rows)}

    return server


def _checked(service: Service, fields: dict[str, Any]) -> RunRequest:
    """The arguments as a ``/run`` body, checked exactly as ``/run`` checks one (its 422 becomes a tool error)."""
    limit = {"question": service.settings.max_question_chars}
    try:
        request = parse_request(json.dumps(fields).encode("utf-8"), RunRequest, max_chars=limit,
                                max_depth=service.max_depth)
    except BadRequest as exc:
        raise ToolError(f"invalid request: {exc}") from None
    conflicts = steering_conflicts(service.cfg, request.steering(), "the request's")
    if conflicts:
        raise ToolError(f"invalid request: {'; '.join(conflicts)}")
    return request


def _plain(rows: list[tuple]) -> list[list[Any]]:
    """Rows as JSON values (times as ISO text, anything else unknown as its text)."""
    return json.loads(json.dumps([list(r) for r in rows], default=_text))


def _text(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def http_app(server: MCPServer, service: Service, access: Access):
    """The streamable HTTP app (``/mcp``) behind the service's access guard (host names, origin, token)."""
    from mcp.server.transport_security import TransportSecuritySettings

    # The guard checks Host and Origin with `hifirag serve`'s own rules (--allow-host included), so the SDK's
    # localhost-only check would only refuse the names the guard lets through.
    app = server.streamable_http_app(max_request_body_size=service.settings.max_body_bytes,
                                     transport_security=TransportSecuritySettings(
                                         enable_dns_rebinding_protection=False))
    return AccessGuard(app, access)


async def serve_stdio(service: Service) -> None:
    """Serve over this process's stdin and stdout until the client closes them."""
    server = create_mcp_server(service)
    await service.start()
    try:
        await server.run_stdio_async()
    finally:
        await service.stop()


async def serve_http(service: Service, host: str, port: int, access: Access) -> None:
    """Serve at ``http://HOST:PORT/mcp`` until stopped (SIGINT/SIGTERM); questions in flight finish first."""
    import uvicorn

    server = create_mcp_server(service)
    config = uvicorn.Config(http_app(server, service, access), host=host, port=port, log_level="info",
                            timeout_graceful_shutdown=int(service.settings.deadline_s) + 30)
    await service.start()
    try:
        await uvicorn.Server(config).serve()
    finally:
        await service.stop()
