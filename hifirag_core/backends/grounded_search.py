"""Gemini with Google Search grounding as a search provider (``backends.search=gemini-grounding``).

Kept apart from :mod:`hifirag_core.backends.grounding`, which reads grounding metadata for the Gemini model
itself: this module builds on both, and neither imports it.
"""

from __future__ import annotations

from typing import Any

from hifirag_core.backends.gemini import GeminiChatModel
from hifirag_core.backends.grounding import SearchGroundedModel
from hifirag_core.errors import PermanentError
from hifirag_core.hashing import text_hash
from hifirag_core.secrets import get_secret
from hifirag_core.types import SearchHit

GROUNDED_SEARCH_PROMPT = ("Search the web for pages that answer the following query, and say in a few sentences "
                          "what each of the best pages says about it.\n\nQuery: {query}")


class GroundingSearchBackend:
    """A ``SearchBackend``: one grounded Gemini call per query; the pages it cites are the results, in the order of
    ``groundingChunks``, each with the reply's sentences it supports as the snippet.

    The URLs are Gemini's ``grounding-api-redirect`` links (see the module docstring): the fetcher follows them to
    the page. Site rules see the redirect's host until then, so with ``sites`` set every result is ruled out
    before it is read; use another provider for site-restricted questions. The call's tokens are charged to the
    run's budget like any Gemini call.
    """

    provider = "gemini-grounding"

    def __init__(self, model: SearchGroundedModel):
        self._model = model

    def search(self, query: str, *, num: int, steer: Any = None) -> list:
        """The grounded reply's sources, at most ``num``."""
        prompt = GROUNDED_SEARCH_PROMPT.format(query=query)
        reply = self._model.chat_with_search(prompt, seed=None, stage="search", prompt_name="grounded_search",
                                             prompt_hash=text_hash(GROUNDED_SEARCH_PROMPT))
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
    return GroundingSearchBackend(GeminiChatModel(
        model=model, role="search", api_key=get_secret("gemini_api_key", env), guard=guards.guard("gemini", model),
        timeout_s=cfg.limits.search_timeout_s * 2, price=cfg.models.prices.get(model),
        base_url=cfg.models.gemini_base_url, temperature=cfg.models.temperature))
