"""`hifirag doctor`: one cheap call per configured backend, what is missing, what it costs, no secret printed."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from tests import SUPPORT
from tests.support.llama_server import free_port

runner = CliRunner()


def test_every_real_backend_checked_against_the_fakes_and_no_key_printed(web, data_root):
    sets = web.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog", reddit="praw")
    args = ["doctor", *[a for pair in sets for a in ("--set", pair)], "--data-root", str(data_root),
            "--reddit-url", "https://www.reddit.com/r/tidewater/comments/abc123/sync/",
            "--http-url", "https://docs.tidewater.example/sync.html"]
    result = runner.invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output  # 1 when any check failed or something is missing
    out = result.output
    for role in ("embeddings", "filter model", "writer model", "search", "fetch", "reddit"):
        assert role in out
    assert "$0.3/M tokens in" in out and "$1.25/M tokens in" in out and "$0.005 per query" in out
    assert web.gemini.kinds["query_plan"] == 2 and web.google.count() == 1 and web.scrapingdog.count() == 1
    for value in web.env.values():  # the keys went to the fakes, never to the screen
        assert value not in out


def test_a_missing_key_and_a_server_that_is_not_there(monkeypatch, data_root):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    result = runner.invoke(app, ["doctor", "--set", "backends.writer_llm=gemini", "--set", "backends.filter_llm=openai",
                                 "--set", f"models.openai_base_url={dead}", "--set", "models.openai_api_key_optional=true",
                                 "--data-root", str(data_root)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert "set GEMINI_API_KEY or GOOGLE_API_KEY" in result.output
    assert "failed" in result.output and "connection error" in result.output


def _doctor_on(base_url: str, data_root) -> str:
    result = runner.invoke(app, ["doctor", "--set", "backends.filter_llm=openai", "--set", "backends.writer_llm=offline",
                                 "--set", f"models.openai_base_url={base_url}", "--set", "models.filter=m",
                                 "--set", "models.openai_api_key_optional=true", "--data-root", str(data_root)],
                           env={"COLUMNS": "400"})
    assert result.exit_code == 1, result.output
    return " ".join(result.output.split())


def test_a_server_error_is_reported_as_one(data_root):
    from tests.support.fakes.openai_server import OpenAIFake

    with OpenAIFake(api_key=None) as fake:
        fault = OpenAIFake.server_error(500)
        fault.match = lambda request: request.method == "POST"  # not doctor's look at /models first
        fake.inject(fault)
        out = _doctor_on(f"{fake.base_url}/v1", data_root)
    assert "server error: the server failed the completion with HTTP 500" in out


def test_a_server_that_crashes_on_the_completion_is_reported_as_a_crash(tmp_path, data_root):
    import subprocess
    import sys
    import time

    import httpx

    port = free_port()
    script = SUPPORT / "fakes" / "crashing_server.py"
    server = subprocess.Popen([sys.executable, str(script), str(port)], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        out = _doctor_on(f"http://127.0.0.1:{port}/v1", data_root)
        assert server.wait(10) == -11  # it really died of SIGSEGV
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert "the server crashed during the chat completion" in out
    assert "SIGSEGV" in out and "AMX" in out


def test_each_provider_of_a_fused_search_gets_its_own_line(web, data_root, tmp_path):
    """``search.providers``: every provider is checked once, the folder by the files it would index."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "backup.md").write_text("# Backups\n\nRun the backup nightly.\n", encoding="utf-8")
    (notes / "image.png").write_bytes(b"not read")
    sets = web.config_overrides_pairs(llm="offline", search="google", fetch="scrapingdog", reddit="recorded")
    sets = [s for s in sets if not s.startswith("backends.search=")]
    args = ["doctor", *[a for pair in sets for a in ("--set", pair)], "--set", "search.providers=google,scrapingdog,folder",
            "--set", f"search.folder={notes}", "--data-root", str(data_root),
            "--http-url", "https://docs.tidewater.example/sync.html"]
    result = runner.invoke(app, args, env={"COLUMNS": "250"})
    out = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert web.google.count() == 1 and "1 file(s) to index" in out
    lines = [line for line in result.output.splitlines() if "search" in line]
    assert any("google" in line for line in lines) and any("folder" in line for line in lines)
    assert any("scrapingdog" in line and "result(s)" in line for line in lines)
