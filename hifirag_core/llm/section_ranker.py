"""Section ranking's job (prompt A.3): one page's useful sections, judged from heading + first 200 characters."""

from __future__ import annotations

from hifirag_core.llm.batch_ranking import BatchRanking, Values
from hifirag_core.llm.job import Fallback, ModelSetup, object_schema
from hifirag_core.llm.parsing import ParseResult, parse_section_indices
from hifirag_core.llm.prompts import render_page_overview, render_section_previews
from hifirag_core.types import ChatReply, Decision, PageOverview, SectionPreview


class SectionRanker(BatchRanking):
    """A.3: 0-based indices of the useful sections of one page, most useful first.

    A page whose section list does not fit the window is ranked in several calls, each on a run of
    consecutive sections; a page that fits is one call, as in the paper.
    """

    prompt_name = "section_rank"
    variables = frozenset({"question", "page_overview", "section_previews"})

    def __init__(self, setup: ModelSetup, *, fallback: Fallback = "top_k", fallback_k: int = 4):
        super().__init__(setup)
        self.fallback = fallback
        self.fallback_k = fallback_k  # how many top_k keeps when a reply is unusable

    def rank(self, question: str, page: PageOverview, sections: list[SectionPreview], *,
             max_sections: int) -> Decision[list[int]]:
        if not sections:
            return Decision([], method="llm")
        values = self.values(question, page, sections)

        def ask(batch: list[int]) -> tuple[ChatReply, ParseResult[int] | None]:
            reply = self.ask(object_schema("sections", "integer"), **values(batch))
            parsed = parse_section_indices(reply.text, n_sections=len(batch)) if reply.text is not None else None
            return reply, parsed

        return self.rank_in_batches(ask, values, n=len(sections), k=max_sections, fallback_k=self.fallback_k,
                                    fallback=self.fallback, query=question, texts=[s.preview for s in sections])

    def fits(self, question: str, page: PageOverview, sections: list[SectionPreview]) -> bool:
        """Whether one call ranks the page's sections (the window holds its whole section list)."""
        return len(self.batches(self.values(question, page, sections), len(sections))) == 1

    @staticmethod
    def values(question: str, page: PageOverview, sections: list[SectionPreview]) -> Values:
        overview = render_page_overview(page)
        return lambda batch: {"question": question, "page_overview": overview,
                              "section_previews": render_section_previews([sections[i] for i in batch])}
