"""Citation verification's job (prompt A.5): the sources that directly support the answer, then each sentence's."""

from __future__ import annotations

from hifirag_core.evidence.attribution import (
    attribute_sentences,
    marked_sentences,
    source_scores,
    strip_markers,
)
from hifirag_core.llm.job import Fallback, ModelJob, ModelSetup, apply_fallback, failed_status, object_schema
from hifirag_core.llm.parsing import parse_source_numbers
from hifirag_core.llm.prompts import render_sources
from hifirag_core.llm.window import fit_sources, retry_share
from hifirag_core.types import Decision, SentenceCitation, SourceDoc


class CitationVerifier(ModelJob):
    """A.5: the sources that directly support the answer, then each sentence's own among them.

    The model reads the answer without the writer's ``[n]`` markers (the paper's writer writes none); the
    markers then decide between the sources the model kept, and otherwise the ``support`` function does (one
    source per sentence); without one, each sentence carries every source the model kept.
    """

    prompt_name = "citations"
    variables = frozenset({"answer", "web_content"})

    def __init__(self, setup: ModelSetup, *, fallback: Fallback = "keep_all"):
        super().__init__(setup)
        self.fallback = fallback

    def verify(self, question: str, answer: str, sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        claims = marked_sentences(answer)
        if not sources or not claims:
            return Decision([], method="llm")
        said = strip_markers(answer).strip()
        prompt, window = self.setup.prompts[self.prompt_name], self.setup.window

        def turns(docs: list[SourceDoc]) -> list[str]:
            return [prompt.render(answer=said, web_content=render_sources(docs))]

        sent, note = fit_sources(window, turns, sources)
        reply = self.ask(object_schema("sources", "integer"), answer=said, web_content=render_sources(sent))
        calls = [reply.call]
        if reply.overflow is not None and window is not None:
            share = retry_share(*reply.overflow, self.setup.reply_tokens())
            sent, note = fit_sources(window, turns, sent, share=share, refused=reply.call.error)
            reply = self.ask(object_schema("sources", "integer"), answer=said, web_content=render_sources(sent))
            calls.append(reply.call)
        numbers = [s.index for s in sources]
        status, error, method = "ok", note, "llm" + ("+trimmed" if note else "")
        parsed = parse_source_numbers(reply.text, numbers=numbers) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            kept = parsed.value
        else:
            if parsed is None:
                status, error = failed_status(reply), reply.call.error or "no reply"
            else:
                status, error = "parse_error", parsed.error
            texts = [" ".join([s.title, *(sec.text for sec in s.sections)]) for s in sources]
            scores = self.scores(answer, texts) if self.fallback == "top_k" else None
            # top_k for citations: as many sources as the answer has sentences would be a guess; keep
            # the better half, at least one.
            kept = [numbers[i] for i in apply_fallback(self.fallback, len(sources), max(1, len(sources) // 2), scores)]
            basis = "" if self.fallback != "top_k" else ("(similarity)" if scores else "(input order)")
            method = f"llm+fallback:{self.fallback}{basis}"
        support = self.setup.support
        strengths = support([text for text, _ in claims], sources) if support is not None else None
        cited = attribute_sentences(claims, numbers, strengths, allowed=kept, min_support=None, method=method)
        return Decision(cited, method=method, calls=calls, status=status, error=error,
                        scores=source_scores(strengths) if strengths is not None else None)
