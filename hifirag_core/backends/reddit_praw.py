"""A ``RedditSource`` over the Reddit API through praw: a thread with its whole comment tree.

praw authenticates with the app-only OAuth flow (``POST {reddit_url}/api/v1/access_token`` with
``grant_type=client_credentials`` and HTTP basic auth) and reads the thread from ``GET
{oauth_url}/comments/{id}/?sort=…&limit=…&raw_json=1``, whose reply is two Listings: the
submission, then the comment tree (``t1`` things whose ``replies`` is a Listing or ``""``, and
``more`` stubs for comments not sent). See https://www.reddit.com/dev/api/#GET_comments_{article}
and https://github.com/reddit-archive/reddit/wiki/OAuth2#application-only-oauth.

This adapter returns the full tree it received (``replace_more_limit`` stubs expanded, the rest
counted in ``more_stubs``); choosing the top k comments and their replies belongs to
``hifirag_core.web.reddit``. praw is not thread-safe, so calls through one adapter are serialized.
"""

from __future__ import annotations

import threading
from typing import Any

import praw
import prawcore
import requests
from praw.exceptions import InvalidURL, PRAWException

from hifirag_core.errors import BackendError, CallTimeoutError, PermanentError, TransientError
from hifirag_core.limits import ProviderGuard, parse_retry_after
from hifirag_core.secrets import Secret, redact
from hifirag_core.web.reddit import RedditComment, RedditThread

_REMOVED_BODIES = frozenset({"[deleted]", "[removed]"})


class PrawRedditSource:
    """Reddit threads through praw, app-only (read-only) OAuth."""

    name = "praw"

    def __init__(self, *, client_id: Secret, client_secret: Secret, user_agent: str, guard: ProviderGuard,
                 timeout_s: float, oauth_url: str = "https://oauth.reddit.com",
                 reddit_url: str = "https://www.reddit.com", comment_sort: str = "top",
                 replace_more_limit: int = 0, comment_limit: int = 500, session: requests.Session | None = None):
        self._guard = guard
        self._timeout = timeout_s
        self._sort = comment_sort
        self._replace_more = replace_more_limit
        self._comment_limit = comment_limit
        self._lock = threading.Lock()
        self._session = session or requests.Session()
        # Environment proxies and .netrc are for people's browsers, not this client.
        self._session.trust_env = False
        self._reddit = praw.Reddit(
            client_id=client_id.reveal(),
            client_secret=client_secret.reveal(),
            user_agent=user_agent,
            oauth_url=oauth_url.rstrip("/"),
            reddit_url=reddit_url.rstrip("/"),
            short_url=reddit_url.rstrip("/"),
            check_for_updates=False,
            timeout=max(1, int(timeout_s)),
            requestor_kwargs={"session": self._session},
        )
        self._reddit.read_only = True

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()

    def thread(self, url: str) -> RedditThread:
        """The thread at ``url`` with every comment received; raises on failure."""
        try:
            submission_id = praw.models.Submission.id_from_url(url)
        except InvalidURL as exc:
            raise PermanentError(f"reddit: not a thread URL: {url} ({exc})") from None
        thread, _ = self._guard.call(lambda t: self._load(submission_id, url), timeout=self._timeout, paid=False)
        return thread

    def _load(self, submission_id: str, url: str) -> RedditThread:
        with self._lock:
            try:
                submission = self._reddit.submission(id=submission_id)
                submission.comment_sort = self._sort
                submission.comment_limit = self._comment_limit
                submission._fetch()  # one request: the submission and its comment listing
                unexpanded = submission.comments.replace_more(limit=self._replace_more)
                return _to_thread(submission, url, len(unexpanded))
            except prawcore.exceptions.TooManyRequests as exc:
                retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
                raise TransientError(f"reddit: HTTP 429: {exc}", retry_after=retry_after,
                                     rate_limited=True) from None
            except prawcore.exceptions.ServerError as exc:
                raise TransientError(f"reddit: HTTP {exc.response.status_code}: {exc}") from None
            except prawcore.exceptions.RequestException as exc:
                original = getattr(exc, "original_exception", exc)
                error_cls = CallTimeoutError if isinstance(original, requests.Timeout) else TransientError
                raise error_cls(redact(f"reddit: {type(original).__name__}: {original}") or "") from None
            except prawcore.exceptions.ResponseException as exc:
                err = PermanentError(f"reddit: HTTP {exc.response.status_code}: {exc}")
                err.status_code = exc.response.status_code  # type: ignore[attr-defined]
                raise err from None
            except (prawcore.exceptions.PrawcoreException, PRAWException) as exc:
                raise PermanentError(redact(f"reddit: {type(exc).__name__}: {exc}") or "") from None
            except BackendError:
                raise
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise PermanentError(f"reddit: unexpected listing shape: {type(exc).__name__}: {exc}") from None


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute praw already holds, without triggering its lazy fetch of missing ones."""
    return vars(obj).get(name, default)


def _author(obj: Any) -> str | None:
    author = _attr(obj, "author")
    return None if author is None else str(getattr(author, "name", author))


def _to_comment(comment: Any) -> RedditComment:
    body = str(_attr(comment, "body", "") or "")
    # ``replies`` wraps the already-parsed children; it makes no request.
    replies = tuple(_to_comment(r) for r in comment.replies if isinstance(r, praw.models.Comment))
    return RedditComment(
        id=str(_attr(comment, "id")),
        author=_author(comment),
        body=body,
        score=int(_attr(comment, "score", 0) or 0),
        is_submitter=bool(_attr(comment, "is_submitter", False)),
        depth=int(_attr(comment, "depth", 0) or 0),
        replies=replies,
        removed=body.strip() in _REMOVED_BODIES,
    )


def _to_thread(submission: Any, url: str, more_stubs: int) -> RedditThread:
    permalink = _attr(submission, "permalink")
    comments = tuple(_to_comment(c) for c in submission.comments if isinstance(c, praw.models.Comment))
    subreddit = _attr(submission, "subreddit")
    return RedditThread(
        id=str(_attr(submission, "id")),
        url=f"https://www.reddit.com{permalink}" if permalink else url,
        subreddit=str(getattr(subreddit, "display_name", subreddit) or ""),
        title=str(_attr(submission, "title", "") or ""),
        author=_author(submission),
        selftext=str(_attr(submission, "selftext", "") or ""),
        score=int(_attr(submission, "score", 0) or 0),
        num_comments=int(_attr(submission, "num_comments", 0) or 0),
        created_utc=float(_attr(submission, "created_utc", 0.0) or 0.0),
        comments=comments,
        more_stubs=more_stubs,
    )
