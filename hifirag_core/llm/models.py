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
    parse_restated,
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
from hifirag_core.llm.window import REFINE_ROOM_TOKENS, PromptWindow, retry_share
from hifirag_core.turns import ThreadContext, merged_question
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


_RESTATED_SCHEMA = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"],
                    "additionalProperties": False}
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


def balanced_batches(weights: list[int], capacity: int) -> list[list[int]]:
    """Consecutive index batches of about equal weight, each at most ``capacity`` (an item heavier than that
    goes alone): as many as the total weight needs, more only where items do not divide evenly."""
    if not weights:
        return []
    target = sum(weights) / max(1, -(-sum(weights) // max(1, capacity)))
    batches: list[list[int]] = []
    current: list[int] = []
    load = done = 0
    for i, w in enumerate(weights):
        # a new batch when this item would overflow, or when most of it lies past the next even boundary
        if current and (load + w > capacity or done + w / 2 > target * (len(batches) + 1)):
            batches.append(current)
            current, load = [], 0
        current.append(i)
        load += w
        done += w
    batches.append(current)
    return batches


def split_in(batch: list[int], share: float) -> list[list[int]]:
    """``batch`` cut into consecutive parts of about ``share`` of it each (at least two)."""
    parts = min(len(batch), max(2, -(-1 // share) if share > 0 else 2))
    size = -(-len(batch) // int(parts))
    return [batch[i:i + size] for i in range(0, len(batch), size)]


def trim_sources(sources: list[SourceDoc], need: Callable[[list[SourceDoc]], int],
                 budget: int) -> tuple[list[SourceDoc], int, int]:
    """``sources`` with their lowest-placed sections left out until ``need(sources) <= budget``: each page's last
    section first, the last page's before the first's (the reverse of the order the writer's context is filled
    in); the one section left is cut short if it alone is too long. Every source keeps its number. Returns the
    sources, the sections left out and the sections cut."""
    docs = [list(d.sections) for d in sources]

    def build() -> list[SourceDoc]:
        return [SourceDoc(d.index, d.url, d.title, d.preview, tuple(secs), published=d.published)
                for d, secs in zip(sources, docs, strict=True)]

    dropped = cut = 0
    current = build()
    while need(current) > budget:
        left = [(len(secs) - 1, j) for j, secs in enumerate(docs) if secs]
        if not left:
            break
        pos, j = max(left)
        if sum(len(secs) for secs in docs) > 1:
            docs[j].pop()
            dropped += 1
        else:  # one section left: keep the share of its text that fits
            section = docs[j][pos]
            share = budget / max(1, need(current))
            keep = int(len(section.text) * share * 0.9)
            if keep < 1:
                docs[j].pop()
                dropped += 1
            else:
                docs[j][pos] = SourceSection(section.section_id, section.heading_path, section.text[:keep],
                                             section.score)
                cut += 1
        current = build()
    return current, dropped, cut


def fitted_count(window: PromptWindow | None, prompt: Callable[[int], str], n: int,
                 what: str) -> tuple[int, str | None]:
    """How many of ``n`` items (the first ones) ``prompt(count)`` can carry within ``window``, and a note that says
    what was left out (None when all fit)."""
    if window is None or window.fits(prompt(n)):
        return n, None
    need = window.need(prompt(n))
    lo, hi = 0, n  # the most items that fit: prompt(lo) fits or lo == 0, prompt(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if window.fits(prompt(mid)) else (lo, mid)
    count = max(1, lo)
    return count, f"{n - count} of {n} {what} left out to fit the window ({window.describe(need)})"


def fit_sources(window: PromptWindow | None, turns: Callable[[list[SourceDoc]], list[str]],
                sources: list[SourceDoc], *, share: float | None = None,
                refused: str | None = None) -> tuple[list[SourceDoc], str | None]:
    """``sources`` trimmed (:func:`trim_sources`) until the conversation ``turns(sources)`` fits ``window``, or
    (``share``, after the provider refused the prompt) until their text is about ``share`` of what it was; with a
    note that says what was left out (None when nothing was)."""
    if window is None:
        return sources, None
    need = window.need(*turns(sources))
    if share is None and need <= window.prompt_tokens:
        return sources, None

    def page_tokens(docs: list[SourceDoc]) -> int:
        return window.need(*turns(docs))

    budget = window.prompt_tokens if share is None else int(need * share)
    trimmed, dropped, cut = trim_sources(sources, page_tokens, budget)
    total = sum(len(d.sections) for d in sources)
    why = (f"the model refused the prompt as too long ({refused})" if share is not None
           else f"to fit the window ({window.describe(need)})")
    note = f"{dropped} of {total} sections left out" + (", the last one cut short" if cut else "") + f" {why}"
    return trimmed, note


class LLMFilterModel:
    """The cheap model's four jobs, through the paper's prompts A.1, A.2, A.3 and A.5."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, url_fallback: Fallback = "top_k",
                 section_fallback: Fallback = "top_k", citation_fallback: Fallback = "keep_all",
                 scorer: Scorer | None = None, support: Support | None = None, url_fallback_k: int = 6,
                 section_fallback_k: int = 4, window: PromptWindow | None = None):
        self.chat = chat
        # the model's window: prompts carrying page text are split or trimmed to fit it (None: sent as they are)
        self.window = window
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
        # a follow-up turn's restatement (ours): keys only a follow-up's query plan (job_identity("restate"))
        self.prompt_hashes = hashes | {"restate": prompts["restate"].hash}
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
                    "followup": "offline", "restate": "offline-merge"}.get(job, "raw_question")
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

    def restate(self, question: str, thread: ThreadContext) -> Decision[str]:
        """Ours: a follow-up turn rewritten to stand alone (``restate.txt``), from the thread's questions and the
        last answer; an unusable reply falls back to the offline merge with the earlier questions' keywords."""
        earlier = "\n".join(f"{n}. {q}" for n, q in enumerate(thread.questions, 1)) or "(none)"
        reply = self._ask("restate", _RESTATED_SCHEMA, question=question, earlier=earlier,
                          web_content=thread.answer or "(no answer)")
        parsed = parse_restated(reply.text) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            return Decision(parsed.value[0], method="llm", calls=[reply.call])
        status, error = ((_failed_status(reply), reply.call.error or "no reply") if parsed is None
                         else ("parse_error", parsed.error))
        return Decision(merged_question(question, thread), method="llm+fallback:offline-merge", calls=[reply.call],
                        status=status, error=error)

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        """A.2: 0-based indices of the URLs worth reading, most useful first (in several calls when the results
        do not fit the window: see :meth:`_rank_in_batches`)."""
        if not candidates:
            return Decision([], method="llm")

        def ask(batch: list[int]) -> tuple[ChatReply, ParseResult[int] | None]:
            chosen = [candidates[i] for i in batch]
            reply = self._ask("url_filter", object_schema("urls", "string"), question=question,
                              search_results=render_search_results(chosen))
            parsed = (parse_url_selection(reply.text, candidate_urls=[c.url for c in chosen])
                      if reply.text is not None else None)
            return reply, parsed

        return self._rank_in_batches(
            "url_filter", ask, lambda batch: {"question": question,
                                              "search_results": render_search_results([candidates[i] for i in batch])},
            n=len(candidates), k=max_urls, fallback_k=self.url_fallback_k, fallback=self.url_fallback,
            query=question, texts=[f"{c.title}\n{c.snippet}" for c in candidates])

    def rank_sections(self, question: str, page: PageOverview, sections: list[SectionPreview], *,
                      max_sections: int) -> Decision[list[int]]:
        """A.3: 0-based indices of the useful sections of one page, most useful first.

        A page whose section list does not fit the window is ranked in several calls, each on a run of
        consecutive sections (:meth:`_rank_in_batches`); a page that fits is one call, as in the paper.
        """
        if not sections:
            return Decision([], method="llm")
        values = self._section_values(question, page, sections)

        def ask(batch: list[int]) -> tuple[ChatReply, ParseResult[int] | None]:
            reply = self._ask("section_rank", object_schema("sections", "integer"), **values(batch))
            parsed = parse_section_indices(reply.text, n_sections=len(batch)) if reply.text is not None else None
            return reply, parsed

        return self._rank_in_batches(
            "section_rank", ask, values, n=len(sections), k=max_sections, fallback_k=self.section_fallback_k,
            fallback=self.section_fallback, query=question, texts=[s.preview for s in sections])

    def sections_fit(self, question: str, page: PageOverview, sections: list[SectionPreview]) -> bool:
        """Whether one call ranks the page's sections (the window holds its whole section list)."""
        return len(self._batches("section_rank", self._section_values(question, page, sections), len(sections))) == 1

    @staticmethod
    def _section_values(question: str, page: PageOverview,
                        sections: list[SectionPreview]) -> Callable[[list[int]], dict[str, str]]:
        overview = render_page_overview(page)
        return lambda batch: {"question": question, "page_overview": overview,
                              "section_previews": render_section_previews([sections[i] for i in batch])}

    def _batches(self, name: str, values: Callable[[list[int]], dict[str, str]], n: int) -> list[list[int]]:
        """The candidates ``0..n-1`` in consecutive batches whose prompts fit the window (one batch when all fit)."""
        everything = list(range(n))
        if self.window is None or self.window.fits(self.prompts[name].render(**values(everything))):
            return [everything]
        base = self.window.need(self.prompts[name].render(**values([])))
        # each candidate's own tokens (its line, label and separator), measured alone: the estimate adds up
        weights = [self.window.need(self.prompts[name].render(**values([i]))) - base + 2 for i in everything]
        capacity = self.window.prompt_tokens - base
        batches = balanced_batches(weights, capacity)
        out: list[list[int]] = []
        for batch in batches:  # check each batch whole; one that the sum misjudged is halved
            if len(batch) > 1 and not self.window.fits(self.prompts[name].render(**values(batch))):
                out.extend(split_in(batch, 0.5))
            else:
                out.append(batch)
        return out

    def _rank_in_batches(self, name: str, ask: Callable[[list[int]], tuple[ChatReply, ParseResult[int] | None]],
                         values: Callable[[list[int]], dict[str, str]], *, n: int, k: int, fallback_k: int,
                         fallback: Fallback, query: str, texts: list[str]) -> Decision[list[int]]:
        """Rank ``n`` candidates in as few calls as the window allows; the rankings merged as the paper orders one.

        A ranking lists candidates from most to least useful. Batches are judged apart, so their lists are
        merged rank by rank: every batch's first choice (batches in input order, i.e. the page's or the search
        engine's), then every batch's second, and so on, cut at ``k``. A call the provider refuses as longer than
        the window (``context_length_exceeded``) is retried once, its batch split smaller (by the provider's own
        count when it gives one); a part refused again takes the fallback, and the method and status say so.
        One batch that fits is one call, recorded exactly as before (method ``llm``).
        """
        batches = self._batches(name, values, n)
        if len(batches) == 1:
            reply, parsed = ask(batches[0])
            if reply.overflow is None or n < 2:
                return self._index_decision(reply, parsed, n=n, k=k, fallback_k=fallback_k, fallback=fallback,
                                            query=query, texts=texts)
            first_calls = [reply.call]
            batches = split_in(batches[0], retry_share(*reply.overflow, self._reply_tokens()))
            retried = True
        else:
            first_calls, retried = [], False
        results: list[tuple[list[int], Decision[list[int]]]] = []
        calls = list(first_calls)

        def judged(batch: list[int], reply: ChatReply, parsed: ParseResult[int] | None) -> None:
            decision = self._index_decision(reply, parsed, n=len(batch), k=k, fallback_k=fallback_k,
                                            fallback=fallback, query=query, texts=[texts[i] for i in batch])
            calls.extend(decision.calls)
            results.append((batch, decision))

        for batch in batches:
            reply, parsed = ask(batch)
            if reply.overflow is not None and not retried and len(batch) > 1:
                calls.append(reply.call)
                for part in split_in(batch, retry_share(*reply.overflow, self._reply_tokens())):
                    judged(part, *ask(part))
                continue
            judged(batch, reply, parsed)
        merged = sorted(((pos, b, batch[i]) for b, (batch, d) in enumerate(results) for pos, i in enumerate(d.value)))
        kept = [i for _, _, i in merged][:k]
        failed = [d for _, d in results if d.status != "ok"]
        method = f"llm:split={len(results)}"
        status, error, scores = "ok", None, None
        if failed:
            status = failed[0].status
            error = f"{len(failed)} of {len(results)} calls fell back; the first: {failed[0].error}"
            method += "+" + failed[0].method.split("+", 1)[-1]
            if fallback == "top_k":
                scores = self._scores(query, texts)
        return Decision(kept, method=method, calls=calls, status=status, error=error, scores=scores)

    def _reply_tokens(self) -> int:
        return self.window.reply_tokens if self.window is not None else 0

    def check_sufficiency(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        """Ours: which parts of the question the kept sections (headings and leads) answer; an unusable
        reply falls back to the offline lexical check, and the method says so."""
        if not sections:
            return Decision(Sufficiency("not_found", (), (question,)), method="llm")
        # the kept sections in page order then rank: the last ones are left out when the list does not fit
        sent, note = fitted_count(self.window, lambda n: self.prompts["sufficiency"].render(
            question=question, web_content=render_kept_sections(sections[:n])), len(sections), "kept sections")
        reply = self._ask("sufficiency", _SUFFICIENCY_SCHEMA, question=question,
                          web_content=render_kept_sections(sections[:sent]))
        if reply.overflow is not None and sent > 1:
            calls = [reply.call]
            sent = max(1, int(sent * retry_share(*reply.overflow, self._reply_tokens())))
            note = f"{len(sections) - sent} of {len(sections)} kept sections left out after the model refused the " \
                   f"prompt as too long ({reply.call.error})"
            reply = self._ask("sufficiency", _SUFFICIENCY_SCHEMA, question=question,
                              web_content=render_kept_sections(sections[:sent]))
            calls.append(reply.call)
        else:
            calls = [reply.call]
        parsed = parse_sufficiency(reply.text) if reply.text is not None else None
        if parsed is not None and parsed.ok:
            verdict, covered, missing = parsed.value[0]
            return Decision(Sufficiency(verdict, tuple(covered), tuple(missing)),  # type: ignore[arg-type]
                            method="llm" + ("+trimmed" if note else ""), calls=calls, error=note)
        status, error = ((_failed_status(reply), reply.call.error or "no reply") if parsed is None
                         else ("parse_error", parsed.error))
        return Decision(check_coverage(question, sections), method="llm+fallback:lexical", calls=calls,
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
        said = strip_markers(answer).strip()

        def turns(docs: list[SourceDoc]) -> list[str]:
            return [self.prompts["citations"].render(answer=said, web_content=render_sources(docs))]

        sent, note = fit_sources(self.window, turns, sources)
        reply = self._ask("citations", object_schema("sources", "integer"), answer=said,
                          web_content=render_sources(sent))
        calls = [reply.call]
        if reply.overflow is not None and self.window is not None:
            share = retry_share(*reply.overflow, self._reply_tokens())
            sent, note = fit_sources(self.window, turns, sent, share=share, refused=reply.call.error)
            reply = self._ask("citations", object_schema("sources", "integer"), answer=said,
                              web_content=render_sources(sent))
            calls.append(reply.call)
        numbers = [s.index for s in sources]
        status, error, method = "ok", note, "llm" + ("+trimmed" if note else "")
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
        return Decision(cited, method=method, calls=calls, status=status, error=error,
                        scores=source_scores(support) if support is not None else None)


class LLMWriterModel:
    """The strong model's two passes (A.4) as one two-turn conversation."""

    def __init__(self, chat: ChatModel, prompts: PromptSet, *, draft_prompt: Literal["hifirag", "raw_limit"] = "hifirag",
                 answerability: bool = False, window: PromptWindow | None = None):
        self.chat = chat
        self.prompts = prompts
        # the model's window: the draft's sources are trimmed to fit it (None: sent as they are)
        self.window = window
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

        def render(docs: list[SourceDoc]) -> str:
            text = (prompt.render(question=question, web_content=render_sources(docs, dates=style.source_dates))
                    if with_sources else prompt.render(question=question))
            for line in self._steering(style, dates=with_sources):
                text = f"{text}\n{line}"
            if self.asks_answerability:
                text = f"{text}\n{self.prompts['answerability'].render()}"
            return text

        # the sources as bounded by the writer's context (hifirag_core.pipeline.context); the estimate decides
        # whether the prompt fits, and what does not is trimmed, lowest-placed sections first
        # the draft leaves room for its own reply and the refine turn (instruction, examples, reply) that follow
        window = (PromptWindow(self.window.context_tokens, 2 * self.window.reply_tokens + REFINE_ROOM_TOKENS,
                               "the draft's reply and the refine turn") if self.window is not None else None)
        sent, note = fit_sources(window, lambda docs: [render(docs)], sources) if with_sources \
            else (sources, None)
        user = ChatTurn("user", render(sent))
        reply = self.chat.chat([user], stage="draft", prompt_name=prompt.name, prompt_hash=prompt.hash)
        calls = [reply.call]
        if reply.overflow is not None and with_sources and window is not None:
            sent, note = fit_sources(window, lambda docs: [render(docs)], sent,
                                     share=retry_share(*reply.overflow, window.reply_tokens),
                                     refused=reply.call.error)
            user = ChatTurn("user", render(sent))
            reply = self.chat.chat([user], stage="draft", prompt_name=prompt.name, prompt_hash=prompt.hash)
            calls.append(reply.call)
        answer = (reply.text or "").strip()
        method = "llm" + ("+trimmed" if note else "")
        if reply.text is None or not answer:
            status = _failed_status(reply)
            return Decision(Conversation((user,)), method=method, calls=calls, status=status,
                            error=reply.call.error or "the model returned no text")
        return Decision(Conversation((user, ChatTurn("model", answer))), method=method, calls=calls, error=note)

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
        if self.window is not None and not self.window.fits(*(t.text for t in turns)):
            # the draft's conversation and the examples do not fit: the draft stands, and the row says why
            need = self.window.need(*(t.text for t in turns))
            return Decision(draft, method="llm+fallback:draft", status="context_length_exceeded",
                            error=f"the refine pass was not sent: {self.window.describe(need)}")
        reply = self.chat.chat(turns, stage="refine", prompt_name=prompt.name, prompt_hash=prompt.hash)
        answer = (reply.text or "").strip()
        if reply.text is None or not answer:
            return Decision(draft, method="llm+fallback:draft", calls=[reply.call], status=_failed_status(reply),
                            error=reply.call.error or "the model returned no text")
        return Decision(answer, method="llm", calls=[reply.call])
