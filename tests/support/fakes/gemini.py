"""A fake Gemini API: ``POST /{v1,v1beta}/models/{model}:generateContent`` in the real wire format.

Streamed, ``POST .../models/{model}:streamGenerateContent?alt=sse``: server-sent events, each ``data:
{GenerateContentResponse}`` followed by a blank line (``\r\n\r\n``, as the API frames them), a few words of
text per chunk (``stream_words``), ``stream_gap_s`` apart; every chunk carries the prompt's
``usageMetadata``, the last one the ``finishReason`` and the whole call's counts.

Request: ``contents[]`` (``role``, ``parts[].text``), optional ``systemInstruction``, ``tools``
and ``generationConfig`` (``responseMimeType``, ``responseSchema``/``responseJsonSchema``,
``seed``), API key in the ``x-goog-api-key`` header or ``?key=``. Reply:
``candidates[0].content.parts[].text``, ``finishReason``, ``usageMetadata`` with prompt, candidate
and thought token counts. With the ``googleSearch`` tool, the test-set prompt (A.6) is answered
from ``fresh_web`` with ``candidates[0].groundingMetadata`` as the real API sends it:
``webSearchQueries``, ``searchEntryPoint``, ``groundingChunks[].web.{uri, title}`` (the uri a
``/grounding-api-redirect/<token>`` link on this fake that redirects to the page, the title the
page's domain) and ``groundingSupports[]`` whose segments count UTF-8 bytes of the part. The
``gemini-grounding`` search provider's prompt is answered the same way from ``search_web(query, n)`` (the
default test web): a sentence per page found, each the support of its page's chunk.
``responseSchema`` is checked as the Developer API checks it: only the fields of its ``Schema``
message (an OpenAPI subset without ``additionalProperties``) and its types, else 400
``INVALID_ARGUMENT``; a JSON reply is shaped to an object schema (``{"urls": [...]}``). Errors use
Google's ``{"error": {"code", "message", "status", "details"}}``; the rpm limit answers 429
``RESOURCE_EXHAUSTED`` with a ``google.rpc.RetryInfo`` delay. The limit is one window for every
model (an int) or, as the real API counts it, one window per model (a mapping model -> rpm).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from tests.support.fakes import llm_brain
from tests.support.fakes.server import FakeServer, Fault, Request, Response

_PATH = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$")
_REDIRECT = re.compile(r"^/grounding-api-redirect/([A-Za-z0-9_-]+)$")


@dataclass(frozen=True)
class FreshFact:
    """A question-answer pair the fake "finds" with its search tool, and the pages that back it."""

    query: str
    reference: str
    urls: tuple[str, ...] = ()


# The fields of the Developer API's Schema message (https://ai.google.dev/api/caching#Schema).
SCHEMA_FIELDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default", "items", "minimum", "maximum",
})
SCHEMA_TYPES = frozenset({"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})


def schema_problem(schema: object, where: str = "generation_config.response_schema") -> str | None:
    """Why the API would refuse this ``responseSchema`` (None when it would not)."""
    if not isinstance(schema, dict):
        return f"Invalid value at '{where}': expected a Schema object"
    for key, value in schema.items():
        if key not in SCHEMA_FIELDS:
            return f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': Cannot find field."
        if key == "type" and str(value).upper() not in SCHEMA_TYPES:
            return f"Invalid value at '{where}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), \"{value}\""
    children = [(f"{where}.items", schema["items"])] if "items" in schema else []
    children += [(f"{where}.properties[{k}].value", v) for k, v in (schema.get("properties") or {}).items()]
    for path, child in children:
        found = schema_problem(child, path)
        if found:
            return found
    return None


def google_error(code: int, status: str, message: str, details: list | None = None) -> dict:
    """Google's JSON error body."""
    error: dict = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


def retry_info(seconds: float) -> dict:
    """A ``google.rpc.RetryInfo`` detail."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{int(seconds)}s"}


class GeminiFake(FakeServer):
    """Answers the paper's prompts deterministically; counts calls per prompt kind and model."""

    name = "gemini"

    def __init__(self, *, api_key: str = "fake-gemini-key", thinking_tokens: Mapping[str, int] | None = None,
                 latency: float | Callable[[Request], float] | Mapping[str, float] = 0.0,
                 rpm: int | Mapping[str, int] | None = None, fence_json_without_schema: bool = True,
                 fresh_web: Sequence[FreshFact] = (), knowledge: Mapping[str, str] | None = None,
                 context_tokens: int | None = None, stream_gap_s: float = 0.0, stream_words: int = 4,
                 search_web: Callable[[str, int], Sequence] | None = None):
        super().__init__(latency=0.0, rpm=None if isinstance(rpm, Mapping) else rpm)
        # streamed replies: words per chunk and seconds between chunks (after the request's latency)
        self.stream_gap_s = stream_gap_s
        self.stream_words = stream_words
        self.streamed: Counter[str] = Counter()  # streamed replies per prompt kind
        # Gemini's quotas are per model and project; a mapping keeps one window per model.
        self.model_rpm: dict[str, int] | None = dict(rpm) if isinstance(rpm, Mapping) else None
        self.api_key = api_key
        self.thinking_tokens = dict(thinking_tokens or {"gemini-2.5-pro": 40, "gemini-2.5-flash": 10})
        self.kind_latency = latency
        self.fence_json_without_schema = fence_json_without_schema
        self.kinds: Counter[str] = Counter()
        self.models: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self._count_lock = threading.Lock()
        # What the search tool finds for the test-set prompt, and what the model knows without
        # searching (Baseline Q answers these questions with these texts).
        self.fresh_web = list(fresh_web)
        self.knowledge = dict(knowledge or {})
        self.search_web = search_web  # what the search tool finds for the grounded-search prompt
        self._redirects: dict[str, str] = {}
        # a window: a longer prompt gets the API's 400 INVALID_ARGUMENT (``input_too_long``)
        self.context_tokens = context_tokens
        self.refused: list[int] = []

    def request_latency(self, request: Request) -> float:
        """Per prompt kind (``query_plan`` ...), per role (``filter``/``writer``), or a callable."""
        lat = self.kind_latency
        if callable(lat):
            return lat(request)
        if isinstance(lat, Mapping):
            kind = llm_brain.prompt_kind(_last_user_text(request.json() or {}))
            role = "writer" if kind in llm_brain.WRITER_KINDS else "filter"
            return float(lat.get(kind, lat.get(role, 0.0)))
        return float(lat)

    def rpm_window(self, request: Request) -> tuple[str, int | None]:
        """Per model when ``rpm`` was a mapping (models it does not name are unlimited)."""
        if self.model_rpm is None:
            return super().rpm_window(request)
        m = _PATH.match(request.path)
        model = m.group(2) if m else ""
        return model, self.model_rpm.get(model)

    def rate_limited(self, request: Request, retry_after: float) -> Response:
        """Gemini's quota error."""
        return Response(429, google_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
                                          [retry_info(max(1.0, retry_after))]))

    def route(self, request: Request) -> Response:
        redirect = _REDIRECT.match(request.path)
        if request.method in ("GET", "HEAD") and redirect and redirect.group(1) in self._redirects:
            return Response(302, b"", {"Location": self._redirects[redirect.group(1)]}, content_type="text/html")
        m = _PATH.match(request.path)
        if request.method != "POST" or not m:
            return Response(404, google_error(404, "NOT_FOUND", f"no route for {request.method} {request.path}"))
        key = request.headers.get("x-goog-api-key") or request.param("key")
        if not key:
            return Response(403, google_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."))
        if key != self.api_key:
            return Response(400, google_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."))
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list) or not body["contents"]:
            return Response(400, google_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified"))
        model = m.group(2)
        config = body.get("generationConfig") or {}
        if "responseSchema" in config:
            problem = schema_problem(config["responseSchema"])
            if problem:
                return Response(400, google_error(400, "INVALID_ARGUMENT", problem))
        turns = [(c.get("role", "user"), "".join(p.get("text", "") for p in c.get("parts", [])))
                 for c in body["contents"]]
        if self.context_tokens is not None:
            counted = sum(llm_brain.approx_tokens(t) for _, t in turns)
            if counted > self.context_tokens:
                with self._count_lock:
                    self.refused.append(counted)
                return self.input_too_long(counted, self.context_tokens).response
        answer = llm_brain.reply(turns)
        wants_json = config.get("responseMimeType") == "application/json"
        text = answer.text
        grounding = None
        if answer.kind == "testset_fresh":
            text, grounding = self._fresh_pairs(turns[-1][1], int(config.get("seed") or 0), _searches(body))
        elif answer.kind == "grounded_search" and _searches(body):
            text, grounding = self._grounded_pages(turns[-1][1].rsplit("Query:", 1)[-1].strip())
        elif answer.kind == "baseline_q":
            text = self.knowledge.get(turns[-1][1].split("200 words.", 1)[-1].strip(), text)
        if answer.is_json and not wants_json and self.fence_json_without_schema:
            text = f"Here is the list:\n```json\n{text}\n```"
        elif answer.is_json and wants_json:
            text = llm_brain.shaped(text, config.get("responseSchema") or config.get("responseJsonSchema"))
        with self._count_lock:
            self.kinds[answer.kind] += 1
            self.models[model] += 1
            self.bodies.append(body)
        prompt_tokens = sum(llm_brain.approx_tokens(t) for _, t in turns)
        out_tokens = llm_brain.approx_tokens(text)
        thoughts = self.thinking_tokens.get(model, 0)
        usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens,
                 "totalTokenCount": prompt_tokens + out_tokens + thoughts}
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        candidate: dict = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        if grounding is not None:
            candidate["groundingMetadata"] = grounding
        reply = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
                 "responseId": uuid.uuid4().hex[:20]}
        if m.group(3) == "streamGenerateContent":
            with self._count_lock:
                self.streamed[answer.kind] += 1
            return self._stream(reply, request.param("alt") == "sse")
        return Response(200, reply)

    def _stream(self, reply: dict, sse: bool) -> Response:
        """``reply`` as the API streams it: the text in chunks, the finishReason and full usage on the last.

        With ``alt=sse`` server-sent events; without it the API sends one JSON array of the chunks.
        """
        candidate, usage = reply["candidates"][0], reply["usageMetadata"]
        pieces = llm_brain.stream_pieces(candidate["content"]["parts"][0]["text"], self.stream_words)
        running = {k: v for k, v in usage.items() if k != "candidatesTokenCount"}
        running["totalTokenCount"] = usage["promptTokenCount"] + usage.get("thoughtsTokenCount", 0)
        chunks = []
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            part = {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
            if last:
                part |= {k: v for k, v in candidate.items() if k not in ("content", "index")}
            chunks.append({"candidates": [part], "usageMetadata": usage if last else running,
                           "modelVersion": reply["modelVersion"], "responseId": reply["responseId"]})
        if not sse:
            return Response(200, chunks)
        return Response(200, events=[b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks],
                        event_gap_s=self.stream_gap_s, content_type="text/event-stream")

    def redirect_uri(self, url: str) -> str:
        """The grounding-api-redirect link the fake hands out for ``url``."""
        token = hashlib.sha256(url.encode()).hexdigest()[:24]
        self._redirects[token] = url
        return f"{self.base_url}/grounding-api-redirect/{token}"

    def _fresh_pairs(self, prompt: str, seed: int, searched: bool) -> tuple[str, dict | None]:
        """A.6 answered with ``n`` facts of ``fresh_web`` (chosen by the seed, in a cycle, so a later
        seed repeats earlier facts), as fenced JSONL; with the search tool, grounded in their pages."""
        m = re.search(r"I need (\d+) question-answer pairs", prompt)
        n = int(m.group(1)) if m else 10
        pool = self.fresh_web
        facts = [pool[(seed * n + i) % len(pool)] for i in range(n)] if pool else []
        lines = [json.dumps({"query": f.query, "reference": f.reference}, ensure_ascii=False) for f in facts]
        text = "Here are the question-answer pairs:\n```jsonl\n" + "\n".join(lines) + "\n```"
        if not searched or not facts:
            return text, None
        chunks: list[dict] = []
        chunk_of: dict[str, int] = {}
        supports = []
        data = text.encode("utf-8")
        for fact, line in zip(facts, lines, strict=True):
            if not fact.urls:
                continue  # a pair the model wrote without a source
            for url in fact.urls:
                if url not in chunk_of:
                    chunk_of[url] = len(chunks)
                    chunks.append({"web": {"uri": self.redirect_uri(url), "title": urlsplit(url).hostname or ""}})
            quoted = json.dumps(fact.reference, ensure_ascii=False)[1:-1].encode("utf-8")
            start = data.index(line.encode("utf-8"))
            start = data.index(quoted, start)
            segment: dict = {"endIndex": start + len(quoted), "text": quoted.decode("utf-8")}
            if start:  # proto3 JSON leaves zeros out
                segment["startIndex"] = start
            supports.append({"segment": segment, "groundingChunkIndices": [chunk_of[u] for u in fact.urls],
                             "confidenceScores": [0.9] * len(fact.urls)})
        queries = [" ".join(f.query.split()[:6]) for f in facts]
        return text, {"webSearchQueries": list(dict.fromkeys(queries)),
                      "searchEntryPoint": {"renderedContent": "<div class=\"container\">Google Search</div>"},
                      "groundingChunks": chunks, "groundingSupports": supports}

    def _grounded_pages(self, query: str) -> tuple[str, dict]:
        """The grounded-search prompt answered from ``search_web``: one sentence per page, each supporting its
        page's chunk (segments in UTF-8 bytes, as the API counts them)."""
        from tests.support.fakes.web import default_web, search_lookup

        hits = search_lookup(self.search_web or default_web().search)(query, 5)
        sentences = [f"{h.title} says: {' '.join(h.snippet.split())}".rstrip(".") + "." for h in hits]
        text = " ".join(sentences) or "I found no pages about it."
        chunks, supports, at = [], [], 0
        for i, (h, sentence) in enumerate(zip(hits, sentences, strict=True)):
            chunks.append({"web": {"uri": self.redirect_uri(h.link), "title": urlsplit(h.link).hostname or ""}})
            size = len(sentence.encode("utf-8"))
            segment: dict = {"endIndex": at + size, "text": sentence}
            if at:  # proto3 JSON leaves zeros out
                segment["startIndex"] = at
            supports.append({"segment": segment, "groundingChunkIndices": [i], "confidenceScores": [0.9]})
            at += size + 1
        return text, {"webSearchQueries": [query], "groundingChunks": chunks, "groundingSupports": supports,
                      "searchEntryPoint": {"renderedContent": "<div class=\"container\">Google Search</div>"}}

    # --- canned misbehaviour ----------------------------------------------------------------------

    @staticmethod
    def blocked_prompt(reason: str = "SAFETY") -> Fault:
        """The prompt itself was blocked: ``promptFeedback.blockReason`` and no candidates."""
        return Fault("status", Response(200, {
            "promptFeedback": {"blockReason": reason, "safetyRatings": [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]},
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
            "modelVersion": "gemini-2.5-flash",
        }))

    @staticmethod
    def safety_stop() -> Fault:
        """A candidate withheld for safety: ``finishReason: SAFETY`` and no content parts."""
        return Fault("status", Response(200, {
            "candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
                {"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}]}],
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        }))

    @staticmethod
    def empty_candidates() -> Fault:
        """A 200 with an empty ``candidates`` list."""
        return Fault("status", Response(200, {"candidates": [], "usageMetadata": {"promptTokenCount": 12,
                                                                                  "totalTokenCount": 12}}))

    @staticmethod
    def text_reply(text: str) -> Fault:
        """A normal reply with a chosen text (for parser quirks)."""
        return Fault("status", Response(200, {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25},
        }))

    @staticmethod
    def quota_exceeded(retry_after_s: int = 1, *, header: bool = True) -> Fault:
        """429 RESOURCE_EXHAUSTED with a RetryInfo delay (and a Retry-After header when ``header``)."""
        headers = {"Retry-After": str(retry_after_s)} if header else {}
        return Fault("status", Response(429, google_error(429, "RESOURCE_EXHAUSTED",
                                                          "Resource has been exhausted (e.g. check quota).",
                                                          [retry_info(retry_after_s)]), headers))

    @staticmethod
    def server_error(code: int = 500) -> Fault:
        """A 5xx with Google's error body."""
        status = {500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}.get(code, "INTERNAL")
        return Fault("status", Response(code, google_error(code, status, "An internal error has occurred.")))

    @staticmethod
    def input_too_long(tokens: int = 1_200_293, limit: int = 1_048_576) -> Fault:
        """The API's refusal of a prompt longer than the model's input window (400 INVALID_ARGUMENT)."""
        return Fault("status", Response(400, google_error(
            400, "INVALID_ARGUMENT", f"The input token count ({tokens}) exceeds the maximum number of tokens allowed "
                                     f"({limit}).")))

    @staticmethod
    def bad_request(message: str = "Invalid JSON payload received.") -> Fault:
        """A 400 INVALID_ARGUMENT (not retryable)."""
        return Fault("status", Response(400, google_error(400, "INVALID_ARGUMENT", message)))


def _searches(body: dict) -> bool:
    """Whether the request enables the Google Search tool (``googleSearch``, or ``google_search`` as REST allows)."""
    return any(isinstance(t, dict) and ("googleSearch" in t or "google_search" in t) for t in body.get("tools") or [])


def _last_user_text(body: dict) -> str:
    for content in reversed(body.get("contents") or []):
        if content.get("role", "user") == "user":
            return "".join(p.get("text", "") for p in content.get("parts", []))
    return ""
