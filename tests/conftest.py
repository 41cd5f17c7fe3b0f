"""Test settings (Prefect and the models stay in a temporary folder, off the network) and shared fixtures.

The fake external services live in tests/fakes; the small documentation site in tests/sitegen.py.
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

from tests.fakes.fixtures import (  # noqa: E402, F401  (pytest finds fixtures by name)
    fakes,
    gemini_fake,
    google_fake,
    make_guards,
    openai_fake,
    reddit_fake,
    scrapingdog_fake,
    sleeps,
)
from tests.llama_server import model_server  # noqa: E402, F401  (pytest finds fixtures by name)
from tests.sitegen import BASE_URL, write_examples, write_questions, write_site  # noqa: E402


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

    shared = shared_data_dir()
    if shared.exists():
        return
    skip = pytest.mark.skip(reason=f"needs the shared data sets at {shared} (set HIFIRAG_SHARED_DATA)")
    for item in items:
        if "shared_data" in item.keywords:
            item.add_marker(skip)


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
    from tests.fakes.services import fake_services

    search, page = corpus_web(data_root)
    with fake_services(search=search, page=page) as services, services.environment():
        yield services
