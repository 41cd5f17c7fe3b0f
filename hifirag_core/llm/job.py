"""What every job of a model shares: its prompt, checked when the job is made, the call, and the fallbacks.

A job (``QueryPlanner``, ``UrlSelector``, ``SectionRanker``, ``SufficiencyChecker``, ``FollowupPlanner``,
``CitationVerifier``; the writer's two passes in ``llm.writer_model``) sends one prompt through a
``ChatModel`` and parses the reply with a pure, tolerant parser (``llm.parsing``). It never raises for a bad
reply. Its decision's ``status`` says what happened:

* ``ok``: the reply parsed;
* ``parse_error``: the reply came back but held no usable answer; the configured fallback was
  applied and ``method`` names it (``llm+fallback:top_k`` ...);
* the call's own status when no reply came back (``blocked``, ``empty``, ``failed``,
  ``timeout``, ``budget_exceeded``, ``deadline_exceeded``), with the same fallback applied.

Fallbacks: ``keep_all`` keeps every candidate; ``keep_none`` keeps none; ``top_k`` keeps the
``k`` best by the ``scorer`` given to the model (similarity of the question, or for citations
the answer, to each candidate's text; for example MiniLM cosine), or the first ``k`` in input
order (the search engine's or the page's order) when no scorer was given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from hifirag_core.llm.parsing import ParseResult
from hifirag_core.llm.prompts import PromptError, PromptSet
from hifirag_core.llm.window import PromptWindow
from hifirag_core.types import ChatModel, ChatReply, ChatTurn, Decision, SourceDoc

Fallback = Literal["keep_all", "keep_none", "top_k"]
# (query or answer, candidate texts) -> one similarity per candidate, in input order
Scorer = Callable[[str, list[str]], list[float]]
# (answer sentences, sources) -> (sentences x sources) support, e.g. attribution.citation_support
Support = Callable[[list[str], list[SourceDoc]], np.ndarray]

# 2: replies are requested as objects ({"urls": [...]}), citations per sentence.
PARSER_VERSION = "2"


def object_schema(key: str, item_type: str) -> dict:
    """The JSON schema of an object holding one list, ``{key: [item, ...]}``.

    Hosted structured outputs want an object at the root (OpenAI's strict mode rejects any other
    root, and needs ``additionalProperties: false`` and every property required), so the paper's JSON
    lists travel wrapped in one; the parsers accept the wrapped object and a bare list alike.
    """
    return {"type": "object", "properties": {key: {"type": "array", "items": {"type": item_type}}},
            "required": [key], "additionalProperties": False}


def apply_fallback(mode: Fallback, n: int, k: int, scores: Sequence[float] | None) -> list[int]:
    """Indices kept by a fallback over ``n`` candidates (``k`` bounds ``top_k`` only)."""
    if mode == "keep_all":
        return list(range(n))
    if mode == "keep_none":
        return []
    if mode == "top_k":
        if scores is None:
            return list(range(min(k, n)))
        order = sorted(range(n), key=lambda i: (-scores[i], i))
        return order[:k]
    raise ValueError(f"unknown fallback {mode!r}")


def chat_identity(chat: ChatModel) -> str:
    """Backend and model, and the reply settings that change what comes back (format, token ceiling)."""
    settings = getattr(chat, "reply_settings", "")
    return f"{chat.backend}|{chat.model}" + (f"|{settings}" if settings else "")


def failed_status(reply: ChatReply) -> str:
    """The status of a call that brought back no usable text."""
    return reply.call.status if reply.call.status != "ok" else "empty"


@dataclass
class ModelSetup:
    """What the jobs of one model share, and may be changed on the model after it is made: the chat, the
    prompts, the window (None: prompts are sent as they are) and the scoring functions of the fallbacks."""

    chat: ChatModel
    prompts: PromptSet
    window: PromptWindow | None = None
    scorer: Scorer | None = None
    support: Support | None = None

    def reply_tokens(self) -> int:
        return self.window.reply_tokens if self.window is not None else 0


class ModelJob:
    """One job of a model: its prompt (checked for the variables the job fills) and the call that sends it."""

    prompt_name: str = ""
    # the variables the job fills in its prompt; the prompt must use every one of them
    variables: frozenset[str] = frozenset()

    def __init__(self, setup: ModelSetup):
        self.setup = setup
        prompt = setup.prompts[self.prompt_name]
        if not self.variables <= prompt.variables:
            raise PromptError(f"prompt {self.prompt_name!r} does not use {sorted(self.variables - prompt.variables)}, "
                              f"which the {type(self).__name__} fills")

    @property
    def prompt_hash(self) -> str:
        return self.setup.prompts[self.prompt_name].hash

    def ask(self, schema: dict, *, extra: str = "", name: str | None = None, **values: str) -> ChatReply:
        """Send the job's prompt (or another of its model's, ``name``) filled with ``values``, the reply
        constrained to ``schema``."""
        prompt = self.setup.prompts[name or self.prompt_name]
        text = prompt.render(**values) + (f"\n{extra}" if extra else "")
        return self.setup.chat.chat([ChatTurn("user", text)], stage=prompt.name, prompt_name=prompt.name,
                                    prompt_hash=prompt.hash, response_schema=schema)

    def scores(self, query: str, texts: list[str]) -> list[float] | None:
        """The fallback's similarity of ``query`` to each text, or None without a scorer."""
        if self.setup.scorer is None or not texts:
            return None
        scores = list(self.setup.scorer(query, texts))
        if len(scores) != len(texts):
            raise ValueError(f"scorer returned {len(scores)} scores for {len(texts)} texts")
        return scores

    def index_decision(self, reply: ChatReply, parsed: ParseResult[int] | None, *, n: int, k: int,
                       fallback_k: int, fallback: Fallback, query: str, texts: list[str]) -> Decision[list[int]]:
        """A decision from parsed indices, or the fallback with the reason recorded."""
        if parsed is not None and parsed.ok:
            return Decision(parsed.value[:k], method="llm", calls=[reply.call])
        if parsed is None:  # no reply text at all
            status, error = failed_status(reply), reply.call.error or "no reply"
        else:
            status, error = "parse_error", parsed.error
        scores = self.scores(query, texts) if fallback == "top_k" else None
        kept = apply_fallback(fallback, n, min(k, fallback_k), scores)
        basis = "" if fallback != "top_k" else ("(similarity)" if scores is not None else "(input order)")
        return Decision(kept, method=f"llm+fallback:{fallback}{basis}", calls=[reply.call], status=status,
                        error=error, scores=scores)
