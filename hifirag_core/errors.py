"""The errors every adapter raises, and the status word a row gets for each.

The bottom of the package: it imports nothing of HiFi-RAG. Transport errors that a retry may cure are
``TransientError``; the rest are ``PermanentError``. A decision never raises for a bad model reply (it
returns a status instead, see ``hifirag_core.types.Decision``).
"""

from __future__ import annotations


class BackendError(Exception):
    """Base of every error an adapter raises."""


class TransientError(BackendError):
    """Worth retrying: HTTP 429 and 5xx, timeouts, dropped connections.

    ``rate_limited``: the server turned the call away for a rate limit (HTTP 429, or a 403 whose
    reason says so) before doing any work, so the call did not use up any of that limit.
    """

    def __init__(self, message: str, retry_after: float | None = None, *, rate_limited: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.rate_limited = rate_limited


class CallTimeoutError(TransientError):
    """A call that ran out of time; retried like any transient error, recorded as ``timeout``."""


class PermanentError(BackendError):
    """Not worth retrying: other 4xx, a malformed request, an unsupported input."""


class ContextLengthError(PermanentError):
    """The prompt (with the reply's tokens) is longer than the model's window: the same call fails again,
    a shorter prompt may not. ``tokens`` and ``limit``: what the provider said it counted, when it said."""

    def __init__(self, message: str, tokens: int | None = None, limit: int | None = None):
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit


class MissingSecretError(BackendError):
    """A real backend was selected but the environment variable that holds its key is unset."""


class BudgetExceededError(BackendError):
    """The run's budget is spent: no new paid calls start."""


class DeadlineExceededError(BackendError):
    """The question's deadline has passed."""


def error_status(exc: BaseException) -> str:
    """The status a row gets for the error that ended its call or stage (``llm_calls``, stage rows)."""
    if isinstance(exc, BudgetExceededError):
        return "budget_exceeded"
    if isinstance(exc, DeadlineExceededError):
        return "deadline_exceeded"
    if isinstance(exc, MissingSecretError):
        return "missing_secret"
    if isinstance(exc, ContextLengthError):
        return "context_length_exceeded"
    if isinstance(exc, CallTimeoutError):
        return "timeout"
    if isinstance(exc, TransientError) and exc.rate_limited:
        return "rate_limited"  # refused for a rate limit after every retry: not an outage
    return "failed"
