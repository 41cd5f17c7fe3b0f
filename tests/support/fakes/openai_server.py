"""A fake OpenAI-compatible server: ``POST /v1/chat/completions`` in the real wire format.

Request: ``model``, ``messages[]`` (``role``, ``content``), optional ``response_format``; key as
``Authorization: Bearer``. Reply: a ``chat.completion`` object with ``choices[0].message.content``,
``finish_reason`` and ``usage``. Errors: ``{"error": {"message", "type", "param", "code"}}``.
``response_format`` ``json_schema`` is checked as OpenAI's structured outputs check it (400 otherwise):
a ``name``, a schema whose root is an object, and with ``strict: true`` every object closed with
``additionalProperties: false`` and every property in ``required``; a JSON reply is shaped to the
schema (``{"urls": [...]}``) as constrained decoding would. With
``think=True`` every answer starts with a ``<think>…</think>`` block, as open reasoning models
(DeepSeek-R1, Qwen3) served by vLLM or Ollama emit it.

With ``"stream": true`` the reply is server-sent events: ``data: {chat.completion.chunk}`` lines (the first
with the role, then a few words of content each, ``stream_words`` per chunk and ``stream_gap_s`` apart, then
one with ``finish_reason`` and an empty delta), with ``stream_options.include_usage`` a last chunk with empty
``choices`` and the ``usage`` (the others carrying ``"usage": null``), then ``data: [DONE]``. ``stream_usage=False``
leaves the usage chunk out whatever the request asks, as llama-cpp-python's server does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping

from tests.support.fakes import llm_brain
from tests.support.fakes.server import FakeServer, Fault, Request, Response


def openai_error(message: str, type_: str, code: str | None = None) -> dict:
    """OpenAI's JSON error body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def schema_problem(response_format: dict) -> str | None:
    """Why OpenAI would refuse this ``response_format`` (None when it would not)."""
    if response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    name = spec.get("name")
    if not name:
        return "Missing required parameter: 'response_format.json_schema.name'."
    schema = spec.get("schema") or {}
    if schema.get("type") != "object" or "anyOf" in schema:
        return (f"Invalid schema for response_format '{name}': schema must be a JSON Schema of 'type: \"object\"', "
                f"got 'type: \"{schema.get('type')}\"'.")
    if spec.get("strict"):
        return _strict_problem(name, schema, ())
    return None


def _strict_problem(name: str, node: dict, path: tuple[str, ...]) -> str | None:
    """The first object in ``node`` that strict mode rejects: not closed, or a property not required."""
    context = f"In context=({', '.join(repr(p) for p in path)})"
    if node.get("type") == "object":
        if node.get("additionalProperties") is not False:
            return (f"Invalid schema for response_format '{name}': {context}, 'additionalProperties' is required "
                    "to be supplied and to be false.")
        properties = node.get("properties") or {}
        missing = [k for k in properties if k not in (node.get("required") or [])]
        if missing:
            return (f"Invalid schema for response_format '{name}': {context}, 'required' is required to be "
                    f"supplied and to be an array including every key in properties. Missing '{missing[0]}'.")
        for key, child in properties.items():
            found = _strict_problem(name, child or {}, (*path, "properties", key))
            if found:
                return found
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        return _strict_problem(name, node["items"], (*path, "items"))
    return None


# How each OpenAI-compatible server refuses a prompt longer than its window (HTTP 400), as each one words it.
OVERFLOW_FLAVORS = ("openai", "llama_cpp_python", "llama_server", "vllm")


def context_overflow(flavor: str, prompt_tokens: int, max_tokens: int | None, window: int) -> Response | None:
    """The 400 that server ``flavor`` sends for a prompt of ``prompt_tokens`` with ``max_tokens`` to generate in a
    ``window``-token context, or None when it fits. llama.cpp (llama-cpp-python's server and llama-server) refuse
    only a prompt that fills the window and shorten the reply otherwise; OpenAI and vLLM count the reply too."""
    wanted = prompt_tokens + (max_tokens or 0)
    if flavor in ("llama_cpp_python", "llama_server"):
        if prompt_tokens < window:
            return None
    elif wanted <= window:
        return None
    requested = (f"This model's maximum context length is {window} tokens. However, you requested {wanted} tokens "
                 f"({prompt_tokens} in the messages, {max_tokens or 0} in the completion). Please reduce the length "
                 "of the messages or completion.")
    if flavor == "openai":
        message = requested if max_tokens else (
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{prompt_tokens} tokens. Please reduce the length of the messages.")
        return Response(400, {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                                        "code": "context_length_exceeded"}})
    if flavor == "llama_cpp_python":
        return Response(400, {"error": {"message": requested, "type": "invalid_request_error", "param": "messages",
                                        "code": "context_length_exceeded"}})
    if flavor == "llama_server":
        return Response(400, {"error": {"code": 400, "message": f"request ({prompt_tokens} tokens) exceeds the "
                                        f"available context size ({window} tokens)",
                                        "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens,
                                        "n_ctx": window}})
    if flavor == "vllm":
        return Response(400, {"object": "error", "message": requested, "type": "BadRequestError", "param": None,
                              "code": 400})
    raise ValueError(f"unknown flavor {flavor!r}; known: {OVERFLOW_FLAVORS}")


class OpenAIFake(FakeServer):
    """Answers the paper's prompts deterministically; counts calls per prompt kind."""

    name = "openai"

    def __init__(self, *, api_key: str | None = "fake-openai-key", think: bool = False,
                 latency: float | Callable[[Request], float] | Mapping[str, float] = 0.0, rpm: int | None = None,
                 context_tokens: int | None = None, overflow_flavor: str = "openai", stream_gap_s: float = 0.0,
                 stream_words: int = 4, stream_usage: bool = True):
        super().__init__(latency=0.0, rpm=rpm)
        # streamed replies: words per chunk, seconds between chunks, and whether usage is sent when asked for
        self.stream_gap_s = stream_gap_s
        self.stream_words = stream_words
        self.stream_usage = stream_usage
        self.streamed: Counter[str] = Counter()  # streamed replies per prompt kind
        # a window: longer prompts get the 400 of server ``overflow_flavor`` (see ``context_overflow``)
        self.context_tokens = context_tokens
        self.overflow_flavor = overflow_flavor
        self.refused: list[int] = []  # the prompt tokens of each request refused as too long
        self.api_key = api_key
        self.think = think
        self.kind_latency = latency
        self.kinds: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self._count_lock = threading.Lock()

    def request_latency(self, request: Request) -> float:
        """Per prompt kind, per role (``filter``/``writer``), or a callable."""
        lat = self.kind_latency
        if callable(lat):
            return lat(request)
        if isinstance(lat, Mapping):
            body = request.json() or {}
            last = next((m.get("content", "") for m in reversed(body.get("messages") or []) if m.get("role") == "user"), "")
            kind = llm_brain.prompt_kind(last)
            return float(lat.get(kind, lat.get("writer" if kind in llm_brain.WRITER_KINDS else "filter", 0.0)))
        return float(lat)

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        """OpenAI's rate-limit error with Retry-After."""
        return Response(429, openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
                        {"Retry-After": str(max(1, int(retry_after + 0.999)))})

    def route(self, request: Request) -> Response:
        if request.method != "POST" or request.path.rstrip("/") != "/v1/chat/completions":
            return Response(404, openai_error(f"Unknown request URL: {request.method} {request.path}",
                                              "invalid_request_error", "unknown_url"))
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return Response(401, openai_error("Incorrect API key provided.", "invalid_request_error",
                                              "invalid_api_key"))
        body = request.json()
        if not isinstance(body, dict) or not body.get("messages") or not body.get("model"):
            return Response(400, openai_error("'messages' and 'model' are required", "invalid_request_error"))
        fmt = body.get("response_format") or {}
        problem = schema_problem(fmt)
        if problem:
            return Response(400, {"error": {"message": problem, "type": "invalid_request_error",
                                            "param": "response_format", "code": None}})
        turns = [("model" if m.get("role") == "assistant" else "user", str(m.get("content") or ""))
                 for m in body["messages"] if m.get("role") in ("user", "assistant")]
        prompt_tokens = sum(llm_brain.approx_tokens(t) for _, t in turns)
        if self.context_tokens is not None:
            refusal = context_overflow(self.overflow_flavor, prompt_tokens, body.get("max_tokens"), self.context_tokens)
            if refusal is not None:
                with self._count_lock:
                    self.refused.append(prompt_tokens)
                return refusal
        answer = llm_brain.reply(turns)
        text = answer.text
        wants_json = fmt.get("type") in ("json_schema", "json_object")
        if answer.is_json and not wants_json:
            text = f"```json\n{text}\n```"
        elif answer.is_json:
            schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")
            text = llm_brain.shaped(text, schema)
        reasoning = "The user wants a precise reply. Let me check the sources [9, 9] first."
        content = f"<think>\n{reasoning}\n</think>\n\n{text}" if self.think else text
        with self._count_lock:
            self.kinds[answer.kind] += 1
            self.bodies.append(body)
        completion_tokens = llm_brain.approx_tokens(content)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": body["model"]}
        if body.get("stream"):
            with self._count_lock:
                self.streamed[answer.kind] += 1
            with_usage = self.stream_usage and bool((body.get("stream_options") or {}).get("include_usage"))
            return self._stream(head, content, usage if with_usage else None)
        return Response(200, {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage,
        })

    def _stream(self, head: dict, content: str, usage: dict | None) -> Response:
        """The reply as ``chat.completion.chunk`` events: role, content pieces, finish_reason, usage, ``[DONE]``."""
        null_usage = {"usage": None} if usage is not None else {}

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**head, "object": "chat.completion.chunk", "system_fingerprint": "fp_fake",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **null_usage}

        chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
        chunks += [chunk({"content": piece}) for piece in llm_brain.stream_pieces(content, self.stream_words)]
        chunks.append(chunk({}, "stop"))
        if usage is not None:
            chunks.append({**head, "object": "chat.completion.chunk", "system_fingerprint": "fp_fake", "choices": [],
                           "usage": usage})
        events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
        return Response(200, events=events, event_gap_s=self.stream_gap_s, content_type="text/event-stream; charset=utf-8")

    @staticmethod
    def rate_limit(retry_after_s: int = 1) -> Fault:
        """429 with Retry-After."""
        return Fault("status", Response(429, openai_error("Rate limit reached for requests", "requests",
                                                          "rate_limit_exceeded"), {"Retry-After": str(retry_after_s)}))

    @staticmethod
    def context_length_exceeded(flavor: str = "openai", prompt_tokens: int = 8220, max_tokens: int | None = 256,
                                window: int = 8192) -> Fault:
        """Server ``flavor``'s refusal of a prompt longer than its window."""
        refusal = context_overflow(flavor, max(prompt_tokens, window), max_tokens, window)
        assert refusal is not None
        return Fault("status", refusal)

    @staticmethod
    def server_error(code: int = 500) -> Fault:
        """A 5xx."""
        return Fault("status", Response(code, openai_error("The server had an error while processing your request.",
                                                           "server_error")))

    @staticmethod
    def content_filtered() -> Fault:
        """A reply withheld by the content filter."""
        return Fault("status", Response(200, {
            "id": "chatcmpl-filtered", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None},
                         "finish_reason": "content_filter"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 0, "total_tokens": 10},
        }))
