"""Reddit threads found by search go to the Reddit source and come out as comment-tree sections."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hifirag_core.store.warehouse import Warehouse
from tests import SUPPORT
from tests.support.fakes.reddit_server import sample_thread
from tests.support.fakes.services import fake_services
from tests.support.fakes.web import WebHit

pytestmark = pytest.mark.usefixtures("prefect_harness")
FIXTURES = SUPPORT / "fixtures" / "reddit"


def _ask(tmp_path: Path, question: str) -> Path:
    path = tmp_path / "reddit-q.jsonl"
    path.write_text(f'{{"iid": "R1", "query": "{question}"}}\n')
    return path


def test_a_thread_through_praw_and_the_fake_reddit_api(tmp_path, data_root, run_flow):
    thread = sample_thread()
    hits = [WebHit(thread.title, thread.url, "I keep breaking my system Python. What is the right way to make a venv?")]
    with fake_services(search=lambda q, n: hits[:n]) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(llm="offline", search="google", fetch="scrapingdog",
                                                   reddit="praw"),
                     "backends.filter_llm=offline", "backends.writer_llm=offline"]
        summary = run_flow(_ask(tmp_path, "How do I create a virtual environment in Python?"), overrides)
        assert fakes.reddit.count() > 0 and fakes.scrapingdog.count() == 0
    w = Warehouse(data_root)
    kind, fetcher = w.query("SELECT kind, fetcher FROM pages WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert (kind, fetcher) == ("reddit", "praw")
    headings = [h for (h,) in w.query("SELECT heading FROM sections WHERE run_id = ? ORDER BY ord",
                                      [summary["run_id"]]).rows]
    assert len(headings) == 1 + 5  # the submission, then the top k=5 comments by score
    (answer,) = w.query("SELECT text FROM answers WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert "venv" in answer


def test_a_recorded_thread_offline(tmp_path, data_root, run_flow):
    shutil.copytree(FIXTURES, data_root / "reddit")
    url = "https://www.reddit.com/r/Python/comments/1abcde/how_do_i_read_a_large_csv_without_running_out_of/"
    hits = [WebHit("How do I read a large CSV without running out of memory?", url, "pandas.read_csv dies")]
    with fake_services(search=lambda q, n: hits[:n]) as fakes, fakes.environment():
        overrides = [*fakes.config_overrides_pairs(search="google"), "backends.filter_llm=offline",
                     "backends.writer_llm=offline", "backends.fetch=local", "backends.reddit=recorded"]
        summary = run_flow(_ask(tmp_path, "How can I read a huge CSV file without running out of memory?"),
                           overrides)
    w = Warehouse(data_root)
    status, kind = w.query("SELECT status, kind FROM pages WHERE run_id = ?", [summary["run_id"]]).rows[0]
    assert (status, kind) == ("ok", "reddit")
    assert summary["n_answered"] == 1
