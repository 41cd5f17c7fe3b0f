"""Per-sentence citations: which source backs each sentence of an answer, and what decided it.

The citation stage (the paper's A.5) ends here whatever the filter model is:

* the answer is split into claim sentences (the evaluation's ``claim_sentences``), each with the
  ``[n]`` markers the writer put after it, if any (:func:`marked_sentences`); markers are a hint;
* each sentence gets its sources from the ones *allowed* (the sources the model said support the
  answer, or all of them for the offline check), by :func:`attribute_sentences`: a marked source
  first, else the allowed source that supports the sentence best, where ``support`` is the best
  MiniLM cosine between the sentence and a sentence of the source (:func:`citation_support`);
  ``min_support`` leaves a sentence uncited when no allowed source reaches it;
* :func:`render_citations` puts the markers back into the answer as the user reads it, numbered
  in the order the sources are first cited;
* :func:`locate_evidence` names, for each cited source of a sentence, the section and the source
  sentence that support it best (the citation ledger shows them beside the sentence).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from hifirag_core.metrics.citations import SHORTLIST, claim_sentences, support_matrix
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.retrieval.scoring import bm25_scores
from hifirag_core.text import split_sentences, word_count
from hifirag_core.types import SentenceCitation, SourceDoc, SourceSection

_MARKER = re.compile(r"\s*\[(\d+)\]")
_MARKER_RUN = re.compile(r"(?:\s*\[\d+\])+")
_NUMBER = re.compile(r"\d+")
# Sentences considered per section when measuring support (the offline draft reads as many).
PER_SECTION = 15


def strip_markers(text: str) -> str:
    """The text without its ``[n]`` markers."""
    return _MARKER.sub("", text)


def marked_sentences(answer: str) -> list[tuple[str, frozenset[int]]]:
    """The answer's claim sentences (three or more words), each with the source numbers marked after it.

    A marker ends a claim: the text between two markers is split into sentences, which all carry the
    markers that close it (a sentence after the last marker carries none). List prefixes are dropped.
    """
    out: list[tuple[str, frozenset[int]]] = []
    position = 0
    for match in _MARKER_RUN.finditer(answer + " "):
        chunk, markers = answer[position : match.start()], frozenset(int(n) for n in _NUMBER.findall(match.group()))
        position = match.end()
        out.extend((sentence, markers) for sentence in claim_sentences(chunk))
    out.extend((sentence, frozenset()) for sentence in claim_sentences(answer[position:]))
    return out


def source_sentences(source: SourceDoc, per_section: int = PER_SECTION) -> list[str]:
    """The sentences of a source's kept sections that can support a claim (headings and fragments left out)."""
    out = []
    for section in source.sections:
        sentences = [s for s in split_sentences(section.text) if not s.startswith("#") and word_count(s) >= 3]
        out.extend(sentences[:per_section])
    return out


def citation_support(sentences: list[str], sources: list[SourceDoc], embedder: Embedder,
                     shortlist: int | None = SHORTLIST) -> np.ndarray:
    """(sentences x sources): the best cosine between each sentence and any sentence of each source.

    As in the citation metrics, only each answer sentence's ``shortlist`` best source sentences by BM25
    are embedded: with a model's uncapped sections, embedding every sentence of every source made this
    stage cost minutes of CPU per question (bench/bench_backends.py).
    """
    if not sentences or not sources:
        return np.zeros((len(sentences), len(sources)), dtype=np.float32)
    matrix = support_matrix(sentences, {j: source_sentences(s) for j, s in enumerate(sources)},
                            lambda a, b: embedder.encode(a) @ embedder.encode(b).T, shortlist)
    return np.stack([matrix[j] for j in range(len(sources))], axis=1)


def attribute_sentences(claims: Sequence[tuple[str, frozenset[int]]], numbers: Sequence[int],
                        support: np.ndarray | None, *, allowed: Collection[int], min_support: float | None,
                        method: str, cite_unmarked: bool = True) -> list[SentenceCitation]:
    """Each claim's citation among the ``allowed`` source numbers (``numbers`` orders the support columns).

    With ``support``, one source per sentence: the marked allowed source that supports it best, else the
    allowed source that supports it best, at ``min_support`` or above when that is set. Without
    ``support``, the sentence's marked allowed sources, else (``cite_unmarked``) every allowed source.
    """
    column = {n: j for j, n in enumerate(numbers)}
    usable = [n for n in numbers if n in set(allowed)]
    out: list[SentenceCitation] = []
    for i, (text, markers) in enumerate(claims):
        marked = tuple(sorted(markers))
        if support is None:
            own = tuple(n for n in usable if n in markers)
            chosen, how = (own, "+marker") if own else ((tuple(usable), "") if cite_unmarked else ((), ""))
            out.append(SentenceCitation(i, text, chosen, None, marked, method + how if chosen else method))
            continue
        row = support[i]
        candidates = [n for n in usable if min_support is None or row[column[n]] >= min_support]
        candidates.sort(key=lambda n: (-float(row[column[n]]), n))
        own = [n for n in candidates if n in markers]
        if own:
            best, how = own[0], "+marker"
        elif candidates:
            best, how = candidates[0], "+support"
        else:
            out.append(SentenceCitation(i, text, (), None, marked, method))
            continue
        out.append(SentenceCitation(i, text, (best,), round(float(row[column[best]]), 4), marked, method + how))
    return out


def source_scores(support: np.ndarray) -> list[float]:
    """Per source: its best support over the answer's sentences (0 when the answer has none)."""
    if support.size == 0:
        return [0.0] * support.shape[1]
    return [float(x) for x in support.max(axis=0)]


def render_citations(text: str, sentences: Sequence[tuple[str, Sequence[str]]]) -> tuple[str, list[str]]:
    """``text`` with ``[k]`` after each cited sentence, and the cited URLs (``[k]`` is ``urls[k - 1]``).

    ``sentences`` are the claim sentences in order with the URLs cited for each; sources are numbered
    in the order they are first cited. A sentence that cannot be found in the text (it never happens
    for sentences split from it) keeps its citation in the list but gets no marker. A sentence that ends
    inside a fenced code block gets its markers on the line after the block: inside, they would be code,
    and after the closing fence they would keep it from closing, so the rest of the answer became code.
    """
    urls: list[str] = []
    marks: dict[int, list[int]] = {}  # position in text -> the numbers placed there, in order
    code = _fenced_blocks(text)
    cursor = 0
    for sentence, cited in sentences:
        if not cited:
            continue
        tokens = sentence.split()
        if not tokens:
            continue
        match = re.compile(r"\s+".join(re.escape(t) for t in tokens)).search(text, cursor)
        numbers = []
        for url in cited:
            if url not in urls:
                urls.append(url)
            numbers.append(urls.index(url) + 1)
        if match is None:
            continue
        cursor = match.end()
        at = next((end for start, end in code if start < cursor <= end), cursor)
        marks.setdefault(at, []).extend(numbers)
    pieces: list[str] = []
    last = 0
    for at in sorted(marks):
        after_code = any(end == at for _, end in code)
        pieces.append(text[last:at])
        pieces.append(("\n" if after_code else " ") + "".join(f"[{n}]" for n in dict.fromkeys(marks[at])))
        last = at
    pieces.append(text[last:])
    return "".join(pieces), urls


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """The fenced code blocks of Markdown ``text``: (start, end) with ``end`` at the end of the closing fence's
    line (the text's end for a fence never closed)."""
    blocks: list[tuple[int, int]] = []
    opened: tuple[int, str] | None = None
    at = 0
    for line in text.splitlines(keepends=True):
        fence = _FENCE.match(line)
        if opened is None and fence:
            opened = (at, fence.group(1))
        elif (opened is not None and fence and fence.group(1)[0] == opened[1][0]
              and len(fence.group(1)) >= len(opened[1]) and not line[fence.end():].strip()):
            blocks.append((opened[0], at + len(line.rstrip("\r\n"))))
            opened = None
        at += len(line)
    if opened is not None:
        blocks.append((opened[0], len(text)))
    return blocks


@dataclass(frozen=True)
class Evidence:
    """Where in a cited source a sentence's support is: the section and its sentence closest to the claim."""

    section_id: str
    sentence: str
    score: float | None  # MiniLM cosine between the claim and that sentence


def _passages(section: SourceSection, per_section: int) -> list[str]:
    sentences = [s for s in split_sentences(section.text) if not s.startswith("#") and word_count(s) >= 3]
    return sentences[:per_section] or ([section.text.strip()] if section.text.strip() else [])


def locate_evidence(claim: str, source: SourceDoc, embedder: Embedder, shortlist: int | None = SHORTLIST,
                    per_section: int = PER_SECTION) -> Evidence | None:
    """The section of ``source`` and its sentence that support ``claim`` best (BM25 shortlist, then MiniLM
    cosine, as :func:`citation_support` measures support); None for a source without text."""
    candidates = [(section.section_id, passage) for section in source.sections
                  for passage in _passages(section, per_section)]
    if not candidates:
        return None
    if shortlist is not None and len(candidates) > shortlist:
        lexical = bm25_scores(claim, [p for _, p in candidates])
        keep = sorted(sorted(range(len(candidates)), key=lambda i: (-float(lexical[i]), i))[:shortlist])
        candidates = [candidates[i] for i in keep]
    sims = embedder.encode([p for _, p in candidates]) @ embedder.encode([claim])[0]
    best = int(np.argmax(sims))
    return Evidence(candidates[best][0], candidates[best][1], round(float(sims[best]), 4))
