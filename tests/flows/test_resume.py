"""A run killed with SIGKILL mid-way, at three points, resumes to the same rows as a run left alone.

The run is the real command line in its own process group, against fakes whose latency keeps it in
the stage we want long enough to kill it there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hifirag_core.store.warehouse import Warehouse
from tests import PROJECT_ROOT
from tests.conftest import corpus_web
from tests.support.fakes.services import FakeServices, fake_services
from tests.support.prefect_server import prefect_server

pytestmark = pytest.mark.slow
TABLES = ("questions", "query_plans", "search_results", "url_decisions", "pages", "sections", "section_decisions",
          "sufficiency_checks", "drafts", "citations", "answers", "llm_calls", "stage_runs", "runs")


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    """One Prefect server for every run of this module: each killed or resumed run is a plain client."""
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


def _start(fakes: FakeServices, questions: Path, root: Path, examples: Path, api: str,
           extra: list[str] = ()) -> subprocess.Popen:
    overrides = [*fakes.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
                 f"generation.examples={examples}", "limits.concurrency=2"]
    cmd = [sys.executable, "-m", "flows.cli", "run", str(questions), "--data-root", str(root), *extra]
    for pair in overrides:
        cmd += ["--set", pair]
    env = {**os.environ, **fakes.env, "PREFECT_API_URL": api,
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(root / "cache" / "prefect-results")}
    return subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _counts(root: Path) -> dict[str, int]:
    w = Warehouse(root)
    run_ids = [r for (r,) in w.query("SELECT run_id FROM runs").rows]
    assert len(run_ids) == 1
    counts = {t: w.query(f"SELECT count(*) FROM {t}").rows[0][0] for t in TABLES}
    dupes = w.query("SELECT count(*) FROM (SELECT question_id, stage, round FROM stage_runs "
                    "GROUP BY ALL HAVING count(*) > 1)").rows[0][0]
    assert dupes == 0
    return counts


def _copy_corpus(src: Path, dst: Path) -> Path:
    (dst / "corpus").mkdir(parents=True)
    (dst / "corpus" / "docs").symlink_to(src / "corpus" / "docs")
    (dst / "blobs").symlink_to(src / "blobs")
    return dst


POINTS: dict[str, Callable[[FakeServices], int]] = {
    "search": lambda f: f.google.count(),
    "fetch": lambda f: f.scrapingdog.count(),
    "generation": lambda f: f.gemini.kinds["draft"],
}


def test_sigkill_at_three_points_then_rerun_gives_the_rows_of_an_uninterrupted_run(
        data_root, questions_file, examples_file, tmp_path, prefect_api):
    search, page = corpus_web(data_root)
    with fake_services(search=search, page=page, search_latency=1.0,
                       scrape_latency=1.0, llm_latency={"filter": 0.2, "writer": 1.5}) as fakes:
        reference = _copy_corpus(data_root, tmp_path / "reference")
        done = _start(fakes, questions_file, reference, examples_file, prefect_api)
        out, _ = done.communicate(timeout=600)
        assert done.returncode == 0, out.decode()[-3000:]
        expected = _counts(reference)

        for point, progress in POINTS.items():
            killed_root = _copy_corpus(data_root, tmp_path / f"killed-in-{point}")
            base = progress(fakes)
            proc = _start(fakes, questions_file, killed_root, examples_file, prefect_api)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and progress(fakes) == base:
                time.sleep(0.05)
            assert proc.poll() is None, f"the run ended before it reached {point}"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

            resumed = _start(fakes, questions_file, killed_root, examples_file, prefect_api)
            out, _ = resumed.communicate(timeout=600)
            assert resumed.returncode == 0, out.decode()[-3000:]
            assert _counts(killed_root) == expected, point
            (computed,) = Warehouse(killed_root).query("SELECT stage_computations FROM runs").rows[0]
            if point != "search":  # what finished before the kill was not done again
                assert computed < 30, (point, computed)


def test_a_run_killed_in_a_follow_up_round_resumes_there_without_asking_twice(
        data_root, examples_file, tmp_path, prefect_api):
    """final_deep with the models on the fakes: killed while a follow-up round searches, then run again; the
    resumed run equals an uninterrupted one, and the round's plan (a paid call) is not asked for again."""
    from tests.flows.test_research import ONE_PAGE, TWO_PART

    questions = tmp_path / "two-part.jsonl"
    questions.write_text(json.dumps({"iid": "R1", "query": TWO_PART}) + "\n")
    extra = ["--variant", "final_deep", *[a for o in (*ONE_PAGE, "limits.caps=on") for a in ("--set", o)]]
    search, page = corpus_web(data_root)
    with fake_services(search=search, page=page, search_latency=1.0, scrape_latency=0.2,
                       llm_latency={"filter": 0.1, "writer": 0.5}) as fakes:
        reference = _copy_corpus(data_root, tmp_path / "reference")
        done = _start(fakes, questions, reference, examples_file, prefect_api, extra)
        out, _ = done.communicate(timeout=600)
        assert done.returncode == 0, out.decode()[-3000:]
        expected = _counts(reference)
        plans = fakes.gemini.kinds["followup"]
        assert plans == 1 and expected["stage_runs"] > 12  # it looked again, once

        killed_root = _copy_corpus(data_root, tmp_path / "killed-in-a-round")
        searches = fakes.google.count()
        proc = _start(fakes, questions, killed_root, examples_file, prefect_api, extra)
        deadline = time.monotonic() + 300
        # the first pass searches twice; the round's first search means its plan is done and stored
        while time.monotonic() < deadline and proc.poll() is None and fakes.google.count() < searches + 3:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before its follow-up round searched"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert fakes.gemini.kinds["followup"] == 2 * plans

        resumed = _start(fakes, questions, killed_root, examples_file, prefect_api, extra)
        out, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, out.decode()[-3000:]
        assert _counts(killed_root) == expected
        assert fakes.gemini.kinds["followup"] == 2 * plans  # the round's plan came from the cache
        rounds = Warehouse(killed_root).query("SELECT DISTINCT round FROM stage_runs ORDER BY round").rows
        assert rounds == [(0,), (1,)]
