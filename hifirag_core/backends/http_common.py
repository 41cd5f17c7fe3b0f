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
from hifirag_core.errors import (
    BackendError,
    CallTimeoutError,
    ContextLengthError,
    PermanentError,
    TransientError,
)
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


# What each provider says when a prompt is longer than the window (all HTTP 400):
# OpenAI and llama-cpp-python: error.code "context_length_exceeded", "This model's maximum context length is
# 8192 tokens. However, you requested 8476 tokens (8220 in the messages, 256 in the completion)..."
# (OpenAI: "...your messages resulted in 8220 tokens"); vLLM: the same sentence, code 400;
# llama.cpp's llama-server: error.type "exceed_context_size_error" with n_prompt_tokens and n_ctx;
# Gemini: INVALID_ARGUMENT, "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
_OVERFLOW_TEXT = (
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?(?:requested|resulted in) (?P<tokens>\d+) tokens",
               re.DOTALL),
    re.compile(r"input token count \((?P<tokens>\d+)\) exceeds the maximum number of tokens allowed "
               r"\((?P<limit>\d+)\)"),
    re.compile(r"request \((?P<tokens>\d+) tokens\) exceeds the available context size \((?P<limit>\d+) tokens\)"),
    re.compile(r"exceeds? the available context size"),
    re.compile(r"Requested tokens \((?P<tokens>\d+)\) exceed context window of (?P<limit>\d+)"),
)


def context_length_error(provider: str, status: int, body: Any, message: str) -> ContextLengthError | None:
    """The error for a provider's "prompt longer than the window" reply (None for any other reply)."""
    if status not in (400, 413):
        return None
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else (body if isinstance(body, dict) else {})
    text = str(err.get("message") or message)
    tokens = err.get("n_prompt_tokens")
    limit = err.get("n_ctx")
    flagged = err.get("code") == "context_length_exceeded" or err.get("type") == "exceed_context_size_error"
    for pattern in _OVERFLOW_TEXT:
        found = pattern.search(text)
        if found:
            flagged = True
            groups = found.groupdict()
            tokens = tokens if tokens is not None else groups.get("tokens")
            limit = limit if limit is not None else groups.get("limit")
            break
    if not flagged:
        return None
    return ContextLengthError(message, int(tokens) if tokens is not None else None,
                              int(limit) if limit is not None else None)


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
    err = context_length_error(provider, status, body, message) or PermanentError(message)
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
