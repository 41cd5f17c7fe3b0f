"""`hifirag mcp` over stdio, driven by the official MCP SDK's own client, offline: the default backends over the
test site's corpus, no keys, no network.

Over stdio, one session: list the tools, `ask` one question (progress per stage, the answer with citations and ids), `sql`
on its ledger rows (a row limit applies) and with writes (refused), then `runs`. Over streamable HTTP: the service's access rule (no token, 401; beyond loopback without
one, exit 2) and a session with the token. The read-only SQL fence is also checked directly, statement by
statement, without the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hifirag_core.store.queries import read_only_query
from hifirag_core.store.warehouse import Warehouse, WarehouseError
from tests import PROJECT_ROOT
from tests.support.prefect_server import prefect_server, stop_group
from tests.support.service_process import free_port
from tests.support.sitegen import BASE_URL, QUESTIONS, write_examples

BANDWIDTH = QUESTIONS[0]["query"]
TOKEN = "mcp-test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    with prefect_server(home) as url:
        yield {"PREFECT_API_URL": url, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _root(tmp_path: Path, site_dir: Path) -> Path:
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    root = tmp_path / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    return root


def _data(result) -> dict:
    """A tool's result: its structured content (the SDK also sends it as JSON text)."""
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


@pytest.mark.slow
def test_mcp_over_stdio_asks_reads_the_warehouse_read_only_and_lists_runs(tmp_path, site_dir, prefect_api):
    root = _root(tmp_path, site_dir)
    tables = Warehouse(root).tables_dir
    examples = write_examples(tmp_path / "examples.jsonl")
    with open(tmp_path / "mcp.log", "w") as log:
        params = StdioServerParameters(
            command=sys.executable, cwd=str(PROJECT_ROOT),
            args=["-m", "flows.cli", "mcp", "--data-root", str(root), "--set", f"generation.examples={examples}"],
            env={**os.environ, **prefect_api})
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        async def session() -> dict:
            seen: dict = {}
            async with stdio_client(params, errlog=log) as (read, write), \
                    ClientSession(read, write, read_timeout_seconds=600) as client:
                await client.initialize()
                seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
                seen["ask"] = _data(await client.call_tool("ask", {"question": BANDWIDTH, "length": "short"},
                                                           progress_callback=on_progress))
                ask = seen["ask"]
                ledger = ("SELECT sentence_index, marker, url FROM citation_ledger WHERE run_id = "
                          f"'{ask['run_id']}' AND question_id = '{ask['question_id']}' ORDER BY ALL")
                seen["ledger"] = _data(await client.call_tool("sql", {"query": ledger}))
                seen["limited"] = _data(await client.call_tool("sql", {"query": "SELECT * FROM range(50)",
                                                                       "max_rows": 3}))
                seen["bad_depth"] = await client.call_tool("ask", {"question": BANDWIDTH, "depth": 99})
                seen["writes"] = [await client.call_tool("sql", {"query": q}) for q in (
                    "DELETE FROM answers", f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
                    "SELECT 1; DROP VIEW answers", f"ATTACH '{tables / 'x.duckdb'}' AS x", "PRAGMA database_list",
                    f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{tables / 'answers' / 'forged.parquet'}'")]
                seen["plan"] = _data(await client.call_tool("sql", {"query": "EXPLAIN SELECT count(*) FROM answers"}))
                seen["runs"] = _data(await client.call_tool("runs", {}))
            return seen

        seen = anyio.run(session)

    assert seen["tools"] == ["ask", "runs", "sql"]
    ask = seen["ask"]
    assert ask["run_id"].startswith("service-offline-") and ask["question_id"]
    assert ask["citations"] and all(u.startswith(BASE_URL) for u in ask["citations"])
    assert "[1]" in ask["answer"] and "--max-rate" in ask["answer"]
    # one notification per finished stage, numbered in order, each naming its stage
    assert len(progress) >= 5 and [v for v, _ in progress] == list(range(1, len(progress) + 1))
    messages = [m for _, m in progress]
    assert any(m.startswith("**Query plan**") for m in messages)
    assert any(m.startswith("**Sections kept**") for m in messages)
    assert not any("(writing)" in m for m in messages)

    ledger = seen["ledger"]
    assert ledger["columns"] == ["sentence_index", "marker", "url"] and ledger["rows"]
    assert {row[2] for row in ledger["rows"] if row[2]} <= set(ask["citations"])
    assert seen["limited"]["rows"] == [[0], [1], [2]] and seen["limited"]["truncated"] is True

    assert seen["bad_depth"].is_error and "depth: 99" in seen["bad_depth"].content[0].text
    for refused in seen["writes"]:
        assert refused.is_error, refused.content
        assert "read only" in refused.content[0].text or "exactly one" in refused.content[0].text
    assert not (tmp_path / "out.csv").exists()
    assert not (tables / "x.duckdb").exists() and not (tables / "answers" / "forged.parquet").exists()
    (kind, plan), = seen["plan"]["rows"]  # the query's plan, not its rows
    assert kind == "physical_plan" and "READ_PARQUET" in plan

    runs = seen["runs"]
    row = next(dict(zip(runs["columns"], r, strict=True)) for r in runs["rows"] if r[0] == ask["run_id"])
    assert row["questions"] >= 1
    # the request is recorded as the service records its own, under MCP's name
    served = Warehouse(root).query("SELECT endpoint, outcome FROM served_requests WHERE question_id = ?",
                                   [ask["question_id"]])
    assert served.rows == [("mcp:ask", "complete")]


@pytest.mark.slow
def test_mcp_over_http_takes_the_services_token_rule(tmp_path, site_dir, prefect_api):
    """Beyond loopback (bound to every interface) as `hifirag serve` is: no start without the token; with it, every
    request without it refused (401), a foreign host name 421, a foreign page 403, and a session carrying it served,
    whichever of the machine's addresses the client reached it by. Every request goes to 127.0.0.1; a Host header
    naming another address stands for a client on the network."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    root = _root(tmp_path, site_dir)
    env = {**os.environ, **prefect_api, "HIFIRAG_SERVICE_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "flows.cli", "mcp", "--data-root", str(root)]
    # beyond loopback without a token: refused before anything starts, naming the variable
    bare = {k: v for k, v in env.items() if k != "HIFIRAG_SERVICE_TOKEN"}
    refused = subprocess.run([*cmd, "--http", f"0.0.0.0:{free_port()}"], cwd=PROJECT_ROOT, env=bare,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "HIFIRAG_SERVICE_TOKEN" in refused.stderr
    assert refused.stdout == ""

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    lan = f"192.0.2.7:{port}"  # an address of the machine's as a client on the network names it (TEST-NET-1)
    accept = {"Accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    with open(tmp_path / "mcp-http.log", "wb") as log:
        proc = subprocess.Popen([*cmd, "--http", f"0.0.0.0:{port}"], cwd=PROJECT_ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while True:  # listening once the service has warmed up
                assert proc.poll() is None, (tmp_path / "mcp-http.log").read_text()
                try:
                    anonymous = httpx.post(url, json=hello, headers=accept, timeout=5)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "hifirag mcp --http did not listen"
                    time.sleep(0.5)

            def post(**headers: str) -> httpx.Response:
                return httpx.post(url, json=hello, headers={**accept, **headers}, timeout=30)

            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
            assert post(Host=lan).status_code == 401
            assert post(Host=lan, Authorization="Bearer " + TOKEN[:-1]).status_code == 401  # a wrong token
            assert post(Host=lan, Authorization="Basic " + TOKEN).status_code == 401
            assert post(Host="evil.example", Authorization=f"Bearer {TOKEN}").status_code == 421
            assert post(Host=lan, Authorization=f"Bearer {TOKEN}", Origin="https://evil.example").status_code == 403
            assert post(Host=lan, Authorization=f"Bearer {TOKEN}").status_code == 200  # the SDK's own reply

            async def session() -> tuple[list[str], dict]:
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                              timeout=httpx2.Timeout(30, read=300)) as http, \
                        streamable_http_client(url, http_client=http) as (read, write), \
                        ClientSession(read, write) as client:
                    await client.initialize()
                    tools = sorted(t.name for t in (await client.list_tools()).tools)
                    return tools, _data(await client.call_tool("sql", {"query": "SELECT 42 AS answer"}))

            tools, answer = anyio.run(session)

            statuses: list[int] = []

            async def seen(response) -> None:
                statuses.append(response.status_code)

            async def no_token() -> None:
                async with httpx2.AsyncClient(timeout=httpx2.Timeout(30), event_hooks={"response": [seen]}) as http, \
                        streamable_http_client(url, http_client=http) as (read, write), \
                        ClientSession(read, write) as client:
                    await client.initialize()

            with pytest.raises(ExceptionGroup):  # the SDK's client without the token gets no session (MCPError)
                anyio.run(no_token)
            assert statuses == [401]
        finally:
            stop_group(proc, 60)
    assert tools == ["ask", "runs", "sql"]
    assert answer["rows"] == [[42]]
    assert TOKEN not in (tmp_path / "mcp-http.log").read_text()


@pytest.mark.parametrize("sql", [
    "INSERT INTO answers SELECT * FROM answers", "CREATE TABLE t AS SELECT 1", "ATTACH 'x.db'",
    "SET enable_external_access = true", "PRAGMA version", "SELECT 1; SELECT 2", "INSTALL httpfs",
    "COPY (SELECT 1) TO 'out.csv'", "CALL pragma_version()", "EXPLAIN DELETE FROM answers",
    # EXPLAIN ANALYZE runs what it explains, however it is spelt
    "EXPLAIN ANALYZE SELECT 1", "explain /* a comment */ analyse SELECT 1", "EXPLAIN (ANALYZE) SELECT 1",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
])
def test_only_one_read_statement_is_accepted(tmp_path, sql):
    with pytest.raises(WarehouseError, match="read only|exactly one"):
        read_only_query(Warehouse(tmp_path), sql, max_rows=10, timeout_s=5)


def test_no_statement_writes_into_the_warehouse_folder_that_a_query_may_read(tmp_path):
    # The tables folder is the one place the connection may touch, for reading; EXPLAIN ANALYZE COPY ... TO would
    # write there (a forged answers file, read by every view from then on) were EXPLAIN taken at its word.
    from hifirag_core.records import AnswerRecord

    warehouse = Warehouse(tmp_path / "data")
    warehouse.write("answers", [AnswerRecord(text="The real answer.")], run_id="r", stage="answer", question_id="q")
    forged = warehouse.tables_dir / "answers" / "run_id=r" / "forged.parquet"
    before = sorted(p for p in warehouse.tables_dir.rglob("*") if p.is_file())
    for sql in (f"EXPLAIN ANALYZE COPY (SELECT 'forged' AS text) TO '{forged}' (FORMAT parquet)",
                f"COPY (SELECT 'forged' AS text) TO '{forged}' (FORMAT parquet)",
                f"ATTACH '{warehouse.tables_dir / 'x.duckdb'}' AS x"):
        with pytest.raises(WarehouseError, match="read only"):
            read_only_query(warehouse, sql, max_rows=10, timeout_s=5)
    assert sorted(p for p in warehouse.tables_dir.rglob("*") if p.is_file()) == before
    plan = read_only_query(warehouse, "EXPLAIN SELECT text FROM answers", max_rows=10, timeout_s=5)
    assert plan.columns == ["explain_key", "explain_value"] and plan.rows
    assert read_only_query(warehouse, "SELECT text FROM answers", max_rows=10, timeout_s=5).rows == [
        ("The real answer.",)]


def test_a_select_reads_no_file_outside_the_warehouse_and_stops_at_its_time_limit(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not the warehouse's")
    warehouse = Warehouse(tmp_path / "data")
    with pytest.raises(WarehouseError, match="Permission|disabled"):
        read_only_query(warehouse, f"SELECT * FROM read_text('{outside}')", max_rows=10, timeout_s=5)
    with pytest.raises(WarehouseError, match="longer than 0.2 s"):
        read_only_query(warehouse, "SELECT count(*) FROM range(100000000000) a", max_rows=10, timeout_s=0.2)
    result = read_only_query(warehouse, "SELECT count(*) AS n FROM answers", max_rows=10, timeout_s=5)
    assert result.rows == [(0,)] and not result.truncated
