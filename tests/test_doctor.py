"""`hifirag doctor`: one cheap call per configured backend, what is missing, what it costs, no secret printed."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli import app
from tests.llama_server import free_port

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
