"""The cheap model ("filter" role) through the paper's prompts: one job object per prompt.

:class:`LLMFilterModel` is what the stages call (the ``FilterModel`` protocol of ``hifirag_core.types``, which
the offline models implement too). It holds one job per prompt, each with its prompt check and its reply
parser: :class:`~hifirag_core.llm.query_planner.QueryPlanner` (A.1),
:class:`~hifirag_core.llm.url_selector.UrlSelector` (A.2), :class:`~hifirag_core.llm.section_ranker.SectionRanker`
(A.3), :class:`~hifirag_core.llm.citation_verifier.CitationVerifier` (A.5),
:class:`~hifirag_core.llm.restater.Restater` (ours: a follow-up turn made to stand alone), and, in a variant that looks again,
:class:`~hifirag_core.llm.sufficiency_checker.SufficiencyChecker` and
:class:`~hifirag_core.llm.followup_planner.FollowupPlanner` (ours). The jobs share one ``ModelSetup`` (the chat,
the prompts, the window, the fallbacks' scoring), which may be changed on the model after it is made. A job
never raises for a bad reply: see ``hifirag_core.llm.job`` for its statuses and fallbacks. Adding a job is one
module with its class and one method here.
"""

from __future__ import annotations

from hifirag_core.llm.citation_verifier import CitationVerifier
from hifirag_core.llm.followup_planner import FollowupPlanner
from hifirag_core.llm.job import PARSER_VERSION, Fallback, ModelSetup, Scorer, Support, chat_identity
from hifirag_core.llm.prompts import RESEARCH_PROMPTS, PromptSet
from hifirag_core.llm.query_planner import QueryPlanner
from hifirag_core.llm.restater import Restater
from hifirag_core.llm.section_ranker import SectionRanker
from hifirag_core.llm.sufficiency_checker import SufficiencyChecker
from hifirag_core.llm.url_selector import UrlSelector
from hifirag_core.llm.window import PromptWindow
from hifirag_core.turns import ThreadContext
from hifirag_core.types import (
    ChatModel,
    Decision,
    PageOverview,
    SectionPreview,
    SentenceCitation,
    SourceDoc,
    SourceSection,
    Sufficiency,
    UrlCandidate,
)


class LLMFilterModel:
    """The cheap model's jobs, through the paper's prompts A.1, A.2, A.3 and A.5 (and ours of looking again)."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, url_fallback: Fallback = "top_k",
                 section_fallback: Fallback = "top_k", citation_fallback: Fallback = "keep_all",
                 scorer: Scorer | None = None, support: Support | None = None, url_fallback_k: int = 6,
                 section_fallback_k: int = 4, window: PromptWindow | None = None):
        # the model's window: prompts carrying page text are split or trimmed to fit it (None: sent as they are)
        self.setup = ModelSetup(chat, prompts, window, scorer, support)
        self.query_planner = QueryPlanner(self.setup)
        self.url_selector = UrlSelector(self.setup, fallback=url_fallback, fallback_k=url_fallback_k)
        self.section_ranker = SectionRanker(self.setup, fallback=section_fallback, fallback_k=section_fallback_k)
        self.citation_verifier = CitationVerifier(self.setup, fallback=citation_fallback)
        self.restater = Restater(self.setup)
        hashes = {n: prompts[n].hash for n in ("query_plan", "url_filter", "section_rank", "citations")}
        # the prompts of looking again, when the config loaded them (a variant that looks again)
        hashes |= {n: prompts[n].hash for n in RESEARCH_PROMPTS if prompts.has(n)}
        # a follow-up turn's restatement (ours): keys only a follow-up's query plan (job_identity("restate"))
        self.prompt_hashes = hashes | {"restate": prompts["restate"].hash}
        self.steering_hashes = {"query_plan": f"query_language={prompts['query_language'].hash}"}
        self._fallbacks = {"url_filter": url_fallback, "section_rank": section_fallback,
                           "citations": citation_fallback, "sufficiency": "lexical", "followup": "offline",
                           "restate": "offline-merge"}
        self.identity = (
            f"llm-filter/v{PARSER_VERSION}|{chat_identity(chat)}|"
            + ",".join(f"{n}={h}" for n, h in hashes.items())
            + f"|fallback={url_fallback}:{url_fallback_k},{section_fallback}:{section_fallback_k},{citation_fallback}"
            + f"|scorer={'yes' if scorer else 'order'}|support={'yes' if support else 'none'}"
        )

    # the shared setup, as attributes of the model (tests and the wiring read and set them)
    chat = property(lambda self: self.setup.chat)
    prompts = property(lambda self: self.setup.prompts, lambda self, v: setattr(self.setup, "prompts", v))
    window = property(lambda self: self.setup.window, lambda self, v: setattr(self.setup, "window", v))
    scorer = property(lambda self: self.setup.scorer)
    support = property(lambda self: self.setup.support)

    def job_identity(self, job: str) -> str:
        """What one job's output depends on: backend, model, that job's prompt and fallback."""
        fallback = self._fallbacks.get(job, "raw_question")
        return (f"llm-filter/v{PARSER_VERSION}|{chat_identity(self.chat)}|"
                f"{job}={self.prompt_hashes[job]}|fallback={fallback}|scorer={'yes' if self.scorer else 'order'}"
                + (f"|support={'yes' if self.support else 'none'}" if job == "citations" else "")
                + (f"|{self.steering_hashes[job]}" if job in self.steering_hashes else ""))

    def plan_queries(self, question: str, *, max_queries: int, language: str | None = None) -> Decision[list[str]]:
        return self.query_planner.plan(question, max_queries=max_queries, language=language)

    def restate(self, question: str, thread: ThreadContext) -> Decision[str]:
        return self.restater.restate(question, thread)

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        return self.url_selector.select(question, candidates, max_urls=max_urls)

    def rank_sections(self, question: str, page: PageOverview, sections: list[SectionPreview], *,
                      max_sections: int) -> Decision[list[int]]:
        return self.section_ranker.rank(question, page, sections, max_sections=max_sections)

    def sections_fit(self, question: str, page: PageOverview, sections: list[SectionPreview]) -> bool:
        return self.section_ranker.fits(question, page, sections)

    def check_sufficiency(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        # made on first use: only a variant that looks again loads the prompts of looking again
        return SufficiencyChecker(self.setup).check(question, sections)

    def plan_followup(self, question: str, missing: list[str], earlier: list[str], *,
                      max_queries: int) -> Decision[list[str]]:
        return FollowupPlanner(self.setup).plan(question, missing, earlier, max_queries=max_queries)

    def verify_citations(self, question: str, answer: str, sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        return self.citation_verifier.verify(question, answer, sources)
