"""What the HTTP adapters share: status classification, error bodies, call records and costs."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

import httpx

from hifirag_core.config import ModelPrice
from hifirag_core.errors import BackendError, CallTimeoutError, PermanentError, TransientError
from hifirag_core.limits import parse_retry_after
from hifirag_core.records import LLMCallRecord, utcnow
from hifirag_core.secrets import redact

# 408 and 429 ask the client to come back; 5xx are the server's own failures. Every other 4xx is
# the request's fault and would fail again.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def is_retryable(status: int) -> bool:
    """True for 408, 429 and every 5xx."""
    return status in RETRYABLE_STATUS or 500 <= status < 600


def google_retry_delay(body: Any) -> float | None:
    """The ``google.rpc.RetryInfo`` delay in a Google error body, e.g. ``"retryDelay": "32s"``.

    Format: https://cloud.google.com/apis/design/errors#error_details (RetryInfo, a Duration).
    """
    try:
        details = body["error"]["details"]
    except (KeyError, TypeError):
        return None
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            m = re.fullmatch(r"\s*([0-9.]+)s\s*", str(item.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def google_error_message(body: Any, fallback: str) -> str:
    """``code status: message`` from a Google API error body ``{"error": {code, message, status}}``."""
    try:
        err = body["error"]
        return f"{err.get('code')} {err.get('status', '')}: {err.get('message', '')}".strip()
    except (KeyError, TypeError, AttributeError):
        return fallback


def error_for_status(provider: str, status: int, headers: Mapping[str, str] | None, body_text: str,
                     *, retryable: bool | None = None, rate_limited: bool | None = None) -> BackendError:
    """The transient or permanent error for a non-2xx response, with its Retry-After and message.

    ``rate_limited`` (default: the status is 429) marks a refusal for a rate limit, which the
    client-side limiter does not count as a request the server admitted.
    """
    try:
        body = json.loads(body_text) if body_text else None
    except json.JSONDecodeError:
        body = None
    message = google_error_message(body, body_text[:300].strip() or f"HTTP {status}")
    message = redact(f"{provider}: HTTP {status}: {message}") or ""
    transient = is_retryable(status) if retryable is None else retryable
    if transient:
        retry_after = parse_retry_after((headers or {}).get("retry-after")) if headers else None
        if retry_after is None:
            retry_after = google_retry_delay(body)
        limited = status == 429 if rate_limited is None else rate_limited
        return TransientError(message, retry_after=retry_after, rate_limited=limited)
    err = PermanentError(message)
    err.status_code = status  # type: ignore[attr-defined]
    return err


def transport_error(provider: str, exc: Exception) -> TransientError:
    """A transient error for timeouts and dropped connections."""
    text = redact(f"{provider}: {type(exc).__name__}: {exc}") or ""
    if isinstance(exc, httpx.TimeoutException) or "timeout" in type(exc).__name__.lower():
        return CallTimeoutError(text)
    return TransientError(text)


def estimate_cost(price: ModelPrice | None, tokens_in: int | None, tokens_out: int | None,
                  tokens_thinking: int | None) -> float | None:
    """USD for one call; thinking tokens are billed as output. None when the model has no price."""
    if price is None or tokens_in is None:
        return None
    long = price.long_threshold is not None and tokens_in > price.long_threshold
    rate_in = price.input_long if long and price.input_long is not None else price.input
    rate_out = price.output_long if long and price.output_long is not None else price.output
    billed_out = (tokens_out or 0) + (tokens_thinking or 0)
    return round((tokens_in * rate_in + billed_out * rate_out) / 1_000_000, 8)


def reply_settings(max_tokens: int | None, temperature: float | None, *extra: str) -> str:
    """The settings that change what a model replies, for stage cache identities ("" when all default)."""
    parts = [*extra, *([f"max_tokens={max_tokens}"] if max_tokens is not None else []),
             *([f"temperature={temperature}"] if temperature is not None else [])]
    return "|".join(parts)


def new_call_record(*, role: str, backend: str, model: str, stage: str, prompt_name: str,
                    prompt_hash: str) -> LLMCallRecord:
    """An ``llm_calls`` row for a call about to start; the caller fills question_id."""
    return LLMCallRecord(call_id=uuid.uuid4().hex, role=role, backend=backend, model=model, stage=stage,
                         prompt_name=prompt_name, prompt_hash=prompt_hash, started_at=utcnow())


class Stopwatch:
    """Wall time of a call, from the first attempt to the final answer."""

    def __init__(self, clock: Any = time.monotonic):
        self._clock = clock
        self._start = clock()

    def elapsed(self) -> float:
        """Seconds since start."""
        return round(self._clock() - self._start, 4)
