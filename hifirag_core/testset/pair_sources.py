"""Where candidate pairs come from, and how their sources get their dates.

* :class:`GroundedPairSource`: prompt A.6 to a model with live search (Gemini + Google Search). Each
  pair's sources are the grounding chunks whose supported spans overlap the pair's JSON object in the
  reply; when a reply has sources but no supports, every pair gets all of them and says so.
* :class:`CorpusPairSource`: the **offline stand-in**. Pairs are drawn from the local corpus's pages
  whose recorded publication date falls after the cutoff: the question from a section heading, the
  answer from that section's text. It exercises the builder, its checks and the flow without a key
  or a network; it is not fresh knowledge (the answer is a page of the corpus, word for word).

Dating: :class:`FetchDater` fetches each grounding URI (following the redirect to the real page) and
reads the page's dates (``page_dates.py``); :class:`CorpusDater` reads the dates the corpus recorded
when it was built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Protocol

from hifirag_core.backends.grounding import SearchGroundedModel
from hifirag_core.corpus.store import Corpus
from hifirag_core.hashing import stable_hash
from hifirag_core.llm.prompts import Prompt
from hifirag_core.records import LLMCallRecord
from hifirag_core.testset.pairs import parse_qa_pairs
from hifirag_core.testset.style import StyleExample, render_examples
from hifirag_core.text import split_sentences, word_count
from hifirag_core.types import Fetcher
from hifirag_core.web.page_dates import DateEvidence, PageDate, best_date, dates_of_page

STANDIN_LABEL = ("OFFLINE STAND-IN: pairs drawn from local corpus pages dated after the cutoff (question from a "
                 "heading, answer from its section). It exercises the builder and the flow; it is not fresh "
                 "knowledge, and the answers are in the corpus word for word.")
MIN_SECTION_WORDS = 12  # shorter sections (a heading over one line of text) make no answer


@dataclass(frozen=True)
class SourceRef:
    """A source as the generator named it: a grounding URI (often a redirect) and its title."""

    uri: str
    title: str


@dataclass
class Candidate:
    """A proposed pair before the checks."""

    candidate_id: str  # "c01-03": the third pair of the first call
    query: str
    reference: str
    sources: list[SourceRef]
    attribution: str  # segment | reply | none | corpus: how the sources were tied to the pair


@dataclass
class Batch:
    """One generator call's pairs and what it cost."""

    call_no: int
    candidates: list[Candidate]
    calls: list[LLMCallRecord] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    searches: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the reply parser skipped


class PairSource(Protocol):
    name: str  # "gemini:gemini-2.5-pro+google_search" | "offline-standin"
    label: str | None  # shown in the provenance and the CLI when the pairs are not the real thing

    def propose(self, call_no: int, want: int) -> Batch: ...


@dataclass(frozen=True)
class DatedSource:
    """A source after dating: where its URI led, every date signal found, and the one that counts."""

    uri: str
    title: str
    url: str | None  # the page the URI led to
    dates: tuple[PageDate, ...]
    date: PageDate | None  # best_date under the build's evidence rule
    fetch_status: str
    error: str | None = None

    def to_json(self) -> dict:
        """The provenance entry."""
        return {"uri": self.uri, "title": self.title, "url": self.url, "fetch_status": self.fetch_status,
                "error": self.error, "date": self.date.to_json() if self.date else None,
                "dates": [d.to_json() for d in self.dates]}


class SourceDater(Protocol):
    def date(self, ref: SourceRef) -> DatedSource: ...


def human_date(day: date) -> str:
    """``February 1, 2025``: how A.6 names the cutoff."""
    return f"{day:%B} {day.day}, {day.year}"


class GroundedPairSource:
    """Prompt A.6 to a search-grounded model; each call asks for ``want`` pairs."""

    label = None

    def __init__(self, model: SearchGroundedModel, prompt: Prompt, examples: list[StyleExample],
                 example_source: str, after: date, seed: int):
        self.model = model
        self.prompt = prompt
        self.examples = examples
        self.example_source = example_source
        self.after = after
        self.seed = seed
        self.name = f"{model.backend}:{model.model}+google_search"

    def render(self, want: int) -> str:
        """The A.6 prompt for ``want`` pairs."""
        return self.prompt.render(n=str(want), example_source=self.example_source, after=human_date(self.after),
                                  examples=render_examples(self.examples))

    def propose(self, call_no: int, want: int) -> Batch:
        """One grounded call (the first with the build's seed, each later one with the next), parsed into candidates."""
        reply = self.model.chat_with_search(self.render(want), seed=self.seed + call_no - 1, stage="testset_generate",
                                            prompt_name=self.prompt.name, prompt_hash=self.prompt.hash)
        batch = Batch(call_no, [], [reply.call], status=reply.call.status, error=reply.call.error)
        if reply.text is None:
            return batch
        parsed = parse_qa_pairs(reply.text)
        batch.problems = parsed.problems
        grounding = reply.grounding
        if grounding is not None:
            batch.searches = list(grounding.queries)
        for k, pair in enumerate(parsed.pairs, 1):
            if grounding is None:
                indices, attribution = [], "none"
            elif grounding.supports:
                indices, attribution = grounding.sources_within(pair.start, pair.end), "segment"
            else:  # sources but no supported spans: the reply as a whole rests on them
                indices, attribution = list(range(len(grounding.sources))), "reply"
            refs = [SourceRef(grounding.sources[i].uri, grounding.sources[i].title) for i in indices] if grounding else []
            batch.candidates.append(Candidate(f"c{call_no:02d}-{k:02d}", pair.query, pair.reference, refs, attribution))
        return batch


class FetchDater:
    """Dates a source by fetching it (the fetcher follows the grounding redirect) and reading the page."""

    def __init__(self, fetcher: Fetcher, evidence: DateEvidence, today: date | None):
        self.fetcher = fetcher
        self.evidence = evidence
        self.today = today

    def date(self, ref: SourceRef) -> DatedSource:
        result = self.fetcher.fetch(ref.uri)
        url = result.final_url or ref.uri
        if result.status != "ok" or result.body is None:
            return DatedSource(ref.uri, ref.title, url, (), None, result.status, result.error)
        dates = tuple(dates_of_page(result.body, url=url, last_modified=result.last_modified, today=self.today))
        return DatedSource(ref.uri, ref.title, url, dates, best_date(list(dates), self.evidence), "ok")


class CorpusDater:
    """Dates a corpus page from what the corpus recorded."""

    def __init__(self, corpus: Corpus, evidence: DateEvidence):
        self.dates = corpus.page_dates()
        self.evidence = evidence

    def date(self, ref: SourceRef) -> DatedSource:
        dates = self.dates.get(ref.uri)
        if dates is None:
            return DatedSource(ref.uri, ref.title, None, (), None, "not_found", "not in the local corpus")
        return DatedSource(ref.uri, ref.title, ref.uri, tuple(dates), best_date(dates, self.evidence), "ok")


_NUMBERING = re.compile(r"^(?:[A-Z]?\d+(?:\.\d+)*\.?|[A-Z]\.(?:\d+\.)*)\s+")
_MARKDOWN = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+|[`*_]|\s*§")


def heading_text(heading: str) -> str:
    """A heading without its section number ("E.9.2. Changes" -> "Changes") or pilcrow."""
    return _NUMBERING.sub("", heading.replace("¶", "").strip()).strip()


def standin_question(title: str, heading: str) -> str:
    """The stand-in's question: the heading itself when it asks one, else what the page says under it."""
    heading, title = heading_text(heading), heading_text(title)
    if heading.endswith("?"):
        return heading
    if heading.lower() == title.lower():
        return f"What does {title} cover?"
    return f"What does {title} say about {heading}?"


def standin_answer(text: str, words: int) -> str:
    """The section's first sentences, about ``words`` long (plain text, list markers dropped)."""
    lines = [_MARKDOWN.sub("", line).strip() for line in text.splitlines()]
    sentences = [s for line in lines if line for s in split_sentences(line)]
    out: list[str] = []
    for sentence in sentences:
        out.append(sentence)
        if sum(word_count(s) for s in out) >= words:
            break
    answer = " ".join(out)
    tokens = answer.split()
    return answer if len(tokens) <= 2 * words else " ".join(tokens[: 2 * words]) + " ..."


class CorpusPairSource:
    """The offline stand-in: sections of corpus pages published after the cutoff, in seeded order."""

    name = "offline-standin"
    label = STANDIN_LABEL

    def __init__(self, corpus: Corpus, after: date, seed: int, evidence: DateEvidence, answer_words: int,
                 exclude: Sequence[str] = ()):
        from hifirag_core.corpus.store import is_excluded
        from hifirag_core.sectioning import parse_sections

        pool: list[tuple[str, Candidate]] = []
        for url, dates in corpus.page_dates().items():
            day = best_date(dates, evidence)
            if day is None or day.date <= after or is_excluded(url, exclude):
                continue
            page = corpus.pages()[url]
            parsed = parse_sections(corpus.blobs.get(page.sha256) or b"", url)
            seen: set[tuple[str, ...]] = set()
            for section in parsed.sections:
                # A long section is split in parts under one heading: one question per heading.
                if not section.heading or section.heading_path in seen or section.n_words < MIN_SECTION_WORDS:
                    continue
                seen.add(section.heading_path)
                query = standin_question(page.title, section.heading)
                answer = standin_answer(section.text, answer_words)
                pool.append((stable_hash([seed, section.section_id]),
                             Candidate("", query, answer, [SourceRef(url, page.title)], "corpus")))
        self._pool = [c for _, c in sorted(pool, key=lambda t: t[0])]
        self._next = 0

    @property
    def available(self) -> int:
        """Sections not yet proposed."""
        return len(self._pool) - self._next

    def propose(self, call_no: int, want: int) -> Batch:
        chosen = self._pool[self._next:self._next + want]
        self._next += len(chosen)
        for k, candidate in enumerate(chosen, 1):
            candidate.candidate_id = f"c{call_no:02d}-{k:02d}"
        status = "ok" if chosen else "exhausted"
        error = None if chosen else "no corpus section dated after the cutoff is left"
        return Batch(call_no, chosen, status=status, error=error)
