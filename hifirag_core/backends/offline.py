"""The embedded offline default: no keys, no network, real algorithms.

* ``LocalSearch`` and ``LocalFetcher`` serve the local corpus as the search engine and the web.
* ``OfflineFilterModel`` does the cheap model's jobs: query plans (the question, then its keywords), hybrid (MiniLM + BM25)
  scoring of titles + snippets and of heading + first 200 characters, and citation support by
  sentence similarity.
* ``OfflineWriterModel`` writes an extractive draft (sentences chosen with MMR within a word
  budget, each followed by its ``[n]`` source marker) and refines it to the length and shape of
  the few-shot examples (numbered steps for "how to" questions).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

import numpy as np

from hifirag_core.config import PipelineConfig
from hifirag_core.corpus.store import CorpusIndex, normalize_url
from hifirag_core.evidence.attribution import (
    attribute_sentences,
    citation_support,
    marked_sentences,
    source_scores,
    strip_markers,
)
from hifirag_core.evidence.sufficiency import check_coverage, followup_queries, question_parts
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.retrieval.scoring import bm25_scores, hybrid_scores, keep_relative, mmr_select
from hifirag_core.store.blobs import BlobStore
from hifirag_core.text import (
    FILLER,
    STOPWORDS,
    content_terms,
    is_block,
    is_dependent,
    prose_units,
    question_keywords,
    section_preview,
    split_sentences,
    word_count,
)
from hifirag_core.turns import ThreadContext, merged_question
from hifirag_core.types import (
    AnswerStyle,
    ChatTurn,
    Conversation,
    Decision,
    Fetcher,
    FetchResult,
    FewShotExample,
    PageOverview,
    SearchHit,
    SearchSteer,
    SectionPreview,
    SentenceCitation,
    SourceDoc,
    SourceSection,
    Sufficiency,
    UrlCandidate,
)

# Part of the stage cache keys: bump the model whose output changes, so only its stages recompute.
# Filter v5: the citation check prefers the source the writer marked. v6: section ranking embeds a
# page's SECTION_SHORTLIST best sections by BM25 only.
FILTER_VERSION = "offline-v6"
# The offline sufficiency check and follow-up planner (hifirag_core/evidence/sufficiency.py).
RESEARCH_VERSION = "v1"
# The offline restatement of a follow-up turn (hifirag_core/turns.py, merged_question).
TURNS_VERSION = "v1"
# Writer v9: the draft draws on prose only (no table, signature or navigation list as a sentence; a code
# example, short list or blockquote only whole, after the sentence that introduces it) and keeps a
# sentence that points back at the one before it together with it. v6 took every line alike, code and
# table rows included; v7 marked only a unit's end and dropped lists, blockquotes and code examples over
# 12 lines, which the regression gate caught on FAQ (b): citation recall 0.997 -> 0.962, ROUGE-L 0.663 -> 0.638;
# v8 dropped sections cut mid-sentence by the context budget and "For example:" before code (0.645).
# v10: "It ..." (not "It is best to ...") points back at the sentence before it as well.
# v11: a question of several parts ("How do I X, and what is Y?") gets each part's best sentence into the
# draft, and the refine pass keeps them; a question of one part is written exactly as by v10.
# v13: each part's answer is the lead of the section whose heading and lead match the part best, and the draft
# opens with them in the question's order; a question of one part is written exactly as by v11. (v12, never
# released, took the section's unit closest to the part: two-part tune half ROUGE-L 0.337, against 0.346.)
WRITER_VERSION = "offline-v13"

_HOWTO = re.compile(r"^\s*(?:how (?:do|can|should|would) (?:i|you|we|one)|how to|steps? to|what are the steps)\b|"
                    r"\bstep[- ]by[- ]step\b", re.IGNORECASE)
_MARKER = re.compile(r"\s*\[(\d+)\]")
_MARKER_RUN = re.compile(r"(?:\s*\[\d+\])+")


def is_howto(question: str) -> bool:
    return bool(_HOWTO.search(question))


class LocalSearch:
    """The local corpus as a web search API."""

    provider = "local"

    def __init__(self, index: CorpusIndex):
        self.index = index
        self.identity = f"local:{index.identity}"

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """The corpus's best pages for ``query``; steering's site rules and date window leave pages out
        (the corpus has no language to choose: its pages are what they are)."""
        if steer is None:
            return self.index.search(query, num)
        return self.index.search(query, num, sites=steer.sites, window=steer.window)


class LocalFetcher:
    """The local corpus as the web: a URL outside it (or excluded from it) is ``not_found``."""

    name = "local"

    def __init__(self, index: CorpusIndex, blobs: BlobStore):
        self.index = index
        self.blobs = blobs
        self.identity = f"local:{index.identity}"

    def fetch(self, url: str) -> FetchResult:
        page = self.index.corpus.page(url)
        if page is None or url not in self.index:
            return FetchResult(url=url, status="not_found", fetcher=self.name, http_status=404,
                               error="not in the local corpus")
        published = self.index.corpus.published().get(page.url)
        return FetchResult(
            url=url, status="ok", fetcher=self.name, final_url=normalize_url(url), http_status=200,
            content_type="text/html; charset=utf-8", body=self.blobs.get(page.sha256), kind="html",
            published=published.isoformat() if published else None,
        )


class FolderSearch(LocalSearch):
    """The user's own folder of files (``corpus/folder.py``) as a search provider."""

    provider = "folder"

    def __init__(self, index: CorpusIndex):
        super().__init__(index)
        self.identity = f"folder:{index.identity}"


class FolderFetcher(LocalFetcher):
    """The user's own files, by their ``folder://`` URL."""

    name = "folder"

    def __init__(self, index: CorpusIndex, blobs: BlobStore):
        super().__init__(index, blobs)
        self.identity = f"folder:{index.identity}"


class RoutedFetcher:
    """The run's fetcher, with the URLs of a scheme (``folder://``) served by their own fetcher."""

    def __init__(self, default: Fetcher, routes: dict[str, Fetcher]):
        self.default = default
        self.routes = routes
        self.name = default.name
        self.identity = "|".join([getattr(default, "identity", default.name),
                                  *(f"{scheme}={getattr(f, 'identity', f.name)}" for scheme, f in routes.items())])

    def fetch(self, url: str) -> FetchResult:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        return self.routes.get(scheme, self.default).fetch(url)


def search_queries(question: str, max_queries: int) -> list[str]:
    cleaned = FILLER.sub(" ", question)
    terms = question_keywords(question)
    if not terms:  # a question made only of function words: search it as asked
        return [question.strip()]
    # The question itself, minus how-to-answer phrases: its interrogatives and phrasing match the
    # pages written to answer it (FAQ headings, "How to ..." guides), which a bag of keywords loses
    # (on the FAQ set the gold page is in the top 10 for 98% of the questions this way, 93% with
    # keywords only).
    asked = " ".join(cleaned.split()).strip(" ,;:")
    queries = [asked if asked else " ".join(terms[:12])]
    if max_queries > 1 and len(terms) > 2:
        # A focused second query: the most specific terms (identifiers, names, long words).
        def specificity(t: str) -> tuple[int, int]:
            return (int(any(c in t for c in "._") or (t[:1].isupper() and t.lower() != t)), len(t))

        focused = sorted(terms, key=specificity, reverse=True)[:4]
        second = " ".join(t for t in terms if t in focused)
        if second != queries[0]:
            queries.append(second)
    return queries[:max_queries]


# Section previews embedded per page: those BM25 ranks highest. A page has 30 sections on average and
# up to 99, and their previews were 58% of a question's CPU. Chosen on stored offline section rankings
# (42 questions, split by a hash of the question id): on the tuning half the kept sections inside the
# BM25 top 8 / 12 / 16 / 24 were 91.4 / 96.6 / 97.4 / 97.4%, so 16; on the other half 100% at 16,
# with 44% of the previews embedded.
SECTION_SHORTLIST = 16


class OfflineFilterModel:
    """Hybrid-similarity stand-in for the cheap model's four decisions."""

    def __init__(self, embedder: Embedder, cfg: PipelineConfig):
        self.embedder = embedder
        self.cfg = cfg
        self.identity = f"{FILTER_VERSION}:filter:{embedder.model_id}"

    def job_identity(self, job: str) -> str:
        # the two jobs of looking again, and restating a follow-up turn, are algorithms of their own, versioned apart
        if job == "restate":
            return f"{self.identity}|{job}-{TURNS_VERSION}"
        return f"{self.identity}|{job}-{RESEARCH_VERSION}" if job in ("sufficiency", "followup") else self.identity

    def plan_queries(self, question: str, *, max_queries: int, language: str | None = None) -> Decision[list[str]]:
        # the offline planner cannot translate: a question not in English is searched as asked (the answer
        # says that the offline default is English-only)
        return Decision(search_queries(question, max_queries), method="offline-keywords")

    def restate(self, question: str, thread: ThreadContext) -> Decision[str]:
        """The follow-up with the earlier questions' keywords merged in (it reads no answer)."""
        return Decision(merged_question(question, thread), method="offline-merge")

    def check_sufficiency(self, question: str, sections: list[SourceSection]) -> Decision[Sufficiency]:
        return Decision(check_coverage(question, sections), method="offline-coverage")

    def plan_followup(self, question: str, missing: list[str], earlier: list[str], *,
                      max_queries: int) -> Decision[list[str]]:
        return Decision(followup_queries(question, missing, earlier, max_queries), method="offline-missing")

    def select_urls(self, question: str, candidates: list[UrlCandidate], *, max_urls: int) -> Decision[list[int]]:
        texts = [f"{c.title}. {c.snippet}" for c in candidates]
        scores = hybrid_scores(question, texts, self.embedder)
        kept = keep_relative(scores, min_relative=self.cfg.url_filter.min_relative_score, limit=max_urls)
        return Decision(kept, method="offline-hybrid", scores=[float(s) for s in scores])

    def rank_sections(
        self, question: str, page: PageOverview, sections: list[SectionPreview], *, max_sections: int
    ) -> Decision[list[int]]:
        scores = hybrid_scores(question, [s.preview for s in sections], self.embedder, shortlist=SECTION_SHORTLIST)
        kept = keep_relative(
            scores, min_relative=self.cfg.section_rank.min_relative_score, limit=max_sections, floor=0.1
        )
        return Decision(kept, method="offline-hybrid", scores=[float(s) for s in scores])

    def verify_citations(self, question: str, answer: str,
                         sources: list[SourceDoc]) -> Decision[list[SentenceCitation]]:
        """Per sentence: the source the writer marked when it supports the sentence (another page quoting
        the same text may support it as well), else the best supporting source, else none."""
        claims = marked_sentences(answer)
        support = citation_support([text for text, _ in claims], sources, self.embedder)
        numbers = [s.index for s in sources]
        cited = attribute_sentences(claims, numbers, support, allowed=numbers,
                                    min_support=self.cfg.citations.support_threshold, method="offline")
        return Decision(cited, method="offline-support", scores=source_scores(support))


def part_sentences(question: str, sentences: list[str]) -> set[int]:
    """For a question of several parts, the position of the sentence sharing the most keywords with each
    part (a part no sentence shares a keyword with has none); empty for a question of one part."""
    parts = question_parts(question)
    if len(parts) < 2 or not sentences:
        return set()
    words = [set(content_terms(strip_markers(s))) for s in sentences]
    chosen = set()
    for part in parts:
        terms = set(content_terms(part))
        overlap = [len(terms & w) for w in words]
        if max(overlap) > 0:
            chosen.add(overlap.index(max(overlap)))
    return chosen


def _marked_units(draft: str) -> list[str]:
    """The draft cut after each run of markers: each unit is a sentence with its own ``[n]``; a quoted
    block stays whole and with the sentence that introduces it."""
    spans: list[tuple[int, int]] = []
    position = 0
    for match in _MARKER_RUN.finditer(draft):
        spans.append((position, match.end()))
        position = match.end()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        text = strip_markers(draft[start:end]).strip()
        if not text:
            continue
        if merged:
            before = strip_markers(draft[merged[-1][0]:merged[-1][1]]).strip()
            if before.count("```") % 2 or before.endswith(":") or is_block(text):
                merged[-1] = (merged[-1][0], end)
                continue
        merged.append((start, end))
    units = [draft[start:end].strip() for start, end in merged]
    units.extend(s for s in split_sentences(draft[position:]) if strip_markers(s).strip())
    return units


def _with_antecedents(units: list[str]) -> list[str]:
    """Units with each one that points back at the one before it joined to that one."""
    out: list[str] = []
    for unit in units:
        if out and is_dependent(strip_markers(unit).strip()):
            out[-1] = f"{out[-1]} {unit}"
        else:
            out.append(unit)
    return out


# What the draft's prompt turn says when the draft opens with the answers to the question's parts.
OPENING_NOTE = "sentences open the draft, answering the question's parts"
_OPENING = re.compile(rf"\[(\d+) {re.escape(OPENING_NOTE)}\]")
# Sentences considered per section, and how many candidates go on to the (costly) embedding step.
PER_SECTION = 15
EMBED_CANDIDATES = 80
# Weight of a sentence's prose share in the draft's relevance (on FAQ protocol (a), 0.3 raised the
# draft's ROUGE-L by 0.003; 0.6 by the same: the value is not sensitive).
PROSE_WEIGHT = 0.3
# Weight of the section ranker's relative score. On FAQ protocol (b) the gold page's marker stays in
# the refined answer for 91% of the questions at 0, 95% at 1.0 and 97% at 2.0; protocol (a)'s
# ROUGE-L does not move (0.136 at 0, 1.0 and 2.0), so the ranker's judgement is worth following.
# (Measured on stored section rankings with the document-order draft of an earlier version.)
SECTION_WEIGHT = 2.0
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z'-]*[,.;:!?]?")


def prose_share(text: str) -> float:
    """The share of a sentence's tokens that are plain words, plus the share that are function words."""
    tokens = text.split()
    if not tokens:
        return 0.0
    plain = sum(1 for t in tokens if _PLAIN_WORD.fullmatch(t))
    function = sum(1 for t in tokens if t.lower().strip(",.;:!?") in STOPWORDS)
    return (plain + function) / len(tokens)


@dataclass(frozen=True)
class _Candidate:
    source: int  # SourceDoc.index
    section_rank: int  # position of the section among the source's kept sections
    position: int  # unit position within the section
    sentences: tuple[str, ...]  # a prose sentence, with the ones that point back at it
    section_score: float = 0.0  # the ranker's score of the section, relative to the best kept section
    heading: str = ""  # the section's heading (a long answer's sections are titled with it)

    @property
    def text(self) -> str:
        return " ".join(self.sentences)

    def holds(self, other: _Candidate) -> bool:
        """Whether this unit already says all of ``other`` (an example unit holds the sentence it follows)."""
        return (self.source, self.section_rank) == (other.source, other.section_rank) and \
            set(other.sentences) < set(self.sentences)

    def marked(self) -> str:
        """The unit as the draft writes it: each sentence followed by its source's marker, and a quoted
        block (code, list, blockquote) on lines of its own with a marker after each part of it that the
        citation check reads as a claim (markers never reach the answer's text)."""
        marker = f"[{self.source}]"
        prose = " ".join(f"{part} {marker}" for part in self.sentences if not is_block(part))
        blocks = [_mark_block(part, marker) for part in self.sentences if is_block(part)]
        return "\n".join([prose, *blocks]) if blocks else prose


_CLAIM_BREAK = re.compile(r"(\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s))")  # where split_sentences cuts a block


def _mark_block(block: str, marker: str) -> str:
    parts = _CLAIM_BREAK.split(block)
    return "".join(part if n % 2 or not part.strip() else f"{part} {marker}" for n, part in enumerate(parts))


def join_units(units: list[str], numbered: bool = False) -> str:
    """Units into one answer: a paragraph of sentences, or numbered steps; a unit that quotes a block
    is a paragraph (or step) of its own, so the block stands on lines of its own."""
    if numbered:
        return "\n".join(f"{n}. " + unit.replace("\n", "\n   ") for n, unit in enumerate(units, 1))
    out = units[0] if units else ""
    for previous, unit in zip(units, units[1:], strict=False):
        out += ("\n\n" if "\n" in unit or "\n" in previous else " ") + unit
    return out


def _candidates(sources: list[SourceDoc], per_section: int = PER_SECTION) -> list[_Candidate]:
    """The prose units of every kept section: never a table, a code block, a signature or a navigation
    list, and never a sentence cut off from the one it points back at (``text.prose_units``)."""
    ranked = [s.score for source in sources for s in source.sections if s.score is not None]
    best = max(ranked) if ranked and max(ranked) > 0 else None
    out = []
    for source in sources:
        for rank, section in enumerate(source.sections):
            relative = section.score / best if best and section.score is not None else 0.0
            # Text with "[n]" in it (an index in code, a footnote) would read as a source marker: left out.
            units = [u for u in prose_units(section.text) if not any(_MARKER.search(p) for p in u)][:per_section]
            heading = (section.heading_path[-1] if section.heading_path else "") or source.title
            out.extend(_Candidate(source.index, rank, pos, unit, relative, heading) for pos, unit in enumerate(units))
    return out


def _shortlist(question: str, candidates: list[_Candidate]) -> list[_Candidate]:
    """The candidates worth embedding: each section's lead sentence and the best by BM25."""
    if len(candidates) <= EMBED_CANDIDATES:
        return candidates
    lexical = bm25_scores(question, [c.text for c in candidates])
    keep = {i for i, c in enumerate(candidates) if c.position == 0}
    for i in np.argsort(-lexical, kind="stable"):
        if len(keep) >= EMBED_CANDIDATES:
            break
        keep.add(int(i))
    return [c for i, c in enumerate(candidates) if i in keep]


# Steering's lengths (steer.length): a long answer draws on this many times the draft's word budget, in
# sections; a short one keeps at most SHORT_SENTENCES sentences, the one closest to the question first.
LONG_FACTOR = 3
SHORT_SENTENCES = 3
_YES_NO = re.compile(r"^\s*(?:is|are|am|was|were|can|could|does|do|did|should|shall|will|would|has|have|had|may|might|"
                     r"must|isn't|aren't|can't|doesn't|don't|won't)\b", re.IGNORECASE)
# A sentence that denies: "cannot", "is not", "doesn't", "never", "no longer" ...
_NEGATION = re.compile(r"\b(?:not|no|never|cannot|neither|nor|none|nothing)\b|n't\b", re.IGNORECASE)


def is_yes_no(question: str) -> bool:
    """Whether the question asks yes or no ("Is ...?", "Can I ...?"), not which or how."""
    return bool(_YES_NO.match(question)) and " or " not in question.lower()


def yes_or_no(sentence: str) -> str:
    """The offline writer's yes/no: "No" when the sentence that best answers the question denies, else "Yes".
    A heuristic (measured in bench/bench_steering.py on the FAQ questions whose gold answer starts with one)."""
    return "No" if _NEGATION.search(strip_markers(sentence)) else "Yes"


def join_sections(candidates: list[_Candidate]) -> str:
    """A long answer: the chosen units under their sections' headings, in the order given."""
    parts: list[str] = []
    current = None
    for c in candidates:
        if (c.source, c.section_rank) != current:
            current = (c.source, c.section_rank)
            parts.append(f"## {c.heading}" if c.heading else "")
        parts.append(c.marked())
    return "\n\n".join(p for p in parts if p)


class OfflineWriterModel:
    """Extractive stand-in for the strong model's two passes."""

    def __init__(self, embedder: Embedder, cfg: PipelineConfig):
        self.embedder = embedder
        self.cfg = cfg
        self.identity = f"{WRITER_VERSION}:writer:{embedder.model_id}"

    def job_identity(self, job: str) -> str:
        return self.identity

    def draft(self, question: str, sources: list[SourceDoc], *, max_words: int,
              style: AnswerStyle = AnswerStyle()) -> Decision[Conversation]:
        """MMR within ``max_words``; a long answer (``style.length``) draws on more and keeps its sections.
        The offline writer is English-only: ``style.language`` changes nothing here (the answer says so)."""
        prompt = ChatTurn("user", f"{question}\n\n[{len(sources)} sources]")
        if style.length == "long":
            max_words *= LONG_FACTOR
        candidates = _candidates(sources)
        if not candidates:
            return Decision(Conversation((prompt, ChatTurn("model", ""))), method="offline-mmr",
                            status="no_evidence", error="no source text to draw an answer from")
        candidates = _shortlist(question, candidates)
        texts = [c.text for c in candidates]
        relevance = hybrid_scores(question, texts, self.embedder)
        # The section ranker read each kept section's heading and lead, which a sentence alone lacks:
        # its score (relative to the best kept section) weighs in, as a writer reads the best evidence
        # first. And an answer is prose: sentences of plain words beat code, signatures and table rows.
        relevance = relevance + np.array([0.05 / (1 + c.section_rank) + SECTION_WEIGHT * c.section_score
                                          + PROSE_WEIGHT * prose_share(c.text) for c in candidates],
                                         dtype=np.float32)
        chosen = mmr_select(
            relevance,
            self.embedder.encode(texts),
            [word_count(t) for t in texts],
            budget=max_words,
            lam=self.cfg.generation.mmr_lambda,
        )
        # A question of several parts: each part's answer, whatever MMR chose for the whole.
        parts = question_parts(question)
        opening = self.part_answers(parts, sources, candidates) if len(parts) > 1 else []
        chosen = [i for i in chosen if not any(candidates[i].holds(candidates[o]) or candidates[o].holds(candidates[i])
                                               or i == o for o in opening)]
        # The evidence in the order the filters ranked it: sources as numbered, each source's sections
        # best first, each section's sentences in their own order, which keeps its reasoning readable.
        # The refine pass trims from the end, so the best-ranked evidence survives. (Leading with the
        # section MMR happened to pick first instead cited the gold page for 94.5% of FAQ protocol (b)
        # against 97.7% in this order, with ROUGE-L 0.648 against 0.663; protocol (a) 0.135 and 0.136.)
        chosen = [i for i in chosen if not any(candidates[j].holds(candidates[i]) for j in chosen if j != i)]
        chosen.sort(key=lambda i: (candidates[i].source, candidates[i].section_rank, candidates[i].position))
        if style.length == "long":
            chosen = sorted(chosen + opening, key=lambda i: (candidates[i].source, candidates[i].section_rank,
                                                             candidates[i].position))
            return Decision(Conversation((prompt, ChatTurn("model", join_sections([candidates[i] for i in chosen])))),
                            method="offline-mmr-long")
        # The parts' answers open the draft, in the question's order; its prompt turn says how many
        # sentences they are, and the refine pass keeps them (as a model reads its own first turn).
        if opening:
            lead = join_units([candidates[i].marked() for i in opening])
            prompt = ChatTurn("user", f"{prompt.text}\n[{len(_marked_units(lead))} {OPENING_NOTE}]")
        text = join_units([candidates[i].marked() for i in opening + chosen])
        return Decision(Conversation((prompt, ChatTurn("model", text))), method="offline-mmr")

    def part_answers(self, parts: list[str], sources: list[SourceDoc], candidates: list[_Candidate]) -> list[int]:
        """For each part of a question of several parts (in the question's order), the candidate that
        answers it: the kept section that matches the part best as the section ranker reads a section
        (heading path and lead, ``section_rank.preview_chars``), and in it its first prose unit.
        An answer seldom repeats the question its heading asks (a FAQ's never does): a sentence alone, matched
        against the part, came from another page for 10 of the two-part tune half's 40 questions. No
        candidate answers two parts."""
        keys = sorted({(c.source, c.section_rank) for c in candidates})
        section = {(s.index, rank): sec for s in sources for rank, sec in enumerate(s.sections)}
        views = [section_preview(section[k].heading_path, section[k].text, self.cfg.section_rank.preview_chars)
                 for k in keys]
        chosen: list[int] = []
        for part in parts:
            best = keys[int(np.argmax(hybrid_scores(part, views, self.embedder)))]
            units = [i for i, c in enumerate(candidates) if (c.source, c.section_rank) == best and i not in chosen]
            if units:
                chosen.append(min(units, key=lambda i: candidates[i].position))
        return chosen

    def refine(self, question: str, conversation: Conversation, examples: list[FewShotExample],
               style: AnswerStyle = AnswerStyle()) -> Decision[str]:
        draft = conversation.last_reply
        if not draft.strip():
            return Decision("", method="offline-fit", status="no_evidence", error="the draft is empty")
        if style.length == "long":
            return Decision(draft, method="offline-long")  # the draft's sections, as drawn
        if style.length == "short":
            return Decision(self.short(question, _marked_units(draft)), method="offline-short")
        target = self.target_words(examples)
        sentences = _marked_units(draft)
        opening = _OPENING.search(conversation.turns[0].text) if conversation.turns else None
        kept = set(range(min(int(opening.group(1)), len(sentences)))) if opening else \
            part_sentences(question, sentences)
        # The draft puts the best-ranked evidence first: trim from the end, stopping at the length
        # closest to the target (drop a sentence only when that gets closer), never the sentences that
        # answer the parts of a question of several parts.
        while len(sentences) > max(1, len(kept)):
            total = sum(word_count(strip_markers(s)) for s in sentences)
            last = max(i for i in range(len(sentences)) if i not in kept)
            if total <= target or total - target < word_count(strip_markers(sentences[last])) / 2:
                break
            sentences.pop(last)
            kept = {i - (i > last) for i in kept}
        # Trimming from the end may drop a sentence that points back, never the one it points at; as a
        # numbered step it stays in its antecedent's step.
        if is_howto(question) and len(sentences) > 1:
            return Decision(join_units(_with_antecedents(sentences), numbered=True), method="offline-fit")
        return Decision(join_units(sentences), method="offline-fit")

    def short(self, question: str, units: list[str]) -> str:
        """At most SHORT_SENTENCES sentences: the unit closest to the question first (after "Yes:" or "No:"
        when the question asks yes or no), then the draft's next ones; prose before quoted blocks."""
        prose = [u for u in units if "\n" not in strip_markers(u).strip()] or units
        relevance = hybrid_scores(question, [strip_markers(u) for u in prose], self.embedder)
        lead = prose[int(np.argmax(relevance))]
        picked = [lead]
        count = len(split_sentences(strip_markers(lead)))
        for unit in prose:
            n = len(split_sentences(strip_markers(unit)))
            if unit is lead or count + n > SHORT_SENTENCES:
                continue
            picked.append(unit)
            count += n
        text = join_units(picked)
        if is_yes_no(question):
            text = f"{yes_or_no(lead)}: {text}"
        return text

    def target_words(self, examples: list[FewShotExample]) -> int:
        """The examples' median answer length, within sane bounds; the draft budget without examples."""
        if not examples:
            return self.cfg.generation.draft_words
        median = statistics.median(word_count(e.answer) for e in examples)
        return int(min(max(median, 30), 300))
