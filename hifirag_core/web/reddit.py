"""Reddit threads as comment trees (the paper's k=5, m1=3, m2=2).

The data types here are what every Reddit source produces: the praw adapter for the live API and
the recorded-thread source for offline runs and tests.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from hifirag_core.config import RedditConfig
from hifirag_core.hashing import text_hash
from hifirag_core.sectioning.outline import split_text
from hifirag_core.sectioning.section_types import ParsedPage, ParsedSection
from hifirag_core.text import word_count


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
    stickied: bool = False  # pinned by a moderator (usually AutoModerator's notice)


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


# ---------------------------------------------------------------------------------------------
# Reddit's listing JSON (``/comments/<id>.json``) into a tree, the paper's top-k selection, and
# the tree as ranking units (sections).
# ---------------------------------------------------------------------------------------------

_GONE_BODIES = frozenset({"[deleted]", "[removed]"})
_GONE_AUTHORS = frozenset({"[deleted]", ""})
_MAX_DEPTH = 64  # Reddit stops nesting long before this; a hostile file does not get the stack
_THREAD_ID = re.compile(r"(?:/comments/|redd\.it/|^)([a-z0-9]{2,12})(?:[/?#]|$)", re.IGNORECASE)


class RedditError(ValueError):
    """A Reddit listing or thread that cannot be read."""


class RedditThreadNotFound(LookupError):
    """A thread the source has no record of."""


def _things(listing: Any) -> list[dict[str, Any]]:
    """The children of a Listing (or [] for Reddit's empty-string 'replies')."""
    if not isinstance(listing, dict) or listing.get("kind") != "Listing":
        return []
    children = (listing.get("data") or {}).get("children") or []
    return [c for c in children if isinstance(c, dict)]


def _author(data: dict[str, Any]) -> str | None:
    author = data.get("author")
    return None if not isinstance(author, str) or author in _GONE_AUTHORS else author


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _comments(things: list[dict[str, Any]], depth: int, stubs: list[int]) -> tuple[RedditComment, ...]:
    out: list[RedditComment] = []
    for thing in things:
        kind = thing.get("kind")
        data = thing.get("data") or {}
        if kind == "more":
            stubs[0] += 1  # "load more comments" (or "continue this thread"): never expanded offline
            continue
        if kind != "t1" or not isinstance(data, dict):
            continue
        body = data.get("body") if isinstance(data.get("body"), str) else ""
        replies: tuple[RedditComment, ...] = ()
        if depth + 1 < _MAX_DEPTH:
            replies = _comments(_things(data.get("replies")), depth + 1, stubs)
        out.append(
            RedditComment(
                id=str(data.get("id") or ""),
                author=_author(data),
                body=body.strip(),
                score=_int(data.get("score")),
                is_submitter=bool(data.get("is_submitter")),
                depth=_int(data.get("depth")) if "depth" in data else depth,
                replies=replies,
                removed=body.strip() in _GONE_BODIES,
                stickied=bool(data.get("stickied")),
            )
        )
    return tuple(out)


def thread_from_listing(listing_json: list | dict, url: str) -> RedditThread:
    """A thread from Reddit's ``[submission Listing, comments Listing]`` JSON (t3, t1, "more")."""
    if isinstance(listing_json, dict):
        listings: list[Any] = [listing_json]  # a submission Listing without its comments
    elif isinstance(listing_json, list):
        listings = listing_json
    else:
        raise RedditError(f"{url}: a Reddit thread is a JSON list of Listings, got {type(listing_json).__name__}")
    posts = [t for t in _things(listings[0] if listings else None) if t.get("kind") == "t3"]
    if not posts:
        raise RedditError(f"{url}: no submission (kind t3) in the first Listing")
    post = posts[0].get("data") or {}
    stubs = [0]
    comments = _comments(_things(listings[1]) if len(listings) > 1 else [], 0, stubs)
    selftext = post.get("selftext") if isinstance(post.get("selftext"), str) else ""
    return RedditThread(
        id=str(post.get("id") or ""),
        url=url,
        subreddit=str(post.get("subreddit") or ""),
        title=str(post.get("title") or "").strip(),
        author=_author(post),
        selftext="" if selftext.strip() in _GONE_BODIES else selftext.strip(),
        score=_int(post.get("score")),
        num_comments=_int(post.get("num_comments")),
        created_utc=float(post.get("created_utc") or 0.0),
        comments=comments,
        more_stubs=stubs[0],
    )


def _readable(c: RedditComment) -> bool:
    return bool(c.body) and not c.removed


def _top(comments: tuple[RedditComment, ...], k: int, keep_stickied: bool) -> list[RedditComment]:
    """The k highest-scored comments worth showing; ties keep Reddit's order."""
    pool = [c for c in comments if keep_stickied or not c.stickied]
    return sorted(pool, key=lambda c: -c.score)[: max(k, 0)]


def _prune(c: RedditComment, widths: tuple[int, ...], keep_stickied: bool) -> RedditComment | None:
    """The comment with its top replies at each depth; None when nothing readable is left."""
    kept: list[RedditComment] = []
    if widths:
        pool = [r for r in c.replies if keep_stickied or not r.stickied]
        candidates = [p for r in pool if (p := _prune(r, widths[1:], keep_stickied)) is not None]
        kept = _top(tuple(candidates), widths[0], keep_stickied)
    if not _readable(c) and not kept:
        return None  # a deleted, removed or empty comment stays only as the parent of kept replies
    return replace(c, replies=tuple(kept))


def select_tree(thread: RedditThread, config: RedditConfig) -> RedditThread:
    """Top k comments by score, each with its top m1 replies, each of those with its top m2."""
    keep = config.keep_stickied
    pruned = [p for c in thread.comments if (p := _prune(c, (config.m1, config.m2), keep)) is not None]
    return replace(thread, comments=tuple(_top(tuple(pruned), config.top_k, keep)))


def _who(author: str | None, is_op: bool) -> str:
    name = f"u/{author}" if author else "[deleted account]"
    return f"{name} (OP)" if is_op else name


def _comment_body(c: RedditComment) -> str:
    if c.removed:
        return "[comment deleted or removed]"
    return c.body or "[empty comment]"


def _render_replies(c: RedditComment, depth: int) -> list[str]:
    """Replies as nested quotes: one '>' per level below the top-level comment."""
    blocks: list[str] = []
    for r in c.replies:
        prefix = "> " * depth
        head = f"{prefix}↳ {_who(r.author, r.is_submitter)} · score {r.score} · depth {r.depth}"
        lines = [head, prefix.rstrip()] + [f"{prefix}{line}".rstrip() for line in _comment_body(r).split("\n")]
        blocks.append("\n".join(lines))
        blocks.extend(_render_replies(r, depth + 1))
    return blocks


def thread_sections(thread: RedditThread, config: RedditConfig) -> ParsedPage:
    """The submission as the first section, then each kept top-level comment with its reply chain."""
    tree = select_tree(thread, config)
    title = tree.title or f"Reddit thread {tree.id}"
    op = _who(tree.author, True)
    meta = f"r/{tree.subreddit} · {op} · score {tree.score} · {tree.num_comments} comments"
    if tree.more_stubs:
        meta += f" · {tree.more_stubs} 'more comments' stubs not expanded"
    units: list[tuple[tuple[str, ...], int, str | None, str]] = [
        ((title,), 1, f"t3_{tree.id}" if tree.id else None, "\n\n".join(p for p in (meta, tree.selftext) if p))
    ]
    for c in tree.comments:
        heading = f"{_who(c.author, c.is_submitter)} · score {c.score}"
        text = "\n\n".join([_comment_body(c), *_render_replies(c, 1)])
        units.append(((title, heading), 2, f"t1_{c.id}" if c.id else None, text))
    sections: list[ParsedSection] = []
    seen: dict[tuple[str, ...], int] = {}
    for path, level, anchor, text in units:
        for part in split_text(text, config.max_section_chars):
            occurrence = seen.get(path, 0)
            seen[path] = occurrence + 1
            sections.append(
                ParsedSection(
                    section_id=text_hash("\x1f".join([tree.url, *path, str(occurrence)])),
                    ord=len(sections),
                    heading_path=path,
                    heading=path[-1],
                    level=level,
                    anchor=anchor,
                    text=part,
                    n_chars=len(part),
                    n_words=word_count(part),
                )
            )
    return ParsedPage(tree.url, title, tuple(sections), "ok")


class RecordedRedditSource:
    """Threads from a folder of recorded ``/comments/<id>.json`` listings, one file per thread id."""

    name = "recorded"

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)

    @staticmethod
    def thread_id(url: str) -> str:
        """The base-36 id in a thread URL (``/r/x/comments/<id>/slug``, ``redd.it/<id>``) or a bare id."""
        m = _THREAD_ID.search(url.strip())
        if not m:
            raise RedditThreadNotFound(f"{url!r} is not a Reddit thread URL (expected /comments/<id>/)")
        return m.group(1).lower()

    def thread(self, url: str) -> RedditThread:
        tid = self.thread_id(url)
        path = self.folder / f"{tid}.json"
        if not path.is_file():
            known = sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []
            raise RedditThreadNotFound(
                f"no recorded Reddit thread {tid!r} in {self.folder} (recorded: {', '.join(known) or 'none'}); "
                f"record it as {tid}.json or use the praw backend"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RedditError(f"{path}: not JSON ({exc})") from None
        return thread_from_listing(data, url)


# ---------------------------------------------------------------------------------------------
# A thread as the fetch stage stores it (content-addressed JSON) and the sections stage reads it.
# ---------------------------------------------------------------------------------------------


def is_thread_url(url: str) -> bool:
    """A Reddit discussion thread (``reddit.com/r/<sub>/comments/<id>``, ``redd.it/<id>``)."""
    return bool(re.search(r"(?:^|\.)reddit\.com/r/[^/]+/comments/[a-z0-9]+|(?://|^)redd\.it/[a-z0-9]+", url,
                          re.IGNORECASE))


def thread_to_json(thread: RedditThread) -> bytes:
    return json.dumps(dataclasses.asdict(thread), ensure_ascii=False, sort_keys=True).encode()


def _comment_from_dict(data: dict[str, Any]) -> RedditComment:
    return RedditComment(**{**data, "replies": tuple(_comment_from_dict(r) for r in data.get("replies", ()))})


def thread_from_json(data: bytes) -> RedditThread:
    obj = json.loads(data)
    return RedditThread(**{**obj, "comments": tuple(_comment_from_dict(c) for c in obj.get("comments", ()))})
