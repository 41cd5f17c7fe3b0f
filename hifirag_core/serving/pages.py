"""The service's own pages: ask a question and watch the answer stream, inspect an answer sentence by sentence
down to the stored page snapshot, inspect a run's funnel and costs. Server-rendered (Jinja2, autoescaped), with
one static script for the stream and no front-end build.

Hostile pages are expected: every page text is escaped by the templates, and an answer's Markdown is rendered
with raw HTML off and sanitised by an allow-list (``hifirag_core.serving.rendering``); each response carries a
Content-Security-Policy that allows scripts only from this origin (so no inline script, no event attribute,
no ``javascript:`` URL runs); a snapshot is served as plain text with a CSP sandbox, never as HTML, and only
for a content hash some run fetched. Nothing here writes: runs and snapshots are read-only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from hifirag_core.serving.inspect import (
    SHA256,
    answer_view,
    funnel_svg_bars,
    recent_runs,
    run_view,
    thread_chain,
)
from hifirag_core.serving.rendering import LedgerSentence, render_answer, render_markdown
from hifirag_core.steering import LENGTHS
from hifirag_core.store.blobs import blob_store
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.turns import ThreadError, parse_answer_id

WEB = Path(__file__).parent / "web"
# Scripts, styles and connections only from this origin: no inline script, event attribute or javascript: URL.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
# A stored page: nothing in it may run or load, whatever a browser makes of it.
SNAPSHOT_CSP = "sandbox; default-src 'none'"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
SNAPSHOT_TEXT_LIMIT = 2_000_000  # characters shown of a stored page


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(WEB / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["q"] = lambda s: quote(str(s), safe="")
    return env


def add_pages(app: FastAPI, warehouse: Warehouse, data_root: Path, token_env: str | None = None, *,
              max_depth: int = 0) -> None:
    """The pages at ``/``, ``/runs/...``, ``/snapshots/...`` and ``/signin``, and their static scripts and style.
    ``token_env``: the variable holding the token the sign-in asks for (None: the service has no token);
    ``max_depth``: the most follow-up rounds the Ask form offers (the service's)."""
    env = _environment()
    blobs = blob_store(data_root)
    app.mount("/static", StaticFiles(directory=WEB / "static"), name="static")

    def page(template: str, status: int = 200, **context) -> HTMLResponse:
        html = env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status, headers={"Content-Security-Policy": PAGE_CSP, **SECURITY_HEADERS})

    def missing(what: str) -> HTMLResponse:
        return page("missing.html", 404, what=what)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def ask(follows: str | None = None, question: str | None = None) -> HTMLResponse:
        """The Ask page; ``follows`` (an answer id, from an answer page's Follow up box): the thread up to that
        answer, and the follow-up box under it holding ``question``, for the reader to send (a GET spends nothing)."""
        thread, problem = [], None
        if follows:
            try:
                ref = parse_answer_id(follows)
                thread = (await asyncio.to_thread(thread_chain, warehouse, ref.run_id, ref.question_id))[0]
                problem = None if thread else f"no answer {ref.id} to follow up"
            except ThreadError as exc:
                problem = str(exc)
        turns = [(t, Markup(render_markdown(t.answer))) for t in thread]
        return page("ask.html", runs=await asyncio.to_thread(recent_runs, warehouse), max_depth=max_depth,
                    lengths=LENGTHS, thread=turns, follows=thread[-1].answer_id if thread else None,
                    follow_question=question or "", thread_problem=problem)

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    async def run(run_id: str) -> HTMLResponse:
        view = await asyncio.to_thread(run_view, warehouse, run_id)
        if view is None:
            return missing(f"run {run_id}")
        return page("run.html", view=view, bars=funnel_svg_bars(view.funnel))

    @app.get("/runs/{run_id}/answers/{question_id:path}", response_class=HTMLResponse, include_in_schema=False)
    async def answer(run_id: str, question_id: str, s: int | None = None) -> HTMLResponse:
        view = await asyncio.to_thread(answer_view, warehouse, run_id, question_id)
        if view is None:
            return missing(f"question {question_id} of run {run_id}")
        selected = next((x for x in view.sentences if x.index == s), None)
        rendered = render_answer(view.text, [LedgerSentence(x.index, x.text, tuple(x.markers)) for x in view.sentences],
                                 selected.index if selected else None, {x.index for x in view.sentences if x.supports})
        unplaced = [x for x in view.sentences if x.index in set(rendered.missing)]
        claim = Markup(rendered.selected_html) if rendered.selected_html else None
        return page("answer.html", view=view, selected=selected, rendered=Markup(rendered.html), unplaced=unplaced,
                    text_html=Markup(render_markdown(view.text)), claim_html=claim,
                    earlier=[(t, Markup(render_markdown(t.answer))) for t in view.thread[:-1]])

    def stored(sha: str) -> tuple[bytes, dict] | None:
        if not SHA256.match(sha) or sha not in blobs:
            return None
        rows = warehouse.query("SELECT url, final_url, fetched_at, content_type, kind, title FROM pages "
                               "WHERE content_sha256 = ? ORDER BY fetched_at DESC LIMIT 1", [sha])
        if not rows.rows:  # only what some run fetched is served
            return None
        return blobs.get(sha), dict(zip(rows.columns, rows.rows[0], strict=True))

    @app.get("/snapshots/{sha}", response_class=HTMLResponse, include_in_schema=False)
    async def snapshot(sha: str) -> HTMLResponse:
        found = await asyncio.to_thread(stored, sha)
        if found is None:
            return missing(f"snapshot {sha}")
        data, meta = found
        binary = meta["kind"] in ("pdf", "binary")
        text = None if binary else data.decode("utf-8", errors="replace")[:SNAPSHOT_TEXT_LIMIT]
        return page("snapshot.html", sha=sha, meta=meta, text=text, n_bytes=len(data))

    @app.get("/snapshots/{sha}/raw", include_in_schema=False)
    async def snapshot_raw(sha: str) -> Response:
        found = await asyncio.to_thread(stored, sha)
        if found is None:
            return PlainTextResponse("no such snapshot", 404)
        data, meta = found
        headers = {"Content-Security-Policy": SNAPSHOT_CSP, **SECURITY_HEADERS}
        if meta["kind"] in ("pdf", "binary"):
            return Response(data, media_type="application/octet-stream",
                            headers={**headers, "Content-Disposition": f'attachment; filename="{sha}"'})
        return Response(data, media_type="text/plain; charset=utf-8", headers=headers)

    @app.get("/signin", response_class=HTMLResponse, include_in_schema=False)
    async def signin() -> HTMLResponse:
        return page("signin.html", needs_token=token_env is not None, token_env=token_env)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)
