"""Does the evidence kept so far cover the question? Which parts, and what is missing (the offline check).

Beyond the paper: a variant that looks again (``research.enabled``) asks this after section ranking, and
when parts are missing it searches again, aimed at them. The check is lexical and cheap:

* the question is cut into its **parts**: its sentences, and clauses joined by "and" (or a comma, a
  semicolon, "as well as") that ask something of their own ("How do I X, and what is Y?" has two);
* a part is **covered** when one kept section (heading path and text) holds at least ``coverage`` of the
  part's keywords, stemmed as BM25 stems them;
* the **missing** list is the parts no section covers, then the question's keywords found in no section.

``sufficient`` when every part is covered, ``partial`` when some are, ``not_found`` when none is. The
follow-up queries (:func:`followup_queries`) are the uncovered parts as asked, then their keywords (with
the question's own keywords added to a short part), never a query searched before.

A variant that looks again also judges answerability part by part with these parts
(``hifirag_core.evidence.answerability.by_parts``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from hifirag_core.retrieval.scoring import tokenize
from hifirag_core.text import FILLER, question_keywords
from hifirag_core.types import SourceSection, Sufficiency

# A clause that asks something of its own starts with one of these after "and", a comma or a semicolon.
_ASKING = r"(?:what|how|why|when|where|which|who|whom|whose|is|are|was|were|can|could|do|does|did|should|" \
          r"would|will|has|have|list|name|explain|describe|tell)"
_SPLIT = re.compile(rf"\?+\s*|;\s*|,?\s+(?:and(?:\s+also)?|as well as|also)\s+(?={_ASKING}\b)|,\s+(?={_ASKING}\b)",
                    re.IGNORECASE)
# A part is covered when one kept section holds this share of its keywords (rounded up).
COVERAGE = 0.75
# Part of a section's text read for coverage: its heading path and its first characters (a section of a
# long page can run to pages; its subject is in its beginning).
TEXT_CHARS = 4000


def question_parts(question: str) -> list[str]:
    """The parts of a question that each ask something (at least one keyword each), in order."""
    pieces = [p.strip(" ,.;:") for p in _SPLIT.split(FILLER.sub(" ", question)) if p and p.strip(" ,.;:")]
    parts: list[str] = []
    for piece in pieces:
        if question_keywords(piece):
            parts.append(piece)
        elif parts:  # a piece with no keyword of its own belongs to the part before it
            parts[-1] = f"{parts[-1]} {piece}"
    return parts or [question.strip()]


def _terms(text: str) -> set[str]:
    keywords = question_keywords(text)
    return set(tokenize([" ".join(keywords)])[0]) if keywords else set()


def check_coverage(question: str, sections: Sequence[SourceSection], coverage: float = COVERAGE) -> Sufficiency:
    """The offline sufficiency check over the kept ``sections`` (see the module docstring)."""
    found = [set(tokenize([" ".join(s.heading_path) + "\n" + s.text[:TEXT_CHARS]])[0]) for s in sections]
    covered, missing = [], []
    for part in question_parts(question):
        terms = _terms(part)
        need = max(1, math.ceil(coverage * len(terms)))
        if terms and any(len(terms & seen) >= need for seen in found):
            covered.append(part)
        else:
            missing.append(part)
    everywhere = set().union(*found) if found else set()
    absent = [k for k in question_keywords(question) if _terms(k) and not _terms(k) & everywhere]
    verdict = "sufficient" if not missing else ("partial" if covered else "not_found")
    return Sufficiency(verdict, tuple(covered), tuple(missing + [k for k in absent if k not in " ".join(missing)]))


def _normal(query: str) -> str:
    return " ".join(query.lower().split())


def followup_queries(question: str, missing: Sequence[str], earlier: Sequence[str], max_queries: int) -> list[str]:
    """Queries aimed at what is ``missing``: each missing part as asked, then its keywords alone; never a
    query in ``earlier`` (compared without case and spacing), at most ``max_queries``."""
    seen = {_normal(q) for q in earlier}
    parts = [m for m in missing if len(m.split()) > 1] or list(missing)
    candidates: list[str] = []
    for part in parts:
        cleaned = re.sub(r"^(?:and|also|as well as)\s+", "", part.strip(), flags=re.IGNORECASE)
        candidates.append(cleaned)
        keywords = question_keywords(cleaned)
        if len(keywords) < 3:  # a short part ("and what is its default?") needs the question's subject
            keywords += [k for k in question_keywords(question) if k not in keywords][: 3 - len(keywords)]
        if keywords:
            candidates.append(" ".join(keywords))
    if not candidates:
        candidates = [" ".join(question_keywords(question))]
    queries: list[str] = []
    for query in candidates:
        key = _normal(query)
        if query.strip() and key not in seen:
            seen.add(key)
            queries.append(query.strip())
        if len(queries) >= max_queries:
            break
    return queries

