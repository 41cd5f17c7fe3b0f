"""The follow-up turn's job (ours, beyond the paper; ``prompts/restate.txt``): a question that names the answer it
follows, rewritten to stand alone before the query plan (A.1) plans its searches."""

from __future__ import annotations

from hifirag_core.llm.job import ModelJob, failed_status
from hifirag_core.llm.parsing import parse_restated
from hifirag_core.turns import ThreadContext, merged_question
from hifirag_core.types import Decision

RESTATED_SCHEMA = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"],
                   "additionalProperties": False}


class Restater(ModelJob):
    """A follow-up turn as a question that stands alone, from the thread's questions and the last answer (fenced as
    page text); an unusable reply falls back to the offline merge with the earlier questions' keywords."""

    prompt_name = "restate"
    variables = frozenset({"question", "earlier", "web_content"})

    def restate(self, question: str, thread: ThreadContext) -> Decision[str]:
        earlier = "\n".join(f"{n}. {q}" for n, q in enumerate(thread.questions, 1)) or "(none)"
        reply = self.ask(RESTATED_SCHEMA, question=question, earlier=earlier, web_content=thread.answer or "(no answer)")
        parsed = parse_restated(reply.text) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            return Decision(parsed.value[0], method="llm", calls=[reply.call])
        status, error = ((failed_status(reply), reply.call.error or "no reply") if parsed is None
                         else ("parse_error", parsed.error))
        return Decision(merged_question(question, thread), method="llm+fallback:offline-merge", calls=[reply.call],
                        status=status, error=error)
