"""The MMU-RAGent text-to-text service contract: request bodies, stream messages, and a checker.

What the organisers publish (AGI-LTI/MMU-RAGent-Preview ``pages/text-to-text.md``; their tester is
``Text-to-Text/local_test.py`` in AGI-LTI/MMU-RAG-Starter):

* ``GET /health``: 200 with a JSON body.
* ``POST /evaluate`` takes ``{"query", "iid"}`` and returns ``{"query_id": iid, "generated_response"}``;
  the static submission is those objects, one per line, in ``result.jsonl``.
* ``POST /run`` takes ``{"question"}`` and answers with Server-Sent Events: ``data: {json}`` lines, each
  followed by a blank line. Every object has ``intermediate_steps`` (Markdown or null, steps separated
  by ``|||---|||``), ``final_report`` (Markdown or null), ``is_intermediate`` and ``complete``;
  ``citations`` (a list of URLs) and ``error`` are optional. The stream thinks first
  (``is_intermediate: true``, ``final_report: null``), then answers (``is_intermediate: false``, the
  accumulated steps kept), and ends with ``complete: true``, the whole answer and its citations; an
  error ends it with ``error`` set and ``complete: true``.
* The whole process has a hard limit of 10 minutes (the competition's FAQ).

Ours, beyond the contract: both bodies take the optional steering fields ``sites``, ``exclude_sites``
(lists of domains, or one comma-separated string), ``after``, ``before`` (``YYYY-MM-DD``), ``language``
(``auto`` or a code) and ``length`` (``short``, ``standard``, ``long``), checked as a question file's
(``hifirag_core.steering``), ``depth``, the number of follow-up research rounds allowed (0 to the
service's ``research.max_rounds``), and ``follows``, the answer id (``<run_id>/<question_id>``, the
``X-HiFiRAG-Answer-Id`` of its response) of an earlier answer of this service that the question follows up
(``hifirag_core.turns``); the required fields are the contract's, unchanged, and without ``follows`` a
question is answered exactly as before. ``/run`` also takes
``render: "html"``, which adds each message's Markdown rendered (``hifirag_core.serving.rendering``).

Each message carries the whole state so far (every step, and the answer as far as it has been
written) rather than a delta: the last message alone is the complete answer, as the contract asks,
and RMIT's R2RAG (rmit-ir/NeurIPS-MMU-RAG ``src/tools/responses/mmu_rag_stream.py``) streams the same way.

Nothing here knows the pipeline; ``hifirag_core.serving.answer_report`` turns stage outputs into steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from hifirag_core.steering import (
    QUESTION_FIELDS,
    SteeringError,
    check_site_conflicts,
    check_window,
    day,
    language_setting,
    length_setting,
    site_list,
)
from hifirag_core.turns import ThreadError, parse_answer_id

STEP_SEPARATOR = "|||---|||"
COMPETITION_LIMIT_S = 600.0  # "a hard limit of 10 minutes for the entire process"
MEDIA_TYPE = "text/event-stream"  # the contract's preferred type (text/plain is also allowed)
CORE_FIELDS = ("intermediate_steps", "final_report", "is_intermediate", "complete")
# What a question without an answer gets where the format cannot mark an answer as missing (the static
# submission file, /evaluate, the end of a /run stream with no evidence to answer from).
NO_ANSWER_RESPONSE = "I could not find enough evidence to answer this question."
MAX_DEPTH = 5  # the most follow-up rounds any configuration allows (``ResearchConfig.max_rounds``)


class _Body(BaseModel):
    # Strict strings: a number where text belongs is a mistake to report, not to coerce. Unknown
    # fields are ignored, as a client of a published contract may send more than it names.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    @field_validator("*")
    @classmethod
    def _not_blank(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        return value


def _steering_check(check):
    def run(cls, value: Any, info) -> Any:
        if value is None:
            return None
        try:
            return check(value, info.field_name)
        except SteeringError as exc:
            raise ValueError(str(exc).removeprefix(f"{info.field_name}: ")) from None

    return classmethod(run)


class _Steered(_Body):
    """The optional steering fields (ours), as a question file's; absent or null: the service's own."""

    sites: tuple[str, ...] | None = None
    exclude_sites: tuple[str, ...] | None = None
    after: str | None = None
    before: str | None = None
    language: str | None = None
    length: str | None = None
    depth: int | None = None  # follow-up research rounds allowed (a variant that looks again); None: the service's
    # the answer id of the earlier answer this question follows (a follow-up turn); None: it follows none
    follows: str | None = None

    _sites = field_validator("sites", "exclude_sites", mode="before")(_steering_check(site_list))
    _days = field_validator("after", "before", mode="before")(
        _steering_check(lambda v, name: day(v, name).isoformat() if day(v, name) else None))
    _language = field_validator("language", mode="before")(_steering_check(language_setting))
    _length = field_validator("length", mode="before")(_steering_check(length_setting))

    @field_validator("follows")
    @classmethod
    def _answer_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_answer_id(value).id
        except ThreadError as exc:
            raise ValueError(str(exc).removeprefix("follows: ")) from None

    @model_validator(mode="after")
    def _possible(self):
        try:
            check_site_conflicts(self.sites or (), self.exclude_sites or ())
            check_window(day(self.after, "after"), day(self.before, "before"))
        except SteeringError as exc:
            raise ValueError(str(exc)) from None
        return self

    @field_validator("depth")
    @classmethod
    def _rounds(cls, value: int | None, info) -> int | None:
        """0 to the service's most (``parse_request``'s ``max_depth``, given as the validation context), so that
        every wrong depth gets the one message naming what this service takes."""
        if value is None:
            return None
        most = min(MAX_DEPTH, (info.context or {}).get("max_depth", MAX_DEPTH))
        if value < 0:
            raise ValueError(f"{value} follow-up rounds; send a whole number from 0 to {most}, or leave depth out")
        if value > most:
            never = " (its variant never looks again)" if most == 0 else ""
            raise ValueError(f"{value} follow-up rounds asked, this service runs at most {most}{never}; "
                             f"send a whole number from 0 to {most}, or leave depth out")
        return value

    def steering(self) -> dict[str, Any]:
        """The fields given, as ``Question.meta`` holds them (``depth`` too: the rounds it allows)."""
        values = {name: getattr(self, name) for name in (*QUESTION_FIELDS, "depth") if getattr(self, name) is not None}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


class RunRequest(_Steered):
    """``POST /run``."""

    question: str
    render: Literal["html"] | None = None  # ours: each message also carries its Markdown as safe HTML


class EvaluateRequest(_Steered):
    """``POST /evaluate``."""

    query: str
    iid: str

    @field_validator("iid")
    @classmethod
    def _printable(cls, value: str) -> str:
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("must not contain control characters")
        return value


Body = TypeVar("Body", bound=_Body)


class BadRequest(ValueError):
    """A request body the contract does not accept; ``problems`` name each, for the 422 reply."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def parse_request(raw: bytes, model: type[Body], *, max_chars: dict[str, int] | None = None,
                  max_depth: int | None = None) -> Body:
    """The body as ``model``, or ``BadRequest`` saying what is wrong with it and what to send instead.
    ``max_depth``: the most follow-up rounds this service runs (0: it never looks again)."""
    example = json.dumps({name: "..." for name, info in model.model_fields.items() if info.is_required()})
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadRequest(["the body is not UTF-8 text"]) from None
    except json.JSONDecodeError as exc:
        raise BadRequest([f"the body is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                          f"send {example} with Content-Type: application/json"]) from None
    if not isinstance(data, dict):
        raise BadRequest([f"the body must be a JSON object such as {example}, not {type(data).__name__}"])
    try:
        parsed = model.model_validate(data, context={"max_depth": MAX_DEPTH if max_depth is None else max_depth})
    except ValidationError as exc:
        raise BadRequest([_problem(err) for err in exc.errors()]) from None
    too_long = [f"{name}: {len(getattr(parsed, name)):,} characters; at most {limit:,} are accepted"
                for name, limit in (max_chars or {}).items() if len(getattr(parsed, name)) > limit]
    if too_long:
        raise BadRequest(too_long)
    return parsed


def _problem(err: Any) -> str:
    name = ".".join(str(p) for p in err["loc"]) or "body"
    if not err["loc"] and err["type"] == "value_error":  # a check of several fields: its message names them
        return err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"{name}: required"
    if err["type"] == "string_type":
        return f"{name}: must be a string, not {type(err['input']).__name__}"
    return f"{name}: {err['msg'].removeprefix('Value error, ')}"


@dataclass(frozen=True)
class StreamMessage:
    """One ``data:`` object of a ``/run`` stream."""

    intermediate_steps: str | None
    final_report: str | None
    is_intermediate: bool
    complete: bool
    citations: tuple[str, ...] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The four core fields always; ``citations`` and ``error`` only when set."""
        out: dict[str, Any] = {"intermediate_steps": self.intermediate_steps, "final_report": self.final_report,
                               "is_intermediate": self.is_intermediate, "complete": self.complete}
        if self.citations is not None:
            out["citations"] = list(self.citations)
        if self.error is not None:
            out["error"] = self.error
        return out

    def sse(self) -> bytes:
        """The contract's framing: ``data: {json}`` and a blank line."""
        return b"data: " + json.dumps(self.to_dict(), ensure_ascii=False).encode("utf-8") + b"\n\n"


class Transcript:
    """A stream's state so far: the steps shown, then the answer as written; builds each message."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.last: StreamMessage | None = None
        self._growing = False  # whether the last step is text still being written (replaced by the next step)

    @property
    def intermediate_steps(self) -> str | None:
        return STEP_SEPARATOR.join(self.steps) if self.steps else None

    def _keep(self, message: StreamMessage) -> StreamMessage:
        self.last = message
        return message

    def thinking(self, step: str) -> StreamMessage:
        """Add a step (in place of a step still being written); the message of the thinking phase."""
        if self._growing:
            self.steps.pop()
            self._growing = False
        self.steps.append(clean_step(step))
        return self._keep(StreamMessage(self.intermediate_steps, None, True, False))

    def writing(self, step: str) -> StreamMessage:
        """A step still being written (a draft as it grows): it replaces the previous such step, and the
        next finished step replaces it; a thinking message."""
        message = self.thinking(step)
        self._growing = True
        return message

    def answering(self, written: str) -> StreamMessage:
        """The answer phase: the answer as far as it is written."""
        return self._keep(StreamMessage(self.intermediate_steps, written, False, False))

    def complete(self, report: str, citations: Sequence[str]) -> StreamMessage:
        """The last message: the whole answer and its citations."""
        return self._keep(StreamMessage(self.intermediate_steps, report, False, True, tuple(citations)))

    def failed(self, error: str, report: str | None = None) -> StreamMessage:
        """The last message of a stream that could not answer."""
        return self._keep(StreamMessage(self.intermediate_steps, report, False, True, error=error))


def clean_step(markdown: str) -> str:
    """A step that cannot break the stream's step separation (a page title may hold anything)."""
    return markdown.replace(STEP_SEPARATOR, "|||-|||").strip() + "\n"


# --- reading a stream, as an independent client does ------------------------------------------------


@dataclass
class ParsedStream:
    """The objects of a stream, and what in its framing does not follow the contract."""

    messages: list[dict[str, Any]]
    problems: list[str]


def parse_sse(lines: Iterable[str]) -> ParsedStream:
    """Read a ``/run`` stream line by line (line endings removed).

    Every non-empty line must be ``data: {json}`` and each event must end with a blank line; an
    event of several ``data:`` lines is joined with newlines, as SSE defines.
    """
    messages: list[dict[str, Any]] = []
    problems: list[str] = []
    pending: list[str] = []
    n = 0
    for n, line in enumerate(lines, 1):
        if line == "":
            if pending:
                _decode("\n".join(pending), n, messages, problems)
                pending = []
            continue
        if line.startswith("data:"):
            pending.append(line[5:].removeprefix(" "))
        else:
            problems.append(f"line {n}: not a data line: {line[:60]!r}")
    if pending:
        problems.append("the last event is not followed by a blank line")
        _decode("\n".join(pending), n, messages, problems)
    return ParsedStream(messages, problems)


def _decode(data: str, line: int, messages: list[dict[str, Any]], problems: list[str]) -> None:
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        problems.append(f"event ending on line {line}: not JSON ({exc.msg})")
        return
    if not isinstance(obj, dict):
        problems.append(f"event ending on line {line}: not a JSON object")
        return
    messages.append(obj)


def check_messages(messages: Sequence[dict[str, Any]]) -> list[str]:
    """What in a stream's messages breaks the contract; empty when it follows it."""
    if not messages:
        return ["the stream holds no message"]
    problems: list[str] = []
    for i, m in enumerate(messages, 1):
        for name in CORE_FIELDS:
            if name not in m:
                problems.append(f"message {i}: no {name!r}")
        for name in ("intermediate_steps", "final_report"):
            if m.get(name) is not None and not isinstance(m[name], str):
                problems.append(f"message {i}: {name!r} must be a string or null")
        for name in ("is_intermediate", "complete"):
            if name in m and not isinstance(m[name], bool):
                problems.append(f"message {i}: {name!r} must be a boolean")
        if "citations" in m and not (isinstance(m["citations"], list)
                                     and all(isinstance(u, str) for u in m["citations"])):
            problems.append(f"message {i}: 'citations' must be a list of URL strings")
        if m.get("is_intermediate") is True and m.get("final_report") is not None:
            problems.append(f"message {i}: a thinking message (is_intermediate true) has a final_report")
        if m.get("complete") is True and i != len(messages):
            problems.append(f"message {i}: complete is true but {len(messages) - i} message(s) follow")
    if messages[0].get("is_intermediate") is not True:
        problems.append("the stream does not start with a thinking message (is_intermediate true)")
    flags = [m.get("is_intermediate") for m in messages]
    if any(a is False and b is True for a, b in zip(flags, flags[1:], strict=False)):
        problems.append("is_intermediate goes back to true after the answer began")
    last = messages[-1]
    if last.get("complete") is not True:
        problems.append("the last message does not have complete true")
    elif last.get("error") is None and not (isinstance(last.get("final_report"), str) and last["final_report"].strip()):
        problems.append("the last message has neither a final_report nor an error")
    thought = next((m.get("intermediate_steps") for m in reversed(messages) if m.get("is_intermediate") is True), None)
    for i, m in enumerate(messages, 1):
        steps = m.get("intermediate_steps")
        if m.get("is_intermediate") is False and thought and not (isinstance(steps, str) and steps.startswith(thought)):
            problems.append(f"message {i}: the answer phase dropped the accumulated intermediate_steps")
            break
    return problems
