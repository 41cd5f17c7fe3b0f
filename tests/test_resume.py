"""A run killed with SIGKILL mid-way, at three points, resumes to the same rows as a run left alone.

The run is the real command line in its own process group, against fakes whose latency keeps it in
the stage we want long enough to kill it there.
"""

from __future__ import annotations

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
from tests.fakes.services import FakeServices, fake_services
from tests.prefect_server import prefect_server

pytestmark = pytest.mark.slow
TABLES = ("questions", "query_plans", "search_results", "url_decisions", "pages", "sections", "section_decisions",
          "drafts", "citations", "answers", "llm_calls", "stage_runs", "runs")


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    """One Prefect server for every run of this module: each killed or resumed run is a plain client."""
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as url:
        yield url


def _start(fakes: FakeServices, questions: Path, root: Path, examples: Path, api: str) -> subprocess.Popen:
    overrides = [*fakes.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
                 f"generation.examples={examples}", "limits.concurrency=2"]
    cmd = [sys.executable, "-m", "flows.cli", "run", str(questions), "--data-root", str(root)]
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
    dupes = w.query("SELECT count(*) FROM (SELECT question_id, stage FROM stage_runs "
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
