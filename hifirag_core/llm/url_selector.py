"""The URL filter's job (prompt A.2): the search results worth reading, judged on title and snippet."""

from __future__ import annotations

from hifirag_core.llm.batch_ranking import BatchRanking
from hifirag_core.llm.job import Fallback, ModelSetup, object_schema
from hifirag_core.llm.parsing import ParseResult, parse_url_selection
from hifirag_core.llm.prompts import render_search_results
from hifirag_core.types import ChatReply, Decision, UrlCandidate


class UrlSelector(BatchRanking):
    """A.2: 0-based indices of the URLs worth reading, most useful first (in several calls when the results do
    not fit the window)."""

    prompt_name = "url_filter"
    variables = frozenset({"question", "search_results"})

    def __init__(self, setup: ModelSetup, *, fallback: Fallback = "top_k", fallback_k: int = 6):
        super().__init__(setup)
        self.fallback = fallback
        self.fallback_k = fallback_k  # how many top_k keeps when a reply is unusable

    def select(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        if not candidates:
            return Decision([], method="llm")

        def ask(batch: list[int]) -> tuple[ChatReply, ParseResult[int] | None]:
            chosen = [candidates[i] for i in batch]
            reply = self.ask(object_schema("urls", "string"), question=question,
                             search_results=render_search_results(chosen))
            parsed = (parse_url_selection(reply.text, candidate_urls=[c.url for c in chosen])
                      if reply.text is not None else None)
            return reply, parsed

        return self.rank_in_batches(
            ask, lambda batch: {"question": question,
                                "search_results": render_search_results([candidates[i] for i in batch])},
            n=len(candidates), k=max_urls, fallback_k=self.fallback_k, fallback=self.fallback,
            query=question, texts=[f"{c.title}\n{c.snippet}" for c in candidates])
