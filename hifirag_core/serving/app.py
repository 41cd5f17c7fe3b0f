"""The HTTP side of the service: the FastAPI app over one ``Service``, its body limit, and serving it.

``GET /health``, ``POST /evaluate`` and the streaming ``POST /run`` of the MMU-RAGent contract
(``hifirag_core.serving.contract``), and the read-only pages at ``/`` (``hifirag_core.serving.pages``); bad bodies get
422 with what to send (a ``follows`` naming an answer that is unknown, another run's or not given included), a full
service 503 with
``Retry-After``, an oversized body 413, a body that is not ``application/json`` 415. Who may call it (its own
host names and origin, its token beyond loopback) is ``hifirag_core.serving.access``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hifirag_core.pipeline.question_steering import steering_conflicts
from hifirag_core.serving.access import TOKEN_ENV, Access, AccessGuard, session_response
from hifirag_core.serving.contract import MEDIA_TYPE, BadRequest, EvaluateRequest, RunRequest, parse_request
from hifirag_core.serving.pages import add_pages
from hifirag_core.serving.rendering import rendered_stream
from hifirag_core.serving.service import Service, Ticket, log
from hifirag_core.turns import AnswerRef, EarlierTurn, ThreadError


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413, whether announced by Content-Length or not."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        announced = dict(scope.get("headers") or []).get(b"content-length")
        if announced is not None and announced.isdigit() and int(announced) > self.max_bytes:
            await _too_large(self.max_bytes)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:  # raised inside the route's body read; answered by the handler below
                raise StarletteHTTPException(413, _too_large_text(self.max_bytes))
            return message

        await self.app(scope, limited, send)


def _too_large_text(max_bytes: int) -> str:
    return f"the request body is larger than {max_bytes:,} bytes; send a shorter question"


def _too_large(max_bytes: int) -> JSONResponse:
    return JSONResponse({"error": _too_large_text(max_bytes)}, status_code=413)


DISK_RETRY_S = 60  # a full disk is freed by a person: ask again in a minute


def _error(status: int, message: str, detail: list[str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, **({"detail": detail} if detail else {})}, status_code=status)


def create_app(service: Service, access: Access | None = None) -> ASGIApp:
    """The ASGI app (FastAPI) over one :class:`Service`, behind the access guard and the body size limit
    (``access``: None, loopback without a token)."""
    settings = service.settings
    access = access or Access.for_bind("127.0.0.1")

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        await service.start()
        yield
        await service.stop()

    app = FastAPI(title="HiFi-RAG (MMU-RAGent API)", lifespan=lifespan,
                  description="The MMU-RAGent text-to-text contract over the HiFi-RAG pipeline.")

    async def body(request: Request, model):
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":  # a cross-site form or no-cors fetch cannot send this type
            shown = media_type or "none"
            return _error(415, f"the body must be JSON sent as Content-Type: application/json (got {shown})")
        raw = await request.body()
        try:
            limits = {"question": settings.max_question_chars, "query": settings.max_question_chars, "iid": 200}
            parsed = parse_request(raw, model, max_chars={k: v for k, v in limits.items() if k in model.model_fields},
                                   max_depth=service.max_depth)
        except BadRequest as exc:
            return _error(422, f"invalid request body: {exc}", detail=exc.problems)
        # with the service's own steering (--set steer.*), as `hifirag run` checks a question file's lines
        conflicts = steering_conflicts(service.cfg, parsed.steering(), "the request's")
        if conflicts:
            return _error(422, f"invalid request body: {conflicts[0]}", detail=conflicts)
        return parsed

    async def earlier(parsed) -> EarlierTurn | None | JSONResponse:
        """The answer a follow-up names, read from the warehouse; 422 when it cannot be followed."""
        if parsed.follows is None:
            return None
        try:
            return await asyncio.to_thread(service.earlier_turn, parsed.follows)
        except ThreadError as exc:
            return _error(422, f"invalid request body: {exc}", detail=[str(exc)])

    def busy() -> JSONResponse:
        wait = service.gate.retry_after()
        return JSONResponse({"error": f"the service is answering {service.gate.capacity} questions, its limit; "
                                      f"retry in about {wait} s", "retry_after_s": wait},
                            status_code=503, headers={"Retry-After": str(wait)})

    def refused() -> JSONResponse | None:
        """503 with the reason while the disk is full (the service takes no question it could not store)."""
        reason = service.disk_problem()
        if reason is None:
            return None
        return JSONResponse({"error": reason, "retry_after_s": DISK_RETRY_S}, status_code=503,
                            headers={"Retry-After": str(DISK_RETRY_S)})

    @app.get("/health")
    async def health(request: Request) -> dict:
        """Liveness; with the token (or without one on loopback), also what the service runs."""
        return service.health() if request.state.signed_in else {"status": "ok"}

    @app.get("/session", include_in_schema=False)
    async def session(request: Request) -> Response:
        """The pages' sign-in: ``Authorization: Bearer`` in, an HttpOnly, SameSite=Strict cookie out."""
        return session_response(access, request.headers.get("authorization"), request.url.scheme == "https")

    @app.post("/evaluate", openapi_extra=_body_schema(EvaluateRequest))
    async def evaluate(request: Request) -> Response:
        """The static evaluation: ``{"query", "iid"}`` -> ``{"query_id", "generated_response"}``."""
        parsed = await body(request, EvaluateRequest)
        if isinstance(parsed, Response):
            return parsed
        if isinstance(turn := await earlier(parsed), Response):
            return turn
        if (no := refused()) is not None:
            return no
        ticket = service.admit(parsed.query, "/evaluate", parsed.iid, parsed.steering(), turn)
        if ticket is None:
            return busy()
        text = await service.evaluate(ticket)
        return JSONResponse({"query_id": parsed.iid, "generated_response": text},
                            headers=_ids(ticket))

    @app.post("/run", openapi_extra=_body_schema(RunRequest))
    async def run(request: Request) -> Response:
        """The streaming answer: ``{"question"}`` -> ``data: {json}`` messages until ``complete``."""
        parsed = await body(request, RunRequest)
        if isinstance(parsed, Response):
            return parsed
        if isinstance(turn := await earlier(parsed), Response):
            return turn
        if (no := refused()) is not None:
            return no
        ticket = service.admit(parsed.question, "/run", steering=parsed.steering(), earlier=turn)
        if ticket is None:
            return busy()
        stream = rendered_stream(service.stream(ticket)) if parsed.render == "html" else service.stream(ticket)
        return StreamingResponse(stream, media_type=f"{MEDIA_TYPE}; charset=utf-8",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **_ids(ticket)})

    add_pages(app, service.warehouse, settings.data_root, TOKEN_ENV if access.token is not None else None,
              max_depth=service.max_depth)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error", exc_info=(type(exc), exc, exc.__traceback__))
        return _error(500, "internal error; the service log has the details")

    return AccessGuard(BodyLimit(app, settings.max_body_bytes), access)


def _ids(ticket: Ticket) -> dict[str, str]:
    """Where the request's rows are (outside the contract's body, so any client may ignore them), and the answer
    id a follow-up question names as ``follows`` (percent-encoded, as the question id)."""
    run_id, qid = ticket.plan.run_id, ticket.question.id
    return {"X-HiFiRAG-Run-Id": run_id, "X-HiFiRAG-Question-Id": quote(qid, safe=""),
            "X-HiFiRAG-Answer-Id": quote(AnswerRef(run_id, qid).id, safe="/")}


def _body_schema(model) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


def serve(service: Service, host: str, port: int, access: Access) -> None:
    """Run the service until it is stopped (SIGINT/SIGTERM): in-flight questions finish and are recorded."""
    import uvicorn

    from hifirag_core.secrets import RedactingFilter

    for name in ("uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).addFilter(RedactingFilter())
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # Prefect's logging setup would otherwise decide whether these lines show
    uvicorn.run(create_app(service, access), host=host, port=port, log_level="info",
                timeout_graceful_shutdown=int(service.settings.deadline_s) + 30)
