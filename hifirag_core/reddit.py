"""Reddit threads as comment trees (the paper's k=5, m1=3, m2=2).

The data types here are what every Reddit source produces: the praw adapter for the live API and
the recorded-thread source for offline runs and tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RedditComment:
    id: str
    author: str | None  # None when the account is deleted
    body: str
    score: int
    is_submitter: bool  # written by the thread's original poster (OP)
    depth: int  # 0 for a top-level comment
    replies: tuple[RedditComment, ...] = ()
    removed: bool = False  # "[deleted]" or "[removed]" body


@dataclass(frozen=True)
class RedditThread:
    id: str
    url: str
    subreddit: str
    title: str
    author: str | None
    selftext: str
    score: int
    num_comments: int
    created_utc: float
    comments: tuple[RedditComment, ...] = ()
    more_stubs: int = 0  # "load more comments" stubs that were not expanded


class RedditSource(Protocol):
    name: str

    def thread(self, url: str) -> RedditThread: ...
