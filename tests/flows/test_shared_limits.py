"""A run's rate limit and budget hold for the run as a whole when its calls come from several processes.

Two worker processes call one fake provider through the real OpenAI adapter. With the ledger on the
Prefect server they stay together within one requests-per-minute limit and one budget; counted per
process, as they were before, each would use the whole of both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tasks.shared_limits import bucket
from tests import PROJECT_ROOT
from tests.support.fakes.openai_server import OpenAIFake
from tests.support.prefect_server import prefect_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


def _workers(api: str, base_url: str, run_id: str, *extra: str, calls: int) -> list[dict]:
    env = {**os.environ, "PREFECT_API_URL": api, "OPENAI_API_KEY": "fake-openai-key"}
    cmd = [sys.executable, "-m", "tests.support.limits_worker", "--base-url", base_url, "--run-id", run_id,
           "--calls", str(calls), *extra]
    procs = [subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    results = []
    for proc in procs:
        out, errors = proc.communicate(timeout=300)
        assert proc.returncode == 0, errors.decode()[-3000:]
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def _most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u - t <= window) for i, t in enumerate(times))


def test_two_processes_share_one_requests_per_minute_limit(prefect_api):
    rpm = 60.0
    burst, decay = bucket(rpm)  # 6 at once, then 0.8 a second: never more than 54 in any minute
    with OpenAIFake() as fake:
        _workers(prefect_api, f"{fake.base_url}/v1", "shared-rpm", "--rpm", str(rpm), calls=8)
        times = [r.at for r in fake.requests]
    assert len(times) == 16
    span = max(times) - min(times)
    # 16 calls at 60 rpm: the burst, then one every 1.1 s; counted per process they would all go at once
    assert span >= (16 - burst) / decay - 1.0
    for window in (2.0, 5.0):
        assert _most_in_any_window(times, window) <= burst + decay * window + 1


def test_counted_per_process_the_same_calls_go_at_once(prefect_api):
    with OpenAIFake() as fake:
        _workers(prefect_api, f"{fake.base_url}/v1", "local-rpm", "--rpm", "60", "--local", calls=8)
        times = [r.at for r in fake.requests]
    assert len(times) == 16 and _most_in_any_window(times, 5.0) > bucket(60.0)[0] + bucket(60.0)[1] * 5 + 1


def test_two_processes_share_one_budget(prefect_api):
    budget = 400
    with OpenAIFake() as fake:
        shared = _workers(prefect_api, f"{fake.base_url}/v1", "shared-budget", "--budget-tokens", str(budget),
                          calls=40)
        spent_shared = sum(r["tokens"] for r in shared)
        per_call = spent_shared / max(1, sum(r["statuses"].get("ok", 0) for r in shared))
        local = _workers(prefect_api, f"{fake.base_url}/v1", "local-budget", "--budget-tokens", str(budget),
                         "--local", calls=40)
    spent_local = sum(r["tokens"] for r in local)
    # Together they stop at the budget, less the one call each may have had in flight when it ran out.
    assert budget <= spent_shared <= budget + 2 * per_call
    assert all(r["statuses"].get("budget_exceeded", 0) > 0 for r in shared)
    # Counted per process, each spends the whole budget.
    assert spent_local >= 2 * budget


def _spent(root) -> dict[str, int]:
    """A warehouse's LLM calls: how many were sent (ok) and refused for the budget, and the tokens paid."""
    from hifirag_core.store.warehouse import Warehouse

    (sent, refused, tokens), = Warehouse(root).query(
        "SELECT count(*) FILTER (WHERE status = 'ok'), count(*) FILTER (WHERE status = 'budget_exceeded'), "
        "coalesce(sum(tokens_in + tokens_out) FILTER (WHERE status = 'ok'), 0) FROM llm_calls").rows
    return {"sent": sent, "refused_for_budget": refused, "tokens": int(tokens)}


SERVICE_AND_RUN_RPM = 30
SERVICE_AND_RUN_BUDGET = 15_000  # tokens; the three questions of each process ask about 11,500 each


def test_the_service_and_a_batch_run_share_one_rate_limit_and_one_budget(prefect_api, tmp_path, site_dir):
    """``hifirag serve`` and ``hifirag run`` on the thread runner, both with PREFECT_API_URL set, against one
    OpenAI-compatible fake (every LLM role) with a limit of 30 requests per minute and one budget of 15,000
    tokens named ``limits.budget_name``. Counted per process, each would send its 27 calls at once and
    spend its 11,500 tokens: 54 calls in a minute, 23,000 tokens."""
    import threading
    import uuid

    import httpx

    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at
    from tests.support.service_process import hifirag_service
    from tests.support.sitegen import BASE_URL, QUESTIONS, write_examples, write_questions

    roots = {}
    for name in ("service", "batch"):
        roots[name] = tmp_path / name / "data"
        corpus = corpus_at(roots[name], "docs")
        build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    examples = write_examples(tmp_path / "examples.jsonl")
    questions = write_questions(tmp_path / "questions.jsonl")
    rpm, budget = SERVICE_AND_RUN_RPM, SERVICE_AND_RUN_BUDGET
    with OpenAIFake() as fake:
        sets = [f"generation.examples={examples}", "backends.filter_llm=openai", "backends.writer_llm=openai",
                f"models.openai_base_url={fake.base_url}/v1", "models.filter=fake-filter", "models.writer=fake-writer",
                f"limits.provider_rpm={json.dumps({'openai': rpm})}", f"limits.budget_tokens={budget}",
                f"limits.budget_name=service-and-nightly-{uuid.uuid4().hex[:8]}"]
        args = [part for s in sets for part in ("--set", s)]
        env = {"PREFECT_API_URL": prefect_api, "OPENAI_API_KEY": "fake-openai-key"}
        with hifirag_service(roots["service"], *args, env=env) as url:
            warmed = len(fake.requests)
            batch = subprocess.Popen([sys.executable, "-m", "flows.cli", "run", str(questions), "--data-root",
                                      str(roots["batch"]), *args], cwd=PROJECT_ROOT, env={**os.environ, **env},
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            replies: list[int] = []

            def ask(question: dict) -> None:
                reply = httpx.post(f"{url}/evaluate", json={"query": question["query"], "iid": question["iid"]},
                                   timeout=600)
                replies.append(reply.status_code)

            askers = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
            for asker in askers:
                asker.start()
            out, _ = batch.communicate(timeout=900)
            for asker in askers:
                asker.join(timeout=900)
        times = sorted(r.at for r in fake.requests)
    assert batch.returncode == 0, out.decode()[-3000:]
    assert replies == [200, 200, 200]
    counts = {name: _spent(root) for name, root in roots.items()}
    in_any_minute = _most_in_any_window(times, 60.0)
    spent = sum(c["tokens"] for c in counts.values())
    print(f"\n[service + batch run] limit {rpm} requests per minute, budget {budget} tokens "
          f"({warmed} calls before the run)")
    for name, c in counts.items():
        print(f"  {name:<8} sent {c['sent']:>3} calls, refused {c['refused_for_budget']:>3} for the budget, "
              f"{c['tokens']:>6} tokens")
    print(f"  together: {len(times)} calls reached the provider over {times[-1] - times[0]:.0f} s, at most "
          f"{in_any_minute} in any 60 s; {spent} tokens spent of {budget}")
    assert all(c["sent"] > 0 for c in counts.values())
    assert in_any_minute <= rpm
    # One budget: spent, then refused in both processes; over it by at most the calls in flight when it ran out.
    assert all(c["refused_for_budget"] > 0 for c in counts.values())
    assert budget <= spent <= budget + 2 * 1_000  # a call of these questions is under 1,000 tokens


def test_with_the_server_away_paid_calls_fail_closed_and_say_why(tmp_path, caplog, monkeypatch):
    """The server that counts the limits stops in the middle: the next paid calls are not made (retried
    first, as a restart would be ridden out), their rows say why, and a finished call's cost is kept until
    a server answers again. Both ways a call asks the server: its budget, and its start (rpm only)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from hifirag_core.backends.factory import build_chat_model, build_guards
    from hifirag_core.config import build_config
    from hifirag_core.errors import TransientError
    from hifirag_core.types import ChatTurn
    from tasks.shared_limits import PrefectLedger

    def ask(chat, n: int):
        return chat.chat([ChatTurn("user", f"Say hello, call {n}.")], stage="query_plan", prompt_name="probe",
                         prompt_hash="probe").call

    monkeypatch.setenv("OPENAI_API_KEY", "fake-openai-key")
    with OpenAIFake() as fake:
        limits = {"provider_rpm": {"openai": 600}, "retries": 1, "retry_base_delay_s": 0.1,
                  "provider_concurrency": {"openai": 1}}
        chats, ledgers = {}, {}
        for name, budget in (("budget", 100_000), ("rpm only", None)):
            cfg = build_config(overrides={
                "backends": {"filter_llm": "openai"},
                "models": {"openai_base_url": f"{fake.base_url}/v1", "filter": "fake-model"},
                "limits": {**limits, "budget_tokens": budget}})
            ledgers[name] = PrefectLedger(f"server-away-{name.replace(' ', '-')}", cfg.limits)
            chats[name] = build_chat_model("filter", cfg, guards=build_guards(cfg, ledger=ledgers[name]))
        with prefect_server(tmp_path / "prefect-home") as api, temporary_settings(updates={PREFECT_API_URL: api}):
            before = {name: ask(chat, 0) for name, chat in chats.items()}
            sent_before = len(fake.requests)
            spent_before = ledgers["budget"].spent()
        # the server has stopped; Prefect still points at it
        with temporary_settings(updates={PREFECT_API_URL: api}):
            after = {name: [ask(chat, n) for n in (1, 2)] for name, chat in chats.items()}
            with pytest.raises(TransientError, match="does not answer"):
                ledgers["budget"].spent()
            with caplog.at_level("WARNING", logger="tasks.shared_limits"):
                ledgers["budget"].spend(0.0, 123)  # a call that finished as the server went: no error, kept
        sent_after = len(fake.requests) - sent_before
        # a server answers again (here a new one, its database empty): the limits are made again, the kept
        # cost is added with the next
        with prefect_server(tmp_path / "prefect-home-2") as api2, temporary_settings(updates={PREFECT_API_URL: api2}):
            ledgers["budget"].spend(0.0, 7)
            spent_again = ledgers["budget"].spent()
            again = ask(chats["rpm only"], 3)
    print(f"\n[server away] before it stopped: {({n: c.status for n, c in before.items()})}, "
          f"{spent_before[1]} tokens counted")
    for name, calls in after.items():
        print(f"  after, {name}: {[c.status for c in calls]} in {[c.attempts for c in calls]} attempts, "
              f"{[round(c.latency_s, 1) for c in calls]} s each")
    print(f"  requests that reached the provider while it was away: {sent_after}")
    print(f"  row error: {after['rpm only'][0].error}")
    print(f"  warning: {caplog.records[-1].getMessage()}")
    print(f"  a new server: budget counter {spent_again[1]} tokens, a call with rpm only: {again.status}")
    assert all(c.status == "ok" for c in before.values()) and spent_before[1] > 0
    for calls in after.values():
        assert all(c.status != "ok" and "does not answer" in c.error and "not made" in c.error for c in calls)
        assert all(c.attempts == 2 for c in calls)  # retried once, as limits.retries says
    assert sent_after == 0
    assert "is added when the server answers" in caplog.records[-1].getMessage()
    assert spent_again == (0.0, 123 + 7)
    assert again.status == "ok"
