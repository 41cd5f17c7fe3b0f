"""The praw adapter against the fake Reddit API: OAuth, the comment tree, more stubs, faults."""

from __future__ import annotations

import pytest

from hifirag_core.backends.factory import build_reddit_source
from hifirag_core.backends.reddit_praw import PrawRedditSource
from hifirag_core.config import build_config
from hifirag_core.errors import PermanentError
from hifirag_core.web.reddit import RedditComment
from tests.support.fakes.reddit_server import RedditFake, sample_thread

URL = "https://www.reddit.com/r/learnpython/comments/abc123/how_do_i_create_a_virtual_environment/"


def source_for(fake: RedditFake, make_guards, *, env: dict[str, str] | None = None, **reddit: object) -> PrawRedditSource:
    cfg = build_config(overrides={"backends": {"reddit": "praw", "reddit_oauth_url": fake.base_url,
                                               "reddit_url": fake.base_url},
                                  "reddit": reddit, "limits": {"retries": 2}})
    env = env if env is not None else {"REDDIT_CLIENT_ID": fake.client_id, "REDDIT_CLIENT_SECRET": fake.client_secret,
                                       "REDDIT_USER_AGENT": "python:hifirag-tests:0.1 (by /u/nobody)"}
    source = build_reddit_source(cfg, guards=make_guards(cfg), env=env)
    assert isinstance(source, PrawRedditSource)
    return source


def strip_ids(comments: tuple[RedditComment, ...]) -> list:
    return [(c.id, c.author, c.body, c.score, c.is_submitter, c.depth, c.removed, strip_ids(c.replies)) for c in comments]


def test_thread_with_the_full_comment_tree(reddit_fake: RedditFake, make_guards) -> None:
    thread = source_for(reddit_fake, make_guards).thread(URL)
    expected = sample_thread()
    assert (thread.id, thread.title, thread.subreddit, thread.author, thread.selftext, thread.score,
            thread.num_comments, thread.created_utc, thread.more_stubs) == (
        expected.id, expected.title, expected.subreddit, expected.author, expected.selftext, expected.score,
        expected.num_comments, expected.created_utc, 0)
    assert thread.url == URL
    assert strip_ids(thread.comments) == strip_ids(expected.comments)
    deleted = thread.comments[0].replies[2]
    assert deleted.author is None and deleted.removed
    assert thread.comments[0].replies[0].replies[1].is_submitter


def test_wire_requests(reddit_fake: RedditFake, make_guards) -> None:
    source_for(reddit_fake, make_guards, comment_sort="top").thread(URL)
    token, listing = reddit_fake.requests
    assert token.method == "POST" and token.path == "/api/v1/access_token"
    assert token.form() == {"grant_type": "client_credentials"}
    assert token.headers["user-agent"].startswith("python:hifirag-tests:0.1 (by /u/nobody)")
    assert listing.method == "GET" and listing.path == "/comments/abc123/"
    assert listing.param("sort") == "top" and listing.param("raw_json") == "1" and listing.param("limit") == "500"
    assert listing.headers["authorization"].startswith("bearer fake-token-")


def test_more_stubs_are_counted_or_expanded(make_guards) -> None:
    with RedditFake(page_size=3) as fake:
        first_page = source_for(fake, make_guards).thread(URL)
        assert [c.id for c in first_page.comments] == ["c1", "c2", "c3"] and first_page.more_stubs == 1
        assert fake.morechildren_calls == 0
        expanded = source_for(fake, make_guards, replace_more_limit=5).thread(URL)
        assert [c.id for c in expanded.comments] == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
        assert expanded.more_stubs == 0 and fake.morechildren_calls == 1


def test_429_is_retried_after_retry_after(reddit_fake: RedditFake, make_guards, sleeps) -> None:
    reddit_fake.inject(RedditFake.too_many_requests(retry_after_s=3))
    thread = source_for(reddit_fake, make_guards).thread(URL)
    assert thread.id == "abc123" and sleeps.calls == [3.0]


def test_missing_thread_and_bad_urls_are_permanent(reddit_fake: RedditFake, make_guards, sleeps) -> None:
    source = source_for(reddit_fake, make_guards)
    with pytest.raises(PermanentError, match="404"):
        source.thread("https://www.reddit.com/r/x/comments/zzz999/gone/")
    with pytest.raises(PermanentError, match="not a thread URL"):
        source.thread("https://www.reddit.com/r/learnpython/")
    assert sleeps.calls == []


def test_bad_credentials(reddit_fake: RedditFake, make_guards) -> None:
    source = source_for(reddit_fake, make_guards, env={"REDDIT_CLIENT_ID": reddit_fake.client_id,
                                                        "REDDIT_CLIENT_SECRET": "wrong-secret-123456"})
    with pytest.raises(PermanentError) as info:
        source.thread(URL)
    assert "401" in str(info.value) and "wrong-secret-123456" not in str(info.value)


def test_missing_credentials_name_the_variables(reddit_fake: RedditFake, make_guards) -> None:
    from hifirag_core.errors import MissingSecretError

    with pytest.raises(MissingSecretError, match="REDDIT_CLIENT_ID"):
        source_for(reddit_fake, make_guards, env={})
