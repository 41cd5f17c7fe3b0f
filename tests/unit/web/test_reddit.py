"""Reddit threads from recorded listing JSON: parsing, the paper's top-k tree, sections, the source."""

from __future__ import annotations

import json

import pytest

from hifirag_core.config import RedditConfig
from hifirag_core.web.reddit import (
    RecordedRedditSource,
    RedditComment,
    RedditError,
    RedditSource,
    RedditThreadNotFound,
    select_tree,
    thread_from_listing,
    thread_sections,
)
from tests import SUPPORT

FIXTURES = SUPPORT / "fixtures" / "reddit"
URL = "https://www.reddit.com/r/Python/comments/1abcde/how_do_i_read_a_large_csv_without_running_out_of/"


@pytest.fixture
def listing() -> list:
    return json.loads((FIXTURES / "1abcde.json").read_text())


@pytest.fixture
def source() -> RecordedRedditSource:
    return RecordedRedditSource(FIXTURES)


def _walk(comments: tuple[RedditComment, ...]):
    for c in comments:
        yield c
        yield from _walk(c.replies)


def test_listing_parses_submission_comments_and_stubs(listing) -> None:
    t = thread_from_listing(listing, URL)
    assert (t.id, t.subreddit, t.author, t.score, t.num_comments) == ("1abcde", "Python", "csv_wrangler", 412, 57)
    assert t.title.startswith("How do I read a large CSV")
    assert "MemoryError" in t.selftext
    assert len(t.comments) == 8  # the top-level "more" stub is not a comment
    assert t.more_stubs == 2  # one at the top level, one under the first comment
    by_id = {c.id: c for c in _walk(t.comments)}
    assert by_id["k2bb"].removed and by_id["k2bb"].author is None
    assert by_id["k5ee"].body == "" and not by_id["k5ee"].removed
    assert by_id["am0d"].stickied
    assert by_id["k1r1"].is_submitter and by_id["k1r1"].depth == 1
    assert by_id["k1r1a1"].depth == 3


def test_select_tree_keeps_top_k_m1_m2_by_score(listing) -> None:
    t = select_tree(thread_from_listing(listing, URL), RedditConfig())
    assert [c.id for c in t.comments] == ["k1aa", "k3cc", "k4dd", "k6ff", "k7gg"]
    first = t.comments[0]
    assert [r.id for r in first.replies] == ["k1r1", "k1r2", "k1r5"]  # the deleted k1r3 (33) is skipped
    assert [r.id for r in first.replies[0].replies] == ["k1r1a", "k1r1b"]
    assert all(not r.replies for r in first.replies[0].replies)  # nothing below m2
    assert all(c.depth <= 2 for c in _walk(t.comments))
    assert all(not c.stickied for c in _walk(t.comments))
    assert len(t.comments) <= 5 and all(len(c.replies) <= 3 for c in t.comments)
    assert all(len(r.replies) <= 2 for c in t.comments for r in c.replies)


def test_deleted_comment_stays_only_as_the_parent_of_kept_replies(listing) -> None:
    t = select_tree(thread_from_listing(listing, URL), RedditConfig())
    ids = {c.id for c in _walk(t.comments)}
    assert "k3cc" in ids  # deleted, but its reply is worth reading
    assert "k2bb" not in ids and "k5ee" not in ids  # removed / empty with nothing under them


def test_select_tree_follows_the_configuration(listing) -> None:
    t = select_tree(thread_from_listing(listing, URL), RedditConfig(top_k=2, m1=1, m2=0, keep_stickied=True))
    assert [c.id for c in t.comments] == ["k1aa", "k3cc"]
    assert [r.id for r in t.comments[0].replies] == ["k1r1"] and not t.comments[0].replies[0].replies
    t = select_tree(thread_from_listing(listing, URL), RedditConfig(top_k=10, keep_stickied=True))
    assert "am0d" in [c.id for c in t.comments]


def test_select_tree_is_idempotent(listing) -> None:
    once = select_tree(thread_from_listing(listing, URL), RedditConfig())
    assert select_tree(once, RedditConfig()) == once


def test_thread_sections_submission_first_then_one_per_comment(listing) -> None:
    page = thread_sections(thread_from_listing(listing, URL), RedditConfig())
    assert page.status == "ok" and page.title == page.sections[0].heading
    first = page.sections[0]
    assert (first.level, first.anchor, first.heading_path) == (1, "t3_1abcde", (page.title,))
    assert "u/csv_wrangler (OP)" in first.text and "score 412" in first.text and "MemoryError" in first.text
    assert "2 'more comments' stubs" in first.text
    comments = page.sections[1:]
    assert [s.anchor for s in comments] == ["t1_k1aa", "t1_k3cc", "t1_k4dd", "t1_k6ff", "t1_k7gg"]
    assert all(s.level == 2 and s.heading_path[0] == page.title for s in comments)
    chain = comments[0].text
    assert chain.startswith("Use the `chunksize` argument")
    assert "> ↳ u/csv_wrangler (OP) · score 45 · depth 1" in chain
    assert "> > ↳ u/dataframe_dan · score 30 · depth 2" in chain
    assert "below m2" not in chain and "me too" not in chain
    assert comments[1].heading == "[deleted account] · score 120"
    assert comments[1].text.startswith("[comment deleted or removed]") and "DuckDB" in comments[1].text
    assert [s.ord for s in page.sections] == list(range(len(page.sections)))
    assert len({s.section_id for s in page.sections}) == len(page.sections)


def test_long_comment_chain_is_split(listing) -> None:
    page = thread_sections(thread_from_listing(listing, URL), RedditConfig(max_section_chars=200))
    parts = [s for s in page.sections if s.anchor == "t1_k1aa"]
    assert len(parts) > 1 and all(s.n_chars <= 200 for s in parts)


def test_deleted_submission_without_comments(source) -> None:
    t = source.thread("https://old.reddit.com/r/learnpython/comments/2bcdef/is_pythons_gil_going_away/")
    assert (t.author, t.selftext, t.comments, t.more_stubs) == (None, "", (), 1)
    page = thread_sections(t, RedditConfig())
    assert len(page.sections) == 1 and "[deleted account] (OP)" in page.sections[0].text


def test_recorded_source_reads_urls_and_names_unknown_threads(source) -> None:
    typed: RedditSource = source  # structural: a type checker verifies it fits the protocol
    assert typed.name == "recorded"
    assert source.thread(URL).id == "1abcde"
    assert source.thread("https://redd.it/1abcde").id == "1abcde"
    with pytest.raises(RedditThreadNotFound, match="no recorded Reddit thread 'zzz999'.*1abcde"):
        source.thread("https://www.reddit.com/r/x/comments/zzz999/title/")
    with pytest.raises(RedditThreadNotFound, match="not a Reddit thread URL"):
        source.thread("https://example.org/some/page")


def test_malformed_listings_raise_a_clear_error(tmp_path) -> None:
    with pytest.raises(RedditError, match="no submission"):
        thread_from_listing([{"kind": "Listing", "data": {"children": []}}], URL)
    with pytest.raises(RedditError, match="JSON list of Listings"):
        thread_from_listing("nope", URL)  # type: ignore[arg-type]
    (tmp_path / "abc123.json").write_text("{not json")
    with pytest.raises(RedditError, match="not JSON"):
        RecordedRedditSource(tmp_path).thread("https://www.reddit.com/r/x/comments/abc123/t/")


def test_hostile_nesting_is_bounded() -> None:
    node: dict = {"kind": "t1", "data": {"id": "leaf", "body": "deep", "score": 1, "replies": ""}}
    for i in range(2000):
        node = {"kind": "t1", "data": {"id": f"c{i}", "body": "x", "score": 1,
                                       "replies": {"kind": "Listing", "data": {"children": [node]}}}}
    listing = [{"kind": "Listing", "data": {"children": [{"kind": "t3", "data": {"id": "t", "title": "T"}}]}},
               {"kind": "Listing", "data": {"children": [node]}}]
    t = thread_from_listing(listing, URL)
    depth = 0
    c = t.comments[0]
    while c.replies:
        c, depth = c.replies[0], depth + 1
    assert depth < 100
