"""Gemini with Google Search grounding as a search provider (``backends.search=gemini-grounding``).

Kept apart from :mod:`hifirag_core.backends.grounding`, which reads grounding metadata for the Gemini model
itself: this module builds on both, and neither imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hifirag_core.backends.gemini import GeminiChatModel
from hifirag_core.backends.grounding import SearchGroundedModel
from hifirag_core.errors import PermanentError
from hifirag_core.llm.prompts import Prompt, load_prompt
from hifirag_core.secrets import get_secret
from hifirag_core.types import SearchHit


class GroundingSearchBackend:
    """A ``SearchBackend``: one grounded Gemini call per query; the pages it cites are the results, in the order of
    ``groundingChunks``, each with the reply's sentences it supports as the snippet.

    The URLs are Gemini's ``grounding-api-redirect`` links (see the module docstring): the fetcher follows them to
    the page. Site rules see the redirect's host until then, so with ``sites`` set every result is ruled out
    before it is read; use another provider for site-restricted questions. The call's tokens are charged to the
    run's budget like any Gemini call.
    """

    provider = "gemini-grounding"

    def __init__(self, model: SearchGroundedModel, prompt: Prompt):
        self._model = model
        self._prompt = prompt
        self.identity = f"gemini-grounding|{getattr(model, 'model', '')}|{prompt.hash}"

    def search(self, query: str, *, num: int, steer: Any = None) -> list:
        """The grounded reply's sources, at most ``num``."""
        reply = self._model.chat_with_search(self._prompt.render(query=query), seed=None, stage="search",
                                             prompt_name="grounded_search", prompt_hash=self._prompt.hash)
        if reply.text is None:
            raise PermanentError(f"gemini-grounding: {reply.call.status}: {reply.call.error or 'no reply'}")
        grounding = reply.grounding
        if grounding is None:
            return []
        hits = []
        for source in grounding.sources:
            if not source.uri.startswith(("http://", "https://")):
                continue
            said = " ".join(s.text for s in grounding.supports if source.index in s.sources)
            hits.append(SearchHit(title=source.title or source.domain or "", url=source.uri, snippet=" ".join(said.split())))
        return hits[:num]


def build_search(cfg, guards, env) -> GroundingSearchBackend:
    """The backend of the ``gemini-grounding`` row (hifirag_core.backend_registry)."""
    model = cfg.backends.grounding_model
    custom = Path(cfg.prompts.dir) if cfg.prompts.dir else None
    # a custom prompts folder may leave this one out: the project's own is used then
    prompt = load_prompt("grounded_search", custom if custom and (custom / "grounded_search.txt").is_file() else None)
    return GroundingSearchBackend(GeminiChatModel(
        model=model, role="search", api_key=get_secret("gemini_api_key", env), guard=guards.guard("gemini", model),
        timeout_s=cfg.limits.search_timeout_s * 2, price=cfg.models.prices.get(model),
        base_url=cfg.models.gemini_base_url, temperature=cfg.models.temperature), prompt)
