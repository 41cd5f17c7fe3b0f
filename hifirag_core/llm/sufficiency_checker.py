"""The sufficiency check's job (ours, beyond the paper; the research variants): does the evidence cover the
question, and what is missing?"""

from __future__ import annotations

from hifirag_core.evidence.sufficiency import check_coverage
from hifirag_core.llm.job import ModelJob, failed_status
from hifirag_core.llm.parsing import parse_sufficiency
from hifirag_core.llm.prompts import render_kept_sections
from hifirag_core.llm.window import fitted_count, retry_share
from hifirag_core.types import Decision, SourceSection, Sufficiency

SUFFICIENCY_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["sufficient", "partial", "not_found"]},
                   "covered": {"type": "array", "items": {"type": "string"}},
                   "missing": {"type": "array", "items": {"type": "string"}}},
    "required": ["verdict", "covered", "missing"], "additionalProperties": False,
}


class SufficiencyChecker(ModelJob):
    """Which parts of the question the kept sections (headings and leads) answer; an unusable reply falls back
    to the offline lexical check, and the method says so."""

    prompt_name = "sufficiency"
    variables = frozenset({"question", "web_content"})

    def check(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        if not sections:
            return Decision(Sufficiency("not_found", (), (question,)), method="llm")
        prompt, window = self.setup.prompts[self.prompt_name], self.setup.window
        # the kept sections in page order then rank: the last ones are left out when the list does not fit
        sent, note = fitted_count(window, lambda n: prompt.render(
            question=question, web_content=render_kept_sections(sections[:n])), len(sections), "kept sections")
        reply = self.ask(SUFFICIENCY_SCHEMA, question=question, web_content=render_kept_sections(sections[:sent]))
        if reply.overflow is not None and sent > 1:
            calls = [reply.call]
            sent = max(1, int(sent * retry_share(*reply.overflow, self.setup.reply_tokens())))
            note = f"{len(sections) - sent} of {len(sections)} kept sections left out after the model refused the " \
                   f"prompt as too long ({reply.call.error})"
            reply = self.ask(SUFFICIENCY_SCHEMA, question=question, web_content=render_kept_sections(sections[:sent]))
            calls.append(reply.call)
        else:
            calls = [reply.call]
        parsed = parse_sufficiency(reply.text) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            verdict, covered, missing = parsed.value[0]
            return Decision(Sufficiency(verdict, tuple(covered), tuple(missing)),  # type: ignore[arg-type]
                            method="llm" + ("+trimmed" if note else ""), calls=calls, error=note)
        status, error = ((failed_status(reply), reply.call.error or "no reply") if parsed is None
                         else ("parse_error", parsed.error))
        return Decision(check_coverage(question, sections), method="llm+fallback:lexical", calls=calls,
                        status=status, error=error)
