"""Test settings (Prefect and the models stay in a temporary folder, off the network) and shared fixtures.

The fake external services live in tests/support/fakes; the small documentation site in tests/support/sitegen.py.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="hifirag-tests-"))
# Before anything imports Prefect: its home, database and results live in the session folder.
os.environ["PREFECT_HOME"] = str(_SESSION_DIR / "prefect-home")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_SESSION_DIR / "prefect-results")
os.environ.pop("HIFIRAG_DATA_ROOT", None)

from flows.environment import configure  # noqa: E402

configure(_SESSION_DIR / "data")

from tests.support.fakes.fixtures import (  # noqa: E402, F401  (pytest finds fixtures by name)
    fakes,
    gemini_fake,
    google_fake,
    make_guards,
    openai_fake,
    reddit_fake,
    scrapingdog_fake,
    sleeps,
)
from tests.support.llama_server import (  # noqa: E402, F401  (pytest finds fixtures by name)
    OPT_OUT_VARIABLE,
    LocalServerDied,
    dead_servers,
    model_server,
    opt_out_reason,
    require_server,
    smollm2_server,
)
from tests.support.sitegen import BASE_URL, write_examples, write_questions, write_site  # noqa: E402


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server (SQLite in a temporary folder) for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory) -> Path:
    return write_site(tmp_path_factory.mktemp("site"))


@pytest.fixture
def data_root(tmp_path, site_dir) -> Path:
    """A fresh data root whose ``docs`` corpus is the Tidewater site."""
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    root = tmp_path / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    return root


@pytest.fixture
def questions_file(tmp_path) -> Path:
    return write_questions(tmp_path / "questions.jsonl")


@pytest.fixture
def examples_file(tmp_path) -> Path:
    return write_examples(tmp_path / "examples.jsonl")


@pytest.fixture
def run_flow(data_root, examples_file):
    """Run the answer flow on the test site with its few-shot examples; returns the run summary."""
    from flows.environment import stage_cache_at

    def run(questions_file: Path, overrides: list[str] | None = None, **kwargs) -> dict:
        from flows.answer import answer_questions

        with stage_cache_at(data_root):
            return answer_questions(questions=str(questions_file), data_root=str(data_root),
                                    overrides=[f"generation.examples={examples_file}", *(overrides or [])],
                                    **kwargs)

    return run


def pytest_collection_modifyitems(config, items):
    from hifirag_core.resources import shared_data_dir

    if reason := opt_out_reason():
        for item in items:
            if "llama_server" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
    shared = shared_data_dir()
    if shared.exists():
        return
    skip = pytest.mark.skip(reason=f"needs the shared data sets at {shared} (set HIFIRAG_SHARED_DATA)")
    for item in items:
        if "shared_data" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # Before any fixture starts (a Prefect server takes a while): a llama_server test with no server
    # and no opt-out fails here instead of skipping (with the opt-out, its skip marker says why).
    if "llama_server" in item.keywords and not opt_out_reason():
        require_server()
    if died := dead_servers():  # a local model server died in an earlier test: fail at once, saying why
        raise LocalServerDied("\n\n".join(died))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    # A local model server that died during a test fails it with the death's signal, log and hint, whatever
    # its asserts said: "assert [] " after a SIGSEGV says nothing about the SIGSEGV (tests/support/llama_server.py).
    report = yield
    if call.when == "call" and (died := dead_servers()):
        own = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            own = f"\n\nThe test's own failure, which followed: {crash.message if crash else report.longreprtext}"
        report.outcome = "failed"
        report.longrepr = "\n\n".join(died) + own
    return report


def _opt_out_line(terminalreporter) -> str | None:
    if not (reason := opt_out_reason()):
        return None
    # counted from the reports, which reach the terminal also from xdist workers
    skipped = sum(1 for report in terminalreporter.stats.get("skipped", [])
                  if isinstance(report.longrepr, tuple) and OPT_OUT_VARIABLE in str(report.longrepr[-1]))
    return f"{reason} ({skipped} llama_server test{'' if skipped == 1 else 's'} skipped)"


def pytest_report_header(config):
    # the top of a verbose run (pytest -q prints no header); collection has not run yet: no count
    reason = opt_out_reason()
    return [reason] if reason else []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    # Outermost, so the opt-out is the summary's first line, before failures and the short summary:
    # a run without the local model server must not read like a full run.
    if line := _opt_out_line(terminalreporter):
        terminalreporter.write_line(line, yellow=True, bold=True)
    return (yield)


def corpus_web(data_root: Path):
    """The test site's corpus as ``(search, page)`` for the search and scrape fakes."""
    from hifirag_core.backends.offline import LocalSearch
    from hifirag_core.corpus.store import open_corpus

    corpus = open_corpus(data_root, "docs")
    search = LocalSearch(corpus.index())

    def page(url: str):
        found = corpus.page(url)
        return corpus.blobs.get(found.sha256) if found else None

    return (lambda q, n: search.search(q, num=n)), page


@pytest.fixture
def web(data_root):
    """Every fake service, the search and scrape fakes serving the test site; fake keys in the environment."""
    from tests.support.fakes.services import fake_services

    search, page = corpus_web(data_root)
    with fake_services(search=search, page=page) as services, services.environment():
        yield services
