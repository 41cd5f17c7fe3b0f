"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, hosted) per role.

Wire format (https://platform.openai.com/docs/api-reference/chat/create): ``POST {base}/chat/
completions`` with ``model`` and ``messages`` (``role`` ``user``/``assistant``); the reply has
``choices[0].message.content``, ``choices[0].finish_reason`` (``stop``, ``length``,
``content_filter``) and ``usage`` (``prompt_tokens``, ``completion_tokens``,
``completion_tokens_details.reasoning_tokens``). JSON replies are requested with ``response_format``
(``models.openai_response_format``):

* ``json_schema`` (default): ``{"type": "json_schema", "json_schema": {"name", "schema", "strict":
  true}}``, OpenAI's structured outputs, which vLLM and Ollama also turn into constrained decoding.
  OpenAI requires an object at the schema's root, and in strict mode ``additionalProperties: false``
  and every property listed in ``required`` (https://platform.openai.com/docs/guides/structured-outputs);
  the schemas of ``hifirag_core.llm.job.object_schema`` are built that way;
* ``json_object_schema``: ``{"type": "json_object", "schema": ...}``, the form llama-cpp-python's
  server constrains decoding with (it rejects ``json_schema``);
* ``json_object``: JSON mode without a schema; ``none``: free text (the parsers find the JSON).

Open reasoning models put their thinking in ``<think>…</think>`` inside the content; it is
stripped before the reply is used. ``tokens_out`` is the answer's tokens only (completion minus
reasoning tokens), the same meaning as Gemini's ``candidatesTokenCount``.

Streamed (the writer's draft and refinement when ``limits.stream_writer`` is on): ``"stream": true`` with
``"stream_options": {"include_usage": true}``; the reply is server-sent events, each ``data:`` line a
``chat.completion.chunk`` whose ``choices[0].delta.content`` is the next piece of text, the one with
``finish_reason`` ending the text, then a chunk with empty ``choices`` and the call's ``usage``, then
``data: [DONE]``. A server that sends no usage in streams (llama-cpp-python's) leaves the call's tokens and
cost unknown, as a non-streamed reply without ``usage`` does.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice

from hifirag_core.backends.http_common import (
    Stopwatch,
    error_for_status,
    estimate_cost,
    new_call_record,
    reply_settings,
)
from hifirag_core.config import ModelPrice
from hifirag_core.errors import (
    BackendError,
    CallTimeoutError,
    ContextLengthError,
    TransientError,
    error_status,
)
from hifirag_core.limits import ProviderGuard
from hifirag_core.llm.parsing import strip_reasoning
from hifirag_core.llm.streaming import STREAMED_STAGES, progress
from hifirag_core.secrets import Secret, redact
from hifirag_core.types import ChatReply, ChatTurn

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
# Sent when a local server needs no key; the client refuses to start without one.
PLACEHOLDER_KEY = "not-needed"


class OpenAIChatModel:
    """A ``ChatModel`` over one OpenAI-compatible endpoint and model."""

    backend = "openai"

    def __init__(self, *, model: str, role: str, api_key: Secret | None, guard: ProviderGuard, timeout_s: float,
                 price: ModelPrice | None, base_url: str | None = None,
                 response_format: Literal["json_schema", "json_object_schema", "json_object", "none"] = "json_schema",
                 max_tokens: int | None = None, temperature: float | None = None, clock: Any = time.monotonic,
                 stream: bool = False):
        self.model = model
        # draft and refine replies as streams (limits.stream_writer); not a reply setting: what comes back is
        # the same text, so it is no part of the cache identity
        self.stream = stream
        self.role = role
        self.timeout_s = timeout_s
        self.price = price
        self.response_format = response_format
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.reply_settings = reply_settings(max_tokens, temperature, f"format={response_format}")
        self._guard = guard
        self._clock = clock
        # base_url is always explicit: otherwise the client would read OPENAI_BASE_URL on its own.
        self._client = openai.OpenAI(api_key=api_key.reveal() if api_key else PLACEHOLDER_KEY,
                                     base_url=base_url or DEFAULT_OPENAI_BASE_URL, timeout=timeout_s, max_retries=0)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _format(self, schema: dict | None) -> dict | None:
        if schema is None or self.response_format == "none":
            return None
        if self.response_format == "json_object":
            return {"type": "json_object"}
        if self.response_format == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": True}}

    def _complete(self, messages: list[dict[str, str]], schema: dict | None, timeout: float,
                  stream_to: Any = None) -> Any:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "timeout": timeout}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        fmt = self._format(schema)
        if fmt is not None:
            kwargs["response_format"] = fmt
        try:
            if stream_to is not None:
                return self._streamed(kwargs, timeout, stream_to)
            return self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise CallTimeoutError(redact(f"openai: timeout: {exc}") or "") from None
        except openai.APIConnectionError as exc:
            raise TransientError(redact(f"openai: connection error: {exc}") or "") from None
        except openai.APIStatusError as exc:
            raise error_for_status("openai", exc.status_code, exc.response.headers, exc.response.text) from None
        except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise TransientError(redact(f"openai: unreadable response body: {exc}") or "") from None
        except openai.APIError as exc:  # an error event in the middle of a stream
            raise TransientError(redact(f"openai: the stream reported an error: {exc}") or "") from None
        except httpx.TimeoutException as exc:  # while reading a stream (the client wraps only the request)
            raise CallTimeoutError(redact(f"openai: timeout mid-stream: {exc}") or "") from None
        except httpx.TransportError as exc:  # the connection cut mid-stream
            raise TransientError(redact(f"openai: the stream broke: {type(exc).__name__}: {exc}") or "") from None

    def _streamed(self, kwargs: dict[str, Any], timeout: float, stream_to: Any) -> ChatCompletion:
        """The completion as a stream: each piece of text to ``stream_to(text so far)``, then the whole reply as one
        ``chat.completion``. The timeout bounds the whole stream (httpx's bounds each read only)."""
        began = self._clock()
        text, shown, refusal, finish, usage, last = "", "", "", None, None, None
        with self._client.chat.completions.create(**kwargs, stream=True,
                                                  stream_options={"include_usage": True}) as chunks:
            for chunk in chunks:
                last = chunk
                usage = chunk.usage or usage
                for choice in chunk.choices[:1]:
                    if choice.delta.content:
                        text += choice.delta.content
                        now = strip_reasoning(text)  # a reasoning model's thinking is not shown either
                        if now and now != shown:
                            shown = now
                            stream_to(shown)
                    refusal += getattr(choice.delta, "refusal", None) or ""
                    finish = choice.finish_reason or finish
                if self._clock() - began > timeout:
                    raise CallTimeoutError(f"openai: the stream outlived its {timeout:.0f} s timeout")
        if finish is None:  # closed cleanly but cut short: never take half an answer for a whole one
            raise TransientError("openai: the stream ended without a finish_reason")
        # model_construct: the server's finish_reason is taken as sent (llama.cpp's need not be OpenAI's)
        message = ChatCompletionMessage.model_construct(role="assistant", content=text or None,
                                                        refusal=refusal or None)
        return ChatCompletion.model_construct(
            id=last.id, object="chat.completion", created=last.created, model=last.model, usage=usage,
            choices=[Choice.model_construct(index=0, finish_reason=finish, message=message, logprobs=None)])

    def chat(self, turns: list[ChatTurn], *, stage: str, prompt_name: str, prompt_hash: str,
             response_schema: dict | None = None) -> ChatReply:
        """One chat completion over the whole conversation; never raises for call failures."""
        record = new_call_record(role=self.role, backend=self.backend, model=self.model, stage=stage,
                                 prompt_name=prompt_name, prompt_hash=prompt_hash)
        messages = [{"role": "assistant" if t.role == "model" else "user", "content": t.text} for t in turns]
        watch = Stopwatch(self._clock)
        stream_to = progress(stage) if self.stream and stage in STREAMED_STAGES else None
        try:
            completion, record.attempts = self._guard.call(
                lambda timeout: self._complete(messages, response_schema, timeout, stream_to),
                timeout=self.timeout_s, paid=True)
        except BackendError as exc:
            record.latency_s = watch.elapsed()
            record.attempts = getattr(exc, "attempts", 1)
            record.status, record.error = error_status(exc), redact(str(exc))
            overflow = (exc.tokens, exc.limit) if isinstance(exc, ContextLengthError) else None
            return ChatReply(None, record, overflow)
        record.latency_s = watch.elapsed()
        self._record_usage(record, completion)
        text, record.status, record.error = _reply_text(completion)
        return ChatReply(text, record)

    def _record_usage(self, record: Any, completion: Any) -> None:
        usage = getattr(completion, "usage", None)
        if usage is not None:
            details = getattr(usage, "completion_tokens_details", None)
            reasoning = (getattr(details, "reasoning_tokens", None) or 0) if details else 0
            record.tokens_in = usage.prompt_tokens
            record.tokens_thinking = reasoning
            record.tokens_out = max(0, (usage.completion_tokens or 0) - reasoning)
        record.cost_usd = estimate_cost(self.price, record.tokens_in, record.tokens_out, record.tokens_thinking)
        if self._guard.budget is not None:
            tokens = (record.tokens_in or 0) + (record.tokens_out or 0) + (record.tokens_thinking or 0)
            self._guard.budget.charge(usd=record.cost_usd, tokens=tokens)


def _reply_text(completion: Any) -> tuple[str | None, str, str | None]:
    """The answer (reasoning stripped), the call status and an error for non-ok replies."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        return None, "empty", "the reply has no choices"
    choice = choices[0]
    message = choice.message
    if choice.finish_reason == "content_filter" or getattr(message, "refusal", None):
        return None, "blocked", f"reply withheld: {getattr(message, 'refusal', None) or 'content_filter'}"
    text = strip_reasoning(message.content or "")
    if not text:
        if choice.finish_reason == "length":
            return None, "truncated", "no answer text before the output token limit"
        return None, "empty", f"the reply has no text (finish_reason {choice.finish_reason})"
    if choice.finish_reason == "length":
        return text, "truncated", "the answer was cut at the output token limit"
    return text, "ok", None
