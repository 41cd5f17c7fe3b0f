"""A fake Reddit API: the app-only OAuth token and comment listings, as praw requests them.

* ``POST /api/v1/access_token`` (HTTP basic auth ``client_id:client_secret``, form
  ``grant_type=client_credentials``) -> ``{"access_token", "token_type": "bearer", "expires_in",
  "scope"}`` (https://github.com/reddit-archive/reddit/wiki/OAuth2#application-only-oauth);
* ``GET /comments/{id}/?limit&sort&raw_json=1`` with ``Authorization: bearer <token>`` -> two
  Listings: the ``t3`` submission, then the ``t1`` comment tree (``replies`` is a Listing or
  ``""``) with a ``more`` stub for held-back comments
  (https://www.reddit.com/dev/api/#GET_comments_{article});
* ``POST /api/morechildren/`` (form ``children``, ``link_id``, ``sort``) ->
  ``{"json": {"errors": [], "data": {"things": [...]}}}`` (https://www.reddit.com/dev/api/#GET_api_morechildren).

Threads are ``hifirag_core.web.reddit.RedditThread`` values, so what the adapter returns can be
compared with what the fake served.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Mapping

from hifirag_core.web.reddit import RedditComment, RedditThread
from tests.support.fakes.server import FakeServer, Fault, Request, Response

_COMMENTS_PATH = re.compile(r"^/comments/([a-z0-9]+)/?(?:[^/]*/?)?$")


def sample_thread() -> RedditThread:
    """A small thread: 7 top-level comments, nested replies, a deleted one, OP replying."""

    def c(cid: str, body: str, score: int, depth: int, replies: tuple = (), author: str | None = "user",
          op: bool = False) -> RedditComment:
        return RedditComment(cid, author, body, score, op, depth, replies, body in ("[deleted]", "[removed]"))

    comments = (
        c("c1", "Use python -m venv .venv and then activate it with source .venv/bin/activate.", 120, 0, (
            c("c1r1", "On Windows the activate script is .venv\\Scripts\\activate.", 40, 1, (
                c("c1r1r1", "And in PowerShell it is Activate.ps1.", 12, 2),
                c("c1r1r2", "Thanks, that worked.", 3, 2, author="asker", op=True),
                c("c1r1r3", "You may need Set-ExecutionPolicy first.", 2, 2),
            )),
            c("c1r2", "Add .venv to your .gitignore.", 25, 1),
            c("c1r3", "[deleted]", 1, 1, author=None),
            c("c1r4", "virtualenv is the older third-party tool.", 0, 1),
        )),
        c("c2", "Poetry and uv create virtual environments for you too.", 80, 0, (
            c("c2r1", "uv venv is very fast.", 30, 1),
        )),
        c("c3", "Never install packages into the system Python.", 60, 0),
        c("c4", "conda environments are another option for data science.", 20, 0),
        c("c5", "[removed]", 15, 0, author=None),
        c("c6", "Read the venv docs on docs.python.org.", 10, 0),
        c("c7", "I just use Docker.", 5, 0),
    )
    return RedditThread(
        id="abc123", url="https://www.reddit.com/r/learnpython/comments/abc123/how_do_i_create_a_virtual_environment/",
        subreddit="learnpython", title="How do I create a virtual environment?", author="asker",
        selftext="I keep breaking my system Python. What is the right way to make a venv?", score=321,
        num_comments=18, created_utc=1_700_000_000.0, comments=comments)


def _listing(children: list[dict]) -> dict:
    return {"kind": "Listing", "data": {"after": None, "before": None, "dist": None, "modhash": "",
                                        "geo_filter": "", "children": children}}


class RedditFake(FakeServer):
    """Serves threads by id; ``page_size`` top-level comments per listing, the rest as a ``more`` stub."""

    name = "reddit"

    def __init__(self, *, threads: Mapping[str, RedditThread] | None = None, client_id: str = "fake-reddit-id",
                 client_secret: str = "fake-reddit-secret", page_size: int | None = None, latency: float = 0.0,
                 rpm: int | None = None):
        super().__init__(latency=latency, rpm=rpm)
        base = threads or {"abc123": sample_thread()}
        self.threads = dict(base)
        self.client_id = client_id
        self.client_secret = client_secret
        self.page_size = page_size
        self.tokens: set[str] = set()
        self._token_lock = threading.Lock()
        self.morechildren_calls = 0

    def route(self, request: Request) -> Response:
        path = request.path
        if request.method == "POST" and path.rstrip("/") == "/api/v1/access_token":
            return self._token(request)
        auth = request.headers.get("authorization", "")
        token = auth[len("bearer "):] if auth.lower().startswith("bearer ") else ""
        if token not in self.tokens:
            return Response(401, {"message": "Unauthorized", "error": 401},
                            {"www-authenticate": 'Bearer realm="reddit", error="invalid_token"'})
        if request.method == "GET" and (m := _COMMENTS_PATH.match(path)):
            return self._comments(m.group(1), request)
        if request.method == "POST" and path.rstrip("/") == "/api/morechildren":
            return self._more(request)
        return Response(404, {"message": "Not Found", "error": 404})

    def _token(self, request: Request) -> Response:
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            return Response(401, {"message": "Unauthorized", "error": 401})
        if request.form().get("grant_type") != "client_credentials":
            return Response(200, {"error": "unsupported_grant_type"})
        with self._token_lock:
            token = f"fake-token-{len(self.tokens) + 1}"
            self.tokens.add(token)
        return Response(200, {"access_token": token, "token_type": "bearer", "expires_in": 86400, "scope": "*"})

    def _comments(self, thread_id: str, request: Request) -> Response:
        thread = self.threads.get(thread_id)
        if thread is None:
            return Response(404, {"message": "Not Found", "error": 404})
        shown = thread.comments if self.page_size is None else thread.comments[: self.page_size]
        held = [] if self.page_size is None else list(thread.comments[self.page_size :])
        children = [self._thing(thread, c, f"t3_{thread.id}") for c in shown]
        if held:
            ids = [c.id for c in held]
            children.append({"kind": "more", "data": {"count": len(ids), "name": f"t1_{ids[0]}", "id": ids[0],
                                                      "parent_id": f"t3_{thread.id}", "depth": 0, "children": ids}})
        return Response(200, [_listing([{"kind": "t3", "data": self._submission(thread)}]), _listing(children)])

    def _more(self, request: Request) -> Response:
        form = request.form()
        thread = self.threads.get(form.get("link_id", "").removeprefix("t3_"))
        if thread is None:
            return Response(200, {"json": {"errors": [["NOT_FOUND", "no such thread", "link_id"]]}})
        wanted = set(form.get("children", "").split(","))
        self.morechildren_calls += 1
        things = [self._thing(thread, c, f"t3_{thread.id}") for c in thread.comments if c.id in wanted]
        return Response(200, {"json": {"errors": [], "data": {"things": things}}})

    def _submission(self, t: RedditThread) -> dict:
        permalink = f"/r/{t.subreddit}/comments/{t.id}/{t.url.rstrip('/').rsplit('/', 1)[-1]}/"
        return {"id": t.id, "name": f"t3_{t.id}", "title": t.title, "author": t.author or "[deleted]",
                "selftext": t.selftext, "score": t.score, "ups": t.score, "num_comments": t.num_comments,
                "created_utc": t.created_utc, "subreddit": t.subreddit, "permalink": permalink,
                "url": f"https://www.reddit.com{permalink}", "is_self": True, "over_18": False,
                "locked": False, "stickied": False}

    def _thing(self, t: RedditThread, c: RedditComment, parent: str) -> dict:
        replies = [self._thing(t, r, f"t1_{c.id}") for r in c.replies]
        return {"kind": "t1", "data": {
            "id": c.id, "name": f"t1_{c.id}", "author": c.author or "[deleted]", "body": c.body, "score": c.score,
            "ups": c.score, "is_submitter": c.is_submitter, "depth": c.depth, "parent_id": parent,
            "link_id": f"t3_{t.id}", "subreddit": t.subreddit, "created_utc": t.created_utc,
            "permalink": f"/r/{t.subreddit}/comments/{t.id}/_/{c.id}/", "stickied": False, "distinguished": None,
            "replies": _listing(replies) if replies else "",
        }}

    @staticmethod
    def too_many_requests(retry_after_s: int = 1) -> Fault:
        """429 with Retry-After on the listing request."""
        return Fault("status", Response(429, {"message": "Too Many Requests", "error": 429},
                                        {"Retry-After": str(retry_after_s)}),
                     match=lambda r: r.path.startswith("/comments/"))
