"""Gemini through the ``google-genai`` client: one model per role, usage and cost per call.

Wire format (https://ai.google.dev/api/generate-content): ``POST /{version}/models/{model}:
generateContent`` with ``contents`` (``role`` ``user``/``model``, ``parts[].text``) and
``generationConfig`` (``responseMimeType``, ``responseSchema``); the reply carries
``candidates[].content.parts[].text`` (parts with ``thought: true`` are reasoning, not answer),
``candidates[].finishReason``, ``promptFeedback.blockReason`` when the prompt itself was blocked
(then there are no candidates) and ``usageMetadata`` (``promptTokenCount``,
``candidatesTokenCount``, ``thoughtsTokenCount``). Streamed (``POST .../models/{model}:streamGenerateContent?alt=sse``,
the writer's draft and refinement when ``limits.stream_writer`` is on), the reply comes as server-sent events,
each ``data:`` line one ``GenerateContentResponse`` holding the next piece of text; the last carries the
``finishReason`` and the whole call's ``usageMetadata``. ``responseSchema`` is the API's own subset of
OpenAPI 3.0 (https://ai.google.dev/api/caching#Schema: type, format, description, nullable, enum,
items, min/maxItems, properties, required, propertyOrdering, ...): it has no
``additionalProperties`` (the SDK refuses it outside Vertex AI), so :func:`gemini_schema` drops it
from the object-rooted schemas the pipeline builds. Errors are ``{"error": {"code", "message",
"status", "details"}}``; a 429 may carry ``google.rpc.RetryInfo``.

The client is built once per adapter with an injected ``httpx.Client`` (so timeouts and
connection errors are ordinary httpx exceptions) and kept for the adapter's lifetime: a client
that goes out of scope closes its connection pool mid-call. The SDK's own retries stay off; the
run's :class:`~hifirag_core.limits.ProviderGuard` owns retries, rate limits and the budget.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from hifirag_core.backends.grounding import GroundedReply, grounding_from_parts
from hifirag_core.backends.http_common import (
    Stopwatch,
    error_for_status,
    estimate_cost,
    new_call_record,
    reply_settings,
    transport_error,
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
from hifirag_core.llm.streaming import STREAMED_STAGES, progress
from hifirag_core.secrets import Secret, redact
from hifirag_core.types import ChatReply, ChatTurn

# finishReason values that mean the candidate was withheld, not finished
# (https://ai.google.dev/api/generate-content#FinishReason).
_BLOCKING_FINISH = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                              "IMAGE_SAFETY", "LANGUAGE"})


class GeminiChatModel:
    """A ``ChatModel`` for one Gemini model in one role (filter or writer)."""

    backend = "gemini"

    def __init__(self, *, model: str, role: str, api_key: Secret, guard: ProviderGuard, timeout_s: float,
                 price: ModelPrice | None, base_url: str | None = None, http_client: httpx.Client | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, clock: Any = time.monotonic,
                 stream: bool = False):
        self.model = model
        # draft and refine replies as streams (limits.stream_writer); not a reply setting: what comes back is
        # the same text, so it is no part of the cache identity
        self.stream = stream
        self.role = role
        self.timeout_s = timeout_s
        self.price = price
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.reply_settings = reply_settings(max_tokens, temperature)
        self._guard = guard
        self._clock = clock
        self._http = http_client or httpx.Client(timeout=timeout_s)
        options = genai_types.HttpOptions(base_url=base_url, timeout=int(timeout_s * 1000), httpx_client=self._http)
        # vertexai=False: never let GOOGLE_GENAI_USE_VERTEXAI in the environment reroute the calls.
        self._client = genai.Client(api_key=api_key.reveal(), vertexai=False, http_options=options)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def _config(self, schema: dict | None, timeout: float, **extra: Any) -> genai_types.GenerateContentConfig:
        kwargs: dict[str, Any] = {"http_options": genai_types.HttpOptions(timeout=max(1, int(timeout * 1000)))}
        if self.max_tokens is not None:
            kwargs["max_output_tokens"] = self.max_tokens
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if schema is not None:
            kwargs["response_mime_type"] = "application/json"
            kwargs["response_schema"] = gemini_schema(schema)
        return genai_types.GenerateContentConfig(**kwargs, **extra)

    def _generate(self, contents: list[genai_types.Content], schema: dict | None, timeout: float,
                  stream_to: Any = None, **extra: Any) -> genai_types.GenerateContentResponse:
        try:
            config = self._config(schema, timeout, **extra)
            if stream_to is not None:
                return self._streamed(contents, config, timeout, stream_to)
            return self._client.models.generate_content(model=self.model, contents=contents, config=config)
        except genai_errors.APIError as exc:
            headers = getattr(exc.response, "headers", None)
            body = json.dumps(exc.details) if exc.details is not None else (exc.message or "")
            raise error_for_status("gemini", int(exc.code or 0), headers, body) from None
        except httpx.TransportError as exc:
            raise transport_error("gemini", exc) from None
        except (json.JSONDecodeError, pydantic.ValidationError, genai_errors.UnknownApiResponseError) as exc:
            # A 200 whose body is cut short (the SDK raises JSONDecodeError, or for a stream
            # UnknownApiResponseError) or does not fit the response schema: the connection dropped
            # mid-reply; worth another try.
            raise TransientError(redact(f"gemini: unreadable response body: {exc}") or "") from None

    def _streamed(self, contents: list[genai_types.Content], config: genai_types.GenerateContentConfig,
                  timeout: float, stream_to: Any) -> genai_types.GenerateContentResponse:
        """``streamGenerateContent``: each piece of answer text to ``stream_to(text so far)``, then the whole reply
        as one response. The timeout bounds the whole stream (httpx's bounds each read only)."""
        began = self._clock()
        chunks: list[genai_types.GenerateContentResponse] = []
        text = ""
        for chunk in self._client.models.generate_content_stream(model=self.model, contents=contents,
                                                                 config=config):
            chunks.append(chunk)
            piece = _answer_text(chunk)
            if piece:
                text += piece
                stream_to(text)
            if self._clock() - began > timeout:
                raise CallTimeoutError(f"gemini: the stream outlived its {timeout:.0f} s timeout")
        return joined_response(chunks)

    def chat(self, turns: list[ChatTurn], *, stage: str, prompt_name: str, prompt_hash: str,
             response_schema: dict | None = None) -> ChatReply:
        """One generateContent call with the whole conversation; never raises for call failures."""
        contents = [genai_types.Content(role=t.role, parts=[genai_types.Part(text=t.text)]) for t in turns]
        response, record, overflow = self._call(contents, response_schema, stage=stage, prompt_name=prompt_name,
                                                prompt_hash=prompt_hash)
        if response is None:
            return ChatReply(None, record, overflow)
        text, record.status, record.error = _reply_text(response)
        return ChatReply(text, record)

    def chat_with_search(self, prompt: str, *, seed: int | None, stage: str, prompt_name: str,
                         prompt_hash: str) -> GroundedReply:
        """One call with Google Search grounding (``tools=[google_search]``): the reply and its sources.

        No response schema: the API refuses one next to the search tool, or silently drops the
        grounding (google-gemini/cookbook#1274), so the reply is text for a tolerant parser.
        """
        contents = [genai_types.Content(role="user", parts=[genai_types.Part(text=prompt)])]
        tools = [genai_types.Tool(google_search=genai_types.GoogleSearch())]
        response, record, _ = self._call(contents, None, stage=stage, prompt_name=prompt_name, prompt_hash=prompt_hash,
                                      tools=tools, seed=seed)
        if response is None:
            return GroundedReply(None, record, None)
        text, record.status, record.error = _reply_text(response)
        candidate = response.candidates[0] if response.candidates else None
        parts = candidate.content.parts if candidate is not None and candidate.content and candidate.content.parts else []
        grounding = grounding_from_parts(candidate.grounding_metadata if candidate is not None else None,
                                         [p.text if p.text and not p.thought else None for p in parts])
        return GroundedReply(text, record, grounding)

    def _call(self, contents: list[genai_types.Content], schema: dict | None, *, stage: str, prompt_name: str,
              prompt_hash: str, **extra: Any
              ) -> tuple[genai_types.GenerateContentResponse | None, Any, tuple[int | None, int | None] | None]:
        """The response (None when the call failed), its ``llm_calls`` record (usage filled in), and what the API
        said when it refused the prompt as too long (see ``ChatReply.overflow``)."""
        record = new_call_record(role=self.role, backend=self.backend, model=self.model, stage=stage,
                                 prompt_name=prompt_name, prompt_hash=prompt_hash)
        watch = Stopwatch(self._clock)
        stream_to = self._stream_to(stage) if not extra else None  # grounded calls are never streamed
        try:
            response, record.attempts = self._guard.call(
                lambda timeout: self._generate(contents, schema, timeout, stream_to, **extra),
                timeout=self.timeout_s, paid=True)
        except BackendError as exc:
            record.latency_s = watch.elapsed()
            record.attempts = getattr(exc, "attempts", 1)
            record.status, record.error = error_status(exc), redact(str(exc))
            return None, record, (exc.tokens, exc.limit) if isinstance(exc, ContextLengthError) else None
        record.latency_s = watch.elapsed()
        self._record_usage(record, response)
        return response, record, None

    def _stream_to(self, stage: str) -> Any:
        """Where a call's growing text goes when this model streams ``stage``'s replies (None: not streamed)."""
        return progress(stage) if self.stream and stage in STREAMED_STAGES else None

    def _record_usage(self, record: Any, response: genai_types.GenerateContentResponse) -> None:
        usage = response.usage_metadata
        if usage is not None:
            record.tokens_in = usage.prompt_token_count
            record.tokens_out = usage.candidates_token_count or 0
            record.tokens_thinking = usage.thoughts_token_count or 0
        record.cost_usd = estimate_cost(self.price, record.tokens_in, record.tokens_out, record.tokens_thinking)
        if self._guard.budget is not None:
            tokens = (record.tokens_in or 0) + (record.tokens_out or 0) + (record.tokens_thinking or 0)
            self._guard.budget.charge(usd=record.cost_usd, tokens=tokens)


def gemini_schema(schema: Any) -> Any:
    """A JSON schema as ``responseSchema`` takes it: ``additionalProperties`` removed at every level."""
    if isinstance(schema, dict):
        return {k: gemini_schema(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [gemini_schema(v) for v in schema]
    return schema


def _answer_text(chunk: genai_types.GenerateContentResponse) -> str:
    """The answer text one streamed chunk adds (thought parts excluded)."""
    candidate = chunk.candidates[0] if chunk.candidates else None
    parts = candidate.content.parts if candidate is not None and candidate.content and candidate.content.parts else []
    return "".join(p.text for p in parts if p.text and not p.thought)


def joined_response(chunks: list[genai_types.GenerateContentResponse]) -> genai_types.GenerateContentResponse:
    """A stream's chunks as the one response ``generateContent`` would have sent: the parts in order, the last
    ``finishReason`` and ``usageMetadata``, the prompt's feedback.

    A stream that ended without a chunk, or with candidates but no ``finishReason``, was cut short (the server
    or a proxy closed it cleanly mid-reply): a transient error, so half an answer is never taken for a whole
    one. Chunks without candidates (a blocked prompt, an empty reply) make the reply ``generateContent``
    would have sent, with its status.
    """
    if not chunks:
        raise TransientError("gemini: the stream ended before its first chunk")
    feedback = next((c.prompt_feedback for c in chunks if c.prompt_feedback is not None
                     and c.prompt_feedback.block_reason is not None), None)
    candidates = [c.candidates[0] for c in chunks if c.candidates]
    finish = next((c.finish_reason for c in reversed(candidates) if c.finish_reason is not None), None)
    if candidates and finish is None and feedback is None:
        raise TransientError(f"gemini: the stream ended without a finishReason after {len(chunks)} chunks")
    usage = next((c.usage_metadata for c in reversed(chunks) if c.usage_metadata is not None), None)
    parts = [p for c in candidates if c.content and c.content.parts for p in c.content.parts]
    joined = [genai_types.Candidate(content=genai_types.Content(role="model", parts=parts), finish_reason=finish,
                                    index=0)] if candidates else None
    return genai_types.GenerateContentResponse(candidates=joined, prompt_feedback=feedback, usage_metadata=usage)


def _reply_text(response: genai_types.GenerateContentResponse) -> tuple[str | None, str, str | None]:
    """The answer text (thought parts excluded), the call status and an error for non-ok replies."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        reason = getattr(feedback.block_reason, "value", feedback.block_reason)
        detail = f" ({feedback.block_reason_message})" if feedback.block_reason_message else ""
        return None, "blocked", f"prompt blocked: {reason}{detail}"
    if not response.candidates:
        return None, "empty", "the reply has no candidates"
    candidate = response.candidates[0]
    finish = candidate.finish_reason
    finish_name = str(getattr(finish, "value", finish)) if finish is not None else None
    parts = candidate.content.parts if candidate.content and candidate.content.parts else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    if finish_name in _BLOCKING_FINISH:
        return None, "blocked", f"reply withheld: finishReason {finish_name}"
    if not text.strip():
        if finish_name == "MAX_TOKENS":
            # 2.5 models can spend the whole output budget thinking and return no answer.
            return None, "truncated", "no answer text before the output token limit"
        return None, "empty", f"the reply has no text (finishReason {finish_name})"
    if finish_name == "MAX_TOKENS":
        return text, "truncated", "the answer was cut at the output token limit"
    return text, "ok", None

