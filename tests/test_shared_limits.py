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

from tasks.limits import bucket
from tests import PROJECT_ROOT
from tests.fakes.openai_server import OpenAIFake
from tests.prefect_server import prefect_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


def _workers(api: str, base_url: str, run_id: str, *extra: str, calls: int) -> list[dict]:
    env = {**os.environ, "PREFECT_API_URL": api, "OPENAI_API_KEY": "fake-openai-key"}
    cmd = [sys.executable, "-m", "tests.limits_worker", "--base-url", base_url, "--run-id", run_id,
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
    burst, decay = bucket(rpm)  # 6 at once, then 0.9 a second: never more than 60 in any minute
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
