"""The decision protocols implemented with an LLM: the paper's prompts through a ``ChatModel``.

:class:`LLMFilterModel` (cheap model): query plan (A.1), URL filter (A.2), section ranking (A.3)
and citation verification (A.5). :class:`LLMWriterModel` (strong model): the two generation
passes of A.4 as one two-turn conversation (the draft prompt and its reply, then the refine
instruction with the few-shot examples in the same conversation), or the paper's "Baseline Q"
prompt in place of the draft prompt.

A decision never raises for a bad reply. Its ``status`` says what happened:

* ``ok``: the reply parsed;
* ``parse_error``: the reply came back but held no usable answer; the configured fallback was
  applied and ``method`` names it (``llm+fallback:top_k`` ...);
* the call's own status when no reply came back (``blocked``, ``empty``, ``failed``,
  ``timeout``, ``budget_exceeded``, ``deadline_exceeded``), with the same fallback applied.

Fallbacks: ``keep_all`` keeps every candidate; ``keep_none`` keeps none; ``top_k`` keeps the
``k`` best by the ``scorer`` given to the model (similarity of the question, or for citations
the answer, to each candidate's text; for example MiniLM cosine), or the first ``k`` in input
order (the search engine's or the page's order) when no scorer was given. The query plan falls
back to the raw question; the refine pass falls back to the draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from hifirag_core.evidence.attribution import (
    attribute_sentences,
    marked_sentences,
    source_scores,
    strip_markers,
)
from hifirag_core.evidence.sufficiency import check_coverage, followup_queries
from hifirag_core.llm.parsing import (
    ParseResult,
    parse_queries,
    parse_section_indices,
    parse_source_numbers,
    parse_sufficiency,
    parse_url_selection,
)
from hifirag_core.llm.prompts import (
    RESEARCH_PROMPTS,
    PromptSet,
    query_range,
    render_examples,
    render_kept_sections,
    render_page_overview,
    render_search_results,
    render_section_previews,
    render_sources,
)
from hifirag_core.types import (
    AnswerStyle,
    ChatModel,
    ChatReply,
    ChatTurn,
    Conversation,
    Decision,
    FewShotExample,
    PageOverview,
    SectionPreview,
    SentenceCitation,
    SourceDoc,
    SourceSection,
    Sufficiency,
    UrlCandidate,
)

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


_SUFFICIENCY_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["sufficient", "partial", "not_found"]},
                   "covered": {"type": "array", "items": {"type": "string"}},
                   "missing": {"type": "array", "items": {"type": "string"}}},
    "required": ["verdict", "covered", "missing"], "additionalProperties": False,
}


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


def _chat_identity(chat: ChatModel) -> str:
    """Backend and model, and the reply settings that change what comes back (format, token ceiling)."""
    settings = getattr(chat, "reply_settings", "")
    return f"{chat.backend}|{chat.model}" + (f"|{settings}" if settings else "")


def _failed_status(reply: ChatReply) -> str:
    return reply.call.status if reply.call.status != "ok" else "empty"


class LLMFilterModel:
    """The cheap model's four jobs, through the paper's prompts A.1, A.2, A.3 and A.5."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, url_fallback: Fallback = "top_k",
                 section_fallback: Fallback = "top_k", citation_fallback: Fallback = "keep_all",
                 scorer: Scorer | None = None, support: Support | None = None, url_fallback_k: int = 6,
                 section_fallback_k: int = 4):
        self.chat = chat
        self.prompts = prompts
        self.url_fallback = url_fallback
        self.section_fallback = section_fallback
        self.citation_fallback = citation_fallback
        self.scorer = scorer
        self.support = support
        # how many candidates top_k keeps when a reply is unusable (the calls' own limits may be "all")
        self.url_fallback_k = url_fallback_k
        self.section_fallback_k = section_fallback_k
        hashes = {n: prompts[n].hash for n in ("query_plan", "url_filter", "section_rank", "citations")}
        # the prompts of looking again, when the config loaded them (a variant that looks again)
        hashes |= {n: prompts[n].hash for n in RESEARCH_PROMPTS if prompts.has(n)}
        self.prompt_hashes = hashes
        self.steering_hashes = {"query_plan": f"query_language={prompts['query_language'].hash}"}
        self.identity = (
            f"llm-filter/v{PARSER_VERSION}|{_chat_identity(chat)}|"
            + ",".join(f"{n}={h}" for n, h in hashes.items())
            + f"|fallback={url_fallback}:{url_fallback_k},{section_fallback}:{section_fallback_k},{citation_fallback}"
            + f"|scorer={'yes' if scorer else 'order'}|support={'yes' if support else 'none'}"
        )

    def job_identity(self, job: str) -> str:
        """What one job's output depends on: backend, model, that job's prompt and fallback."""
        fallback = {"url_filter": self.url_fallback, "section_rank": self.section_fallback,
                    "citations": self.citation_fallback, "sufficiency": "lexical",
                    "followup": "offline"}.get(job, "raw_question")
        return (f"llm-filter/v{PARSER_VERSION}|{_chat_identity(self.chat)}|"
                f"{job}={self.prompt_hashes[job]}|fallback={fallback}|scorer={'yes' if self.scorer else 'order'}"
                + (f"|support={'yes' if self.support else 'none'}" if job == "citations" else "")
                + (f"|{self.steering_hashes[job]}" if job in self.steering_hashes else ""))

    def _ask(self, name: str, schema: dict, *, extra: str = "", **values: str) -> ChatReply:
        prompt = self.prompts[name]
        text = prompt.render(**values) + (f"\n{extra}" if extra else "")
        return self.chat.chat([ChatTurn("user", text)], stage=name, prompt_name=name,
                              prompt_hash=prompt.hash, response_schema=schema)

    def _scores(self, query: str, texts: list[str]) -> list[float] | None:
        if self.scorer is None or not texts:
            return None
        scores = list(self.scorer(query, texts))
        if len(scores) != len(texts):
            raise ValueError(f"scorer returned {len(scores)} scores for {len(texts)} texts")
        return scores

    def _index_decision(self, reply: ChatReply, parsed: ParseResult[int] | None, *, n: int, k: int,
                        fallback_k: int, fallback: Fallback, query: str, texts: list[str]) -> Decision[list[int]]:
        """A decision from parsed indices, or the fallback with the reason recorded."""
        if parsed is not None and parsed.ok:
            return Decision(parsed.value[:k], method="llm", calls=[reply.call])
        if parsed is None:  # no reply text at all
            status, error = _failed_status(reply), reply.call.error or "no reply"
        else:
            status, error = "parse_error", parsed.error
        scores = self._scores(query, texts) if fallback == "top_k" else None
        kept = apply_fallback(fallback, n, min(k, fallback_k), scores)
        basis = "" if fallback != "top_k" else ("(similarity)" if scores is not None else "(input order)")
        return Decision(kept, method=f"llm+fallback:{fallback}{basis}", calls=[reply.call], status=status,
                        error=error, scores=scores)

    def plan_queries(self, question: str, *, max_queries: int, language: str | None = None) -> Decision[list[str]]:
        """A.1: 1..max_queries search queries; falls back to the raw question. ``language``: a question not
        in English gets ``query_language.txt`` (search in its language, and in English where that helps)."""
        extra = ""
        if language:
            from hifirag_core.language import language_name

            extra = self.prompts["query_language"].render(language=language_name(language))
        reply = self._ask("query_plan", object_schema("queries", "string"), question=question,
                          query_range=query_range(max_queries), extra=extra)
        if reply.text is not None:
            parsed = parse_queries(reply.text, max_queries=max_queries)
            if parsed.ok:
                return Decision(parsed.value, method="llm", calls=[reply.call])
            status, error = "parse_error", parsed.error
        else:
            status, error = _failed_status(reply), reply.call.error or "no reply"
        return Decision([question], method="llm+fallback:raw_question", calls=[reply.call], status=status,
                        error=error)

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        """A.2: 0-based indices of the URLs worth reading, most useful first."""
        if not candidates:
            return Decision([], method="llm")
        reply = self._ask("url_filter", object_schema("urls", "string"), question=question,
                          search_results=render_search_results(candidates))
        parsed = None
        if reply.text is not None:
            parsed = parse_url_selection(reply.text, candidate_urls=[c.url for c in candidates])
        texts = [f"{c.title}\n{c.snippet}" for c in candidates]
        return self._index_decision(reply, parsed, n=len(candidates), k=max_urls, fallback_k=self.url_fallback_k,
                                    fallback=self.url_fallback,
                                    query=question, texts=texts)

    def rank_sections(self, question: str, page: PageOverview, sections: list[SectionPreview], *,
                      max_sections: int) -> Decision[list[int]]:
        """A.3: 0-based indices of the useful sections of one page, most useful first."""
        if not sections:
            return Decision([], method="llm")
        reply = self._ask("section_rank", object_schema("sections", "integer"), question=question,
                          page_overview=render_page_overview(page),
                          section_previews=render_section_previews(sections))
        parsed = None
        if reply.text is not None:
            parsed = parse_section_indices(reply.text, n_sections=len(sections))
        return self._index_decision(reply, parsed, n=len(sections), k=max_sections,
                                    fallback_k=self.section_fallback_k,
                                    fallback=self.section_fallback, query=question,
                                    texts=[s.preview for s in sections])

    def check_sufficiency(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        """Ours: which parts of the question the kept sections (headings and leads) answer; an unusable
        reply falls back to the offline lexical check, and the method says so."""
        if not sections:
            return Decision(Sufficiency("not_found", (), (question,)), method="llm")
        reply = self._ask("sufficiency", _SUFFICIENCY_SCHEMA, question=question,
                          web_content=render_kept_sections(sections))
        parsed = parse_sufficiency(reply.text) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            verdict, covered, missing = parsed.value[0]
            return Decision(Sufficiency(verdict, tuple(covered), tuple(missing)), method="llm",  # type: ignore[arg-type]
                            calls=[reply.call])
        status, error = ((_failed_status(reply), reply.call.error or "no reply") if parsed is None
                         else ("parse_error", parsed.error))
        return Decision(check_coverage(question, sections), method="llm+fallback:lexical", calls=[reply.call],
                        status=status, error=error)

    def plan_followup(self, question: str, missing: list[str], earlier: list[str], *,
                      max_queries: int) -> Decision[list[str]]:
        """Ours: searches aimed at what is missing, never an earlier query; an unusable reply falls back to
        the offline planner."""
        reply = self._ask("followup", object_schema("queries", "string"), question=question,
                          missing="; ".join(missing) or "(nothing listed)", earlier="; ".join(earlier) or "(none)",
                          query_range=query_range(max_queries))
        seen = {" ".join(q.lower().split()) for q in earlier}
        if reply.text is not None:
            parsed = parse_queries(reply.text, max_queries=max_queries + len(earlier))
            if parsed.ok:
                fresh = [q for q in parsed.value if " ".join(q.lower().split()) not in seen][:max_queries]
                return Decision(fresh, method="llm", calls=[reply.call])
            status, error = "parse_error", parsed.error
        else:
            status, error = _failed_status(reply), reply.call.error or "no reply"
        return Decision(followup_queries(question, missing, earlier, max_queries), method="llm+fallback:offline",
                        calls=[reply.call], status=status, error=error)

    def verify_citations(self, question: str, answer: str,
                         sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        """A.5: the sources that directly support the answer, then each sentence's own among them.

        The model reads the answer without the writer's ``[n]`` markers (the paper's writer writes
        none); the markers then decide between the sources the model kept, and otherwise the
        ``support`` function does (one source per sentence); without one, each sentence carries every
        source the model kept.
        """
        claims = marked_sentences(answer)
        if not sources or not claims:
            return Decision([], method="llm")
        reply = self._ask("citations", object_schema("sources", "integer"),
                          answer=strip_markers(answer).strip(), web_content=render_sources(sources))
        numbers = [s.index for s in sources]
        status, error, method = "ok", None, "llm"
        parsed = parse_source_numbers(reply.text, numbers=numbers) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            kept = parsed.value
        else:
            if parsed is None:
                status, error = _failed_status(reply), reply.call.error or "no reply"
            else:
                status, error = "parse_error", parsed.error
            texts = [" ".join([s.title, *(sec.text for sec in s.sections)]) for s in sources]
            scores = self._scores(answer, texts) if self.citation_fallback == "top_k" else None
            # top_k for citations: as many sources as the answer has sentences would be a guess; keep
            # the better half, at least one.
            kept = [numbers[i] for i in apply_fallback(self.citation_fallback, len(sources),
                                                       max(1, len(sources) // 2), scores)]
            basis = "" if self.citation_fallback != "top_k" else ("(similarity)" if scores else "(input order)")
            method = f"llm+fallback:{self.citation_fallback}{basis}"
        support = self.support([text for text, _ in claims], sources) if self.support is not None else None
        cited = attribute_sentences(claims, numbers, support, allowed=kept, min_support=None, method=method)
        return Decision(cited, method=method, calls=[reply.call], status=status, error=error,
                        scores=source_scores(support) if support is not None else None)


class LLMWriterModel:
    """The strong model's two passes (A.4) as one two-turn conversation."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, draft_prompt: Literal["hifirag", "raw_limit"] = "hifirag",
                 answerability: bool = False):
        self.chat = chat
        self.prompts = prompts
        self.draft_prompt_name = "draft" if draft_prompt == "hifirag" else "baseline_q"
        # With abstention on, the draft prompt ends by asking whether the sources answer the question
        # (prompts/answerability.txt); the paper's rows send the draft prompt unchanged.
        self.asks_answerability = answerability
        names = (self.draft_prompt_name, "refine", *(("answerability",) if answerability else ()))
        hashes = {n: prompts[n].hash for n in names}
        self.prompt_hashes = hashes
        # steering's additions: part of both passes' identities (the cache key has the steering values)
        self.steering = ",".join(f"{n}={prompts[n].hash}" for n in ("answer_language", "answer_short", "answer_long",
                                                                      "source_dates"))
        self.identity = f"llm-writer/v{PARSER_VERSION}|{_chat_identity(chat)}|" + ",".join(
            f"{n}={h}" for n, h in hashes.items()
        )

    def job_identity(self, job: str) -> str:
        """What one pass depends on: backend, model and that pass's prompt (the draft reaches the
        refine pass as its input, so the draft prompt is not part of the refine identity)."""
        name = self.draft_prompt_name if job == "draft" else "refine"
        asked = f",answerability={self.prompt_hashes['answerability']}" if job == "draft" and self.asks_answerability \
            else ""
        return (f"llm-writer/v{PARSER_VERSION}|{_chat_identity(self.chat)}|{name}={self.prompt_hashes[name]}" + asked
                + f"|{self.steering}")

    def _steering(self, style: AnswerStyle, *, dates: bool) -> list[str]:
        """The lines steering adds to a pass: the answer's language, its length, the sources' dates."""
        lines = []
        if dates and style.source_dates:
            lines.append(self.prompts["source_dates"].render())
        if style.language:
            lines.append(self.prompts["answer_language"].render(language=style.language_name or style.language))
        if style.length != "standard":
            lines.append(self.prompts[f"answer_{style.length}"].render())
        return lines

    def draft(self, question: str, sources: list[SourceDoc], *, max_words: int,
              style: AnswerStyle = AnswerStyle()) -> Decision[Conversation]:
        """Pass 1: the answer from the filtered sources (or, for Baseline Q, from the raw query).

        The length comes from the paper's prompt (one paragraph of 1-4 sentences, or 200 words for
        Baseline Q) unless ``style`` asks for another; ``max_words`` belongs to the offline writer and is
        not sent to the model. ``style`` adds the steering prompts (the sources' dates, the answer's
        language and length); ``AnswerStyle()`` sends the paper's prompt unchanged.
        """
        prompt = self.prompts[self.draft_prompt_name]
        with_sources = self.draft_prompt_name == "draft"
        if with_sources:
            text = prompt.render(question=question, web_content=render_sources(sources, dates=style.source_dates))
        else:
            text = prompt.render(question=question)
        for line in self._steering(style, dates=with_sources):
            text = f"{text}\n{line}"
        if self.asks_answerability:
            text = f"{text}\n{self.prompts['answerability'].render()}"
        user = ChatTurn("user", text)
        reply = self.chat.chat([user], stage="draft", prompt_name=prompt.name, prompt_hash=prompt.hash)
        answer = (reply.text or "").strip()
        if reply.text is None or not answer:
            status = _failed_status(reply)
            return Decision(Conversation((user,)), method="llm", calls=[reply.call], status=status,
                            error=reply.call.error or "the model returned no text")
        return Decision(Conversation((user, ChatTurn("model", answer))), method="llm", calls=[reply.call])

    def refine(self, question: str, conversation: Conversation, examples: list[FewShotExample],
               style: AnswerStyle = AnswerStyle()) -> Decision[str]:
        """Pass 2: the refine instruction with the few-shot examples, in the draft's conversation (then the
        answer's language and length when ``style`` asks for them: the examples are English, and their
        length is the paper's).

        On failure the value is the draft itself (``method`` ``llm+fallback:draft``) so the caller
        can still answer; ``status`` says why.
        """
        draft = conversation.last_reply
        if not draft:
            return Decision("", method="llm", status="no_draft", error="the draft pass produced no answer")
        if not examples:
            return Decision(draft, method="llm+fallback:draft", status="no_examples",
                            error="the refine pass needs few-shot examples")
        prompt = self.prompts["refine"]
        instruction = "\n".join([prompt.render(examples=render_examples(examples)), *self._steering(style, dates=False)])
        turns = [*conversation.turns, ChatTurn("user", instruction)]
        reply = self.chat.chat(turns, stage="refine", prompt_name=prompt.name, prompt_hash=prompt.hash)
        answer = (reply.text or "").strip()
        if reply.text is None or not answer:
            return Decision(draft, method="llm+fallback:draft", calls=[reply.call], status=_failed_status(reply),
                            error=reply.call.error or "the model returned no text")
        return Decision(answer, method="llm", calls=[reply.call])
