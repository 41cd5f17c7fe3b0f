"""The query plan's job (prompt A.1): the question rewritten into 1..n search queries."""

from __future__ import annotations

from hifirag_core.language import language_name
from hifirag_core.llm.job import ModelJob, failed_status, object_schema
from hifirag_core.llm.parsing import parse_queries
from hifirag_core.llm.prompts import query_range
from hifirag_core.types import Decision


class QueryPlanner(ModelJob):
    """A.1: search queries for a question; an unusable reply falls back to the raw question."""

    prompt_name = "query_plan"
    variables = frozenset({"question", "query_range"})

    def plan(self, question: str, *, max_queries: int, language: str | None = None) -> Decision[list[str]]:
        """1..max_queries search queries. ``language``: a question not in English gets ``query_language.txt``
        (search in its language, and in English where that helps)."""
        extra = self.setup.prompts["query_language"].render(language=language_name(language)) if language else ""
        reply = self.ask(object_schema("queries", "string"), question=question, query_range=query_range(max_queries),
                         extra=extra)
        if reply.text is not None:
            parsed = parse_queries(reply.text, max_queries=max_queries)
            if parsed.ok:
                return Decision(parsed.value, method="llm", calls=[reply.call])
            status, error = "parse_error", parsed.error
        else:
            status, error = failed_status(reply), reply.call.error or "no reply"
        return Decision([question], method="llm+fallback:raw_question", calls=[reply.call], status=status,
                        error=error)
