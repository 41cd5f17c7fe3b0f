"""How good a sectioning is, measured on the shared documentation corpus (quality gate and bench).

``SITE_CHROME`` defines "navigation text" per site as data: patterns written from the real chrome
of each site's pages (sidebars, related-links bars, prev/next tables, headers, footers, tables of
contents), each specific enough never to occur in the main content of that site. An output leaks
navigation when any pattern of its site matches its text (whitespace collapsed). The patterns
allow Markdown punctuation between words, so html2text's and trafilatura's outputs are judged by
the same rule as ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hifirag_core.corpus.sites import SourcePage
from hifirag_core.hashing import sha256_bytes, stable_hash
from hifirag_core.sectioning.section_types import ParsedSection

_J = r"[\W_]+"  # any run of punctuation or Markdown between two chrome words

SITE_CHROME: dict[str, tuple[str, ...]] = {
    # Sphinx (pydoctheme): sidebar, "related" bars, footer
    "python3.11-doc": (
        r"Previous topic", r"Next topic", r"\bThis Page\b", r"Report a Bug", r"Show Source",
        r"Quick search", r"non-profit corporation", r"Created using" + _J + r"Sphinx",
        r"3\.11\.2 Documentation" + _J + r"Python", r"Table of Contents",
    ),
    # Sphinx (Django theme): site header with global nav, sidebar, prev/up/next bars
    "python-django-doc": (
        r"Django 3\.2\.25 documentation", r"Home" + _J + r"Table of contents" + _J + r"Index",
        r"Previous topic", r"Next topic", r"Quick search", r"Last update:", r"Table of Contents",
        r"previous" + _J + r"up" + _J + r"next",
    ),
    # DocBook XSL: navheader / navfooter tables and chapter tables of contents
    "postgresql-doc-15": (
        r"\bPrev" + _J + r"Up\b", r"\bHome" + _J + r"Next\b", r"\bUp" + _J + r"Next\b",
        r"Table of Contents",
    ),
    # SQLite's site template: logo tagline, menus, search box, footer, fancy table of contents
    "sqlite3-doc": (
        r"Small\. Fast\. Reliable\.", r"Choose any three", r"Search Documentation",
        r"Search Changelog", r"This page last modified", r"Table Of Contents",
    ),
    # DocBook XSL (Debian FAQ): image prev/next/home links and chapter tables of contents
    "debian-faq": (
        r"!\[Prev\]", r"!\[Next\]", r"!\[Home\]", r"\bPrev" + _J + r"Next\b", r"Table of Contents",
    ),
}
_COMPILED = {site: [re.compile(p) for p in pats] for site, pats in SITE_CHROME.items()}


def navigation_leaks(site: str, text: str) -> list[str]:
    """The chrome patterns of ``site`` found in ``text`` (empty: no navigation text)."""
    flat = " ".join(text.split())
    return [p.pattern for p in _COMPILED.get(site, ()) if p.search(flat)]


def page_text(sections: Iterable[ParsedSection]) -> str:
    return "\n\n".join(s.text if not s.heading else f"{s.heading}\n\n{s.text}" for s in sections)


# --- FAQ known-item check ---------------------------------------------------------------------


@dataclass(frozen=True)
class FaqOutcome:
    id: str
    matches: int  # sections whose heading is the question
    recall: float  # ROUGE-L recall of the gold answer in the matched section's text (0 when not one)
    anchor_ok: bool

    def mapped(self, min_recall: float = 0.9) -> bool:
        return self.matches == 1 and self.recall >= min_recall


def _norm_heading(text: str) -> str:
    return " ".join(text.split())


def faq_outcomes(rows: Sequence[Mapping[str, object]],
                 sections_of: Mapping[tuple[str, str], Sequence[ParsedSection]]) -> list[FaqOutcome]:
    """For each FAQ question: its section on its page (by heading), and how much answer it holds."""
    from rouge_score import rouge_scorer  # heavy import, only where the check runs

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    out: list[FaqOutcome] = []
    for row in rows:
        sections = sections_of.get((str(row["corpus"]), str(row["page"])), ())
        question = _norm_heading(str(row["question"]))
        hits = [s for s in sections if _norm_heading(s.heading) == question]
        recall = 0.0
        anchor_ok = False
        if len(hits) == 1:  # strict: a split answer (two sections) does not count as mapped
            recall = scorer.score(str(row["answer"]), hits[0].text)["rougeL"].recall
            anchor_ok = hits[0].anchor == row.get("anchor")
        out.append(FaqOutcome(str(row["id"]), len(hits), recall, anchor_ok))
    return out


# --- gold set check ---------------------------------------------------------------------------


@dataclass
class GoldScore:
    headings: int = 0
    headings_found: int = 0  # sampled headings present with the expected heading path (suffix)
    musts: int = 0
    musts_found: int = 0  # expected strings inside the expected section
    pages: int = 0
    pages_clean: int = 0  # pages whose output has none of the forbidden strings
    kept_total: int = 0
    kept_found: int = 0  # every content heading listed for the page, present in some path
    failures: list[str] = field(default_factory=list)

    def ratios(self) -> dict[str, float]:
        def r(a: int, b: int) -> float:
            return round(a / b, 4) if b else 1.0

        return {
            "gold_heading_paths": r(self.headings_found, self.headings),
            "gold_must_contain": r(self.musts_found, self.musts),
            "gold_pages_clean": r(self.pages_clean, self.pages),
            "gold_headings_kept": r(self.kept_found, self.kept_total),
        }


def _flat(text: str) -> str:
    return " ".join(text.split())


def _contains(path: tuple[str, ...], part: tuple[str, ...]) -> bool:
    n = len(part)
    return any(path[i:i + n] == part for i in range(len(path) - n + 1))


def score_gold_page(entry: Mapping[str, object], sections: Sequence[ParsedSection], score: GoldScore) -> None:
    """Add one gold page's expectations to ``score`` (failures are described for the test output)."""
    page = f"{entry['site']}:{entry['relpath']}"
    score.pages += 1
    by_path: dict[tuple[str, ...], list[ParsedSection]] = {}
    for s in sections:
        by_path.setdefault(s.heading_path, []).append(s)
    everything = _flat(page_text(sections))
    forbidden = [m for m in entry.get("must_not", []) if _flat(str(m)) in everything]  # type: ignore[union-attr]
    leaks = navigation_leaks(str(entry["site"]), everything)
    if forbidden or leaks:
        score.failures.append(f"{page}: forbidden text present: {forbidden + leaks}")
    else:
        score.pages_clean += 1
    for item in entry.get("sections", []):  # type: ignore[union-attr]
        expected = tuple(item["path"])
        score.headings += 1
        # a heading with no text of its own is no section, but it heads the paths of its children
        found = [secs for path, secs in by_path.items() if _contains(path, expected)]
        if not found:
            score.failures.append(f"{page}: no section with heading path ending {list(expected)}")
        else:
            score.headings_found += 1
        for must in item.get("must", []):
            score.musts += 1
            text = _flat("\n\n".join(s.text for secs in found for s in secs))
            if _flat(must) in text:
                score.musts_found += 1
            else:
                score.failures.append(f"{page}: {must!r} not under {list(expected)}")
    in_paths = {h for s in sections for h in s.heading_path}
    for heading in entry.get("headings", []):  # type: ignore[union-attr]
        score.kept_total += 1
        if heading in in_paths:
            score.kept_found += 1
        else:
            score.failures.append(f"{page}: heading {heading!r} lost")


# --- the quality gate: scores over the gold pages and the FAQ pages, and the gold set's fingerprint


def gold_fingerprint(gold: object, faq_bytes: bytes) -> str:
    """What the floors were measured on: the gold set, the FAQ file and the chrome definitions."""
    return stable_hash({"gold": gold, "faq": sha256_bytes(faq_bytes), "chrome": SITE_CHROME})


def gate_scores(gold: Sequence[Mapping[str, object]], faq_rows: Sequence[Mapping[str, object]],
                pages: Iterable[SourcePage],
                parse: Callable[[bytes, str], Sequence[ParsedSection]]) -> tuple[dict[str, float], list[str]]:
    """Gold-set and FAQ scores, each page parsed once; returns the scores and what failed."""
    wanted_gold = {(str(e["site"]), str(e["relpath"])): e for e in gold}
    wanted_faq = {(str(r["corpus"]), str(r["page"])) for r in faq_rows}
    score = GoldScore()
    sections_of: dict[tuple[str, str], Sequence[ParsedSection]] = {}
    for page in pages:
        key = (page.site, page.relpath)
        if key not in wanted_gold and key not in wanted_faq:
            continue
        sections = parse(page.html, page.url)
        if key in wanted_gold:
            score_gold_page(wanted_gold[key], sections, score)
        if key in wanted_faq:
            sections_of[key] = sections
    outcomes = faq_outcomes(faq_rows, sections_of)
    scores = score.ratios()
    scores["faq_mapped"] = round(sum(o.mapped() for o in outcomes) / len(outcomes), 4) if outcomes else 1.0
    scores["faq_anchor"] = round(sum(o.anchor_ok for o in outcomes) / len(outcomes), 4) if outcomes else 1.0
    failures = list(score.failures)
    failures += [f"FAQ {o.id}: {o.matches} sections, recall {o.recall:.3f}" for o in outcomes if not o.mapped()]
    failures += [f"FAQ {o.id}: anchor differs" for o in outcomes if o.mapped() and not o.anchor_ok]
    if score.pages < len(wanted_gold):
        failures.append(f"{len(wanted_gold) - score.pages} gold pages not found in the corpus")
    scores["gold_pages_found"] = round(score.pages / len(wanted_gold), 4) if wanted_gold else 1.0
    return scores, failures
