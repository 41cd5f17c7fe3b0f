"""Citation precision and recall with a similarity-based support score.

An answer is a list of claim sentences, each with the source numbers cited for it: the pipeline's
per-sentence citations (the ``answer_sentences`` table, :func:`score_claims`), or a text that
carries ``[n]`` markers after the sentence they cite (``[1][3]`` and ``[1, 3]`` too,
:func:`citation_score`). For a sentence and a source, *support* is the best
similarity between the sentence and any passage (sentence) of the source's text; the sentence is
supported by the source when support reaches a calibrated threshold (see
``hifirag_core/evaluation/eval_config.py`` for how it was calibrated).

* **recall**: the share of answer sentences supported by at least one of the sources they cite
  (an uncited sentence is unsupported);
* **precision**: the share of citations (sentence, cited source) whose source alone supports
  the sentence; undefined (``None``) for an answer that cites nothing.

Sentences under three words (list numbers, headings) are not claims and are skipped. The
similarity is injected, so the definitions are tested with hand-made scores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

from hifirag_core.retrieval.scoring import tokenize
from hifirag_core.text import split_sentences, word_count

# One or more markers in a row: "[1]", "[1][2]", "[1, 2]", "[1] [3]".
_MARKERS = re.compile(r"(?:\s*\[\d+(?:\s*,\s*\d+)*\])+")
_NUMBER = re.compile(r"\d+")
_LIST_PREFIX = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+")
MIN_CLAIM_WORDS = 3
SHORTLIST = 8  # passages per sentence compared by similarity (the best by BM25)

# (answer sentences, source passages) -> matrix of similarities in [-1, 1]
Similarity = Callable[[list[str], list[str]], np.ndarray]


@dataclass(frozen=True)
class CitedSentence:
    """An answer sentence without its markers, and the source numbers it cites."""

    text: str
    sources: tuple[int, ...]


@dataclass(frozen=True)
class CitationScore:
    """One answer's citation precision and recall, with the counts behind them."""

    precision: float | None
    recall: float | None
    n_sentences: int
    n_citations: int
    n_supported_sentences: int
    n_supported_citations: int


def cited_sentences(text: str) -> list[CitedSentence]:
    """Split a marked answer into claim sentences, each with the markers that follow it.

    A run of markers belongs to the claim just before it, so the sentences between two runs
    cite nothing; runs before the first claim (a writer that leads with them) go to that claim.
    """
    out: list[CitedSentence] = []
    pos = 0
    pending: tuple[int, ...] = ()
    for match in _MARKERS.finditer(text):
        claims = [CitedSentence(s, ()) for s in claim_sentences(text[pos:match.start()])]
        if claims and pending:
            claims[0], pending = CitedSentence(claims[0].text, pending), ()
        out.extend(claims)
        numbers = tuple(int(n) for n in _NUMBER.findall(match.group()))
        if out:
            last = out[-1]
            out[-1] = CitedSentence(last.text, tuple(dict.fromkeys(last.sources + numbers)))
        else:
            pending = tuple(dict.fromkeys(pending + numbers))
        pos = match.end()
    tail = [CitedSentence(s, ()) for s in claim_sentences(text[pos:])]
    if tail and pending:
        tail[0] = CitedSentence(tail[0].text, pending)
    return out + tail


def claim_sentences(segment: str) -> list[str]:
    """The sentences of ``segment`` worth checking: list prefixes dropped, three words or more."""
    sentences = (_LIST_PREFIX.sub("", s).strip() for s in split_sentences(segment))
    return [s for s in sentences if word_count(s) >= MIN_CLAIM_WORDS]


def support_matrix(sentences: Sequence[str], sources: Mapping[int, Sequence[str]], similarity: Similarity,
                   shortlist: int | None = SHORTLIST) -> dict[int, np.ndarray]:
    """Per source number: each sentence's support (its best similarity to any of the source's passages).

    With ``shortlist``, only each sentence's ``shortlist`` best passages by BM25 are compared (their
    union per source): a copied or paraphrased sentence shares its rare words with its passage, and
    embedding every sentence of every cited section would dominate the cost of scoring.
    """
    out: dict[int, np.ndarray] = {}
    for number, passages in sources.items():
        passages = [p for p in passages if p.strip()]
        if not sentences or not passages:
            out[number] = np.zeros(len(sentences), dtype=np.float32)
            continue
        if shortlist is not None and len(passages) > shortlist:
            passages = _shortlist(sentences, passages, shortlist)
        sims = np.asarray(similarity(list(sentences), list(passages)), dtype=np.float32)
        out[number] = sims.max(axis=1)
    return out


def _shortlist(sentences: Sequence[str], passages: list[str], k: int) -> list[str]:
    """The union over sentences of each one's ``k`` best passages by BM25, in passage order."""
    doc_tokens = tokenize(passages)
    if not any(doc_tokens):
        return passages[:k]
    index = bm25s.BM25()
    index.index(doc_tokens, show_progress=False)
    keep: set[int] = set()
    for tokens in tokenize(list(sentences)):
        if tokens:
            scores = np.asarray(index.get_scores(tokens))
            keep.update(int(i) for i in np.argsort(-scores, kind="stable")[:k])
    return [p for i, p in enumerate(passages) if i in keep] or passages[:k]


def citation_score(text: str, sources: Mapping[int, Sequence[str]], similarity: Similarity,
                   threshold: float, shortlist: int | None = SHORTLIST) -> CitationScore:
    """Precision and recall of one marked answer against the passages of its numbered sources."""
    return score_claims(cited_sentences(text), sources, similarity, threshold, shortlist)


def score_claims(claims: Sequence[CitedSentence], sources: Mapping[int, Sequence[str]], similarity: Similarity,
                 threshold: float, shortlist: int | None = SHORTLIST) -> CitationScore:
    """Precision and recall of an answer's claim sentences against the passages of their cited sources.

    A citation of a source that is not in ``sources`` counts as unsupported.
    """
    if not claims:
        return CitationScore(None, None, 0, 0, 0, 0)
    cited = {n for c in claims for n in c.sources if n in sources}
    support = support_matrix([c.text for c in claims], {n: sources[n] for n in sorted(cited)}, similarity, shortlist)
    supported_sentences = supported_citations = n_citations = 0
    for i, claim in enumerate(claims):
        hits = [n in support and float(support[n][i]) >= threshold for n in claim.sources]
        n_citations += len(hits)
        supported_citations += sum(hits)
        supported_sentences += any(hits)
    precision = supported_citations / n_citations if n_citations else None
    return CitationScore(precision, supported_sentences / len(claims), len(claims), n_citations,
                         supported_sentences, supported_citations)


def source_passages(text: str) -> list[str]:
    """A source's text as the passages support is measured against: its sentences and list lines."""
    return [s for s in split_sentences(text) if word_count(s) >= MIN_CLAIM_WORDS]
