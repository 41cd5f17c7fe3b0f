"""One MCP session with ``hifirag mcp`` over stdio, as an agent holds it: the official SDK's client lists the tools,
``ask``s a question (each progress notification printed as it arrives), then reads the answer's
``citation_ledger`` rows with ``sql``, tries writes, an ATTACH, a COPY TO file, a PRAGMA, an EXPLAIN ANALYZE
that would write and a file outside the warehouse (each refused), a query over the row limit, and lists ``runs``.

The server is the offline default (the local documentation corpus, built on first use under DATA_ROOT; no keys,
no network) with a temporary Prefect server; the question is the first of the docs FAQ set unless given.

    .venv/bin/python tools/show_mcp_session.py /tmp/mcp-session ["Why does Python use indentation ...?"]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hifirag_core.store.warehouse import Warehouse

PROJECT_ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Why does Python use indentation for grouping of statements?"  # docs_faq's first line


def shown(result) -> str:
    """A tool result as the client got it: its structured content, or the error's text."""
    if result.is_error:
        return "ERROR " + " ".join(getattr(c, "text", "") for c in result.content)
    data = result.structured_content or {}
    lines = []
    for key, value in data.items():
        if key == "rows":
            lines += [f"  {key}:"] + [f"    {json.dumps(row, ensure_ascii=False, default=str)}" for row in value]
        else:
            lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    return "\n".join(lines)


async def session(folder: Path, question: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(folder / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "flows.cli", "mcp", "--data-root",
                                                                 str(folder / "data")],
                                   env=env, cwd=str(PROJECT_ROOT))
    began = time.monotonic()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        print(f"  progress {value:g} (+{time.monotonic() - began:.1f} s): {message}")

    with open(folder / "server.log", "w") as log:
        async with stdio_client(params, errlog=log) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=900) as client:
            await client.initialize()
            print("> tools/list")
            print("  " + ", ".join(t.name for t in (await client.list_tools()).tools))
            print(f"> tools/call ask {json.dumps({'question': question})}")
            began = time.monotonic()
            answer = await client.call_tool("ask", {"question": question}, progress_callback=progress)
            print(shown(answer))
            if answer.is_error:
                return
            ids = answer.structured_content
            query = ("SELECT sentence_index, marker, url, heading_path, round(support, 2) AS support, support_method "
                     f"FROM citation_ledger WHERE run_id = '{ids['run_id']}' AND question_id = '{ids['question_id']}' "
                     "ORDER BY sentence_index, source_rank")
            print(f"> tools/call sql {json.dumps({'query': query, 'max_rows': 10})}")
            print(shown(await client.call_tool("sql", {"query": query, "max_rows": 10})))
            tables = Warehouse(folder / "data").tables_dir.resolve()  # the one folder a query may read
            for refused in ("DELETE FROM answers", f"ATTACH '{tables / 'x.duckdb'}' AS x",
                            f"COPY (SELECT 1) TO '{folder.resolve() / 'out.csv'}'", "PRAGMA database_list",
                            f"EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{tables / 'answers' / 'forged.parquet'}'",
                            "SELECT * FROM read_text('/etc/hostname')"):
                print(f"> tools/call sql {json.dumps({'query': refused})}")
                print(shown(await client.call_tool("sql", {"query": refused})))
            print('> tools/call sql {"query": "SELECT * FROM range(100000)", "max_rows": 3}')
            print(shown(await client.call_tool("sql", {"query": "SELECT * FROM range(100000)", "max_rows": 3})))
            print('> tools/call runs {"limit": 3}')
            print(shown(await client.call_tool("runs", {"limit": 3})))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where the data root, Prefect home and server log go")
    parser.add_argument("question", nargs="?", default=QUESTION)
    args = parser.parse_args()
    anyio.run(session, args.folder, args.question)


if __name__ == "__main__":
    main()
