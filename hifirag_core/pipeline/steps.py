"""What a person watching a question sees as each stage finishes: one Markdown line (or a few) per stage.

The service's ``/run`` stream shows these steps; each stage's spec names its renderer
(``hifirag_core.pipeline.specs``), which reads the stage's output and the outputs it names. Steps name
counts, titles and URLs, and never an error message (an adapter's error can hold a URL with a key in
it): a failed stage shows its status word only. Text that comes from the web is escaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.stages.url_filter import kept_urls
from hifirag_core.records import (
    CitationRecord,
    DraftRecord,
    PageRecord,
    QueryPlanRecord,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    SufficiencyRecord,
    UrlDecisionRecord,
)
from hifirag_core.text import normalize_ws, word_count
from hifirag_core.turns import carried_from

_LISTED = 8  # URLs or sections listed in one step; the rest are counted
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>])")


def md(text: str | None) -> str:
    """Plain text made safe inside Markdown (titles, queries, headings come from the web)."""
    return _MD_SPECIAL.sub(r"\\\1", normalize_ws(text or ""))


def safe_url(url: str) -> str:
    """A URL that stays one link inside ``<...>``."""
    return url.replace(">", "%3E").replace(" ", "%20")


def link(title: str | None, url: str) -> str:
    return f"[{md(title) or md(url)}](<{safe_url(url)}>)"


def _failed(name: str, output: StageOutput) -> str | None:
    return None if output.status == "ok" else f"**{name}**: could not run ({md(output.status)})."


def query_plan(output: StageOutput) -> str:
    plan = next((r for r in output.records if isinstance(r, QueryPlanRecord)), None)
    queries = list(output.value or (plan.queries if plan else None) or [])
    note = "" if output.status == "ok" else f" (the planner failed: {md(output.status)}; the question as asked)"
    listed = "\n".join(f"{n}. {md(q)}" for n, q in enumerate(queries, 1))
    # a follow-up turn: the question as the pipeline reads it, standing alone
    read_as = f"**Follow-up**, read as: {md(plan.question)}\n\n" if plan is not None and plan.question else ""
    return f"{read_as}**Query plan**{note}: {len(queries)} search{'es' if len(queries) != 1 else ''}\n\n{listed}"


def search(output: StageOutput) -> str | None:
    if output.status == "skipped":
        return "**Search**: off; the answer comes from the writer's own knowledge."
    hits = [r for r in output.records if isinstance(r, SearchResultRecord) and r.ok and r.url]
    queries = {r.query_index for r in output.records if isinstance(r, SearchResultRecord)}
    return _failed("Search", output) or (
        f"**Search**: {len(hits)} results for {len(queries)} quer{'ies' if len(queries) != 1 else 'y'}.")


def url_filter(output: StageOutput) -> str:
    found = [r for r in output.records if isinstance(r, UrlDecisionRecord)]
    kept = kept_urls(output)
    if not found:
        return "**URLs kept**: none; the search found nothing to read."
    note = "" if output.status == "ok" else f" (the filter failed: {md(output.status)}; the search's top results)"
    listed = "\n".join(f"{r.order}. {link(r.title, r.url)}" for r in kept[:_LISTED])
    more = f"\n\n(and {len(kept) - _LISTED} more)" if len(kept) > _LISTED else ""
    return f"**URLs kept**{note}: {len(kept)} of {len(found)} found\n\n{listed}{more}"


def fetch(output: StageOutput) -> str:
    pages = [r for r in output.records if isinstance(r, PageRecord)]
    ok = sum(1 for p in pages if p.ok)
    failed = sorted({p.status for p in pages if not p.ok})
    why = f" ({', '.join(md(s) for s in failed)})" if failed else ""
    carried = sum(1 for p in pages if p.ok and carried_from(p) is not None)  # a follow-up turn's, from the earlier
    also = f"; {carried} of them carried from the answer this question follows, to be ranked again" if carried else ""
    return f"**Pages read**: {ok} of {len(pages)}{why}{also}."


def sections(output: StageOutput) -> str:
    secs = [r for r in output.records if isinstance(r, SectionRecord) and r.ok]
    pages = {s.url for s in secs}
    return f"**Sections**: {len(secs)} parsed from {len(pages)} page{'s' if len(pages) != 1 else ''}."


def section_rank(output: StageOutput, parsed: StageOutput | None, fetched: StageOutput | None) -> str:
    """The sections kept, each linked at its anchor under its heading path (``parsed``: the sections
    stage's output; ``fetched``: the fetch stage's, for page titles)."""
    decisions = [r for r in output.records if isinstance(r, SectionDecisionRecord)]
    kept = sorted((d for d in decisions if d.kept), key=lambda d: (d.source_order, d.rank or 0))
    by_id = {s.section_id: s for s in (parsed.records if parsed else []) if isinstance(s, SectionRecord)}
    titles = {p.url: p.title for p in (fetched.records if fetched else []) if isinstance(p, PageRecord)}
    note = "" if output.status == "ok" else f" (the ranking failed: {md(output.status)}; each page's first sections)"
    lines = []
    for d in kept[:_LISTED]:
        sec = by_id.get(d.section_id)
        path = " › ".join(sec.heading_path) if sec and sec.heading_path else d.heading
        anchor = f"#{sec.anchor}" if sec and sec.anchor else ""
        lines.append(f"- {link(path or titles.get(d.url), d.url + anchor)}")
    more = f"\n\n(and {len(kept) - _LISTED} more)" if len(kept) > _LISTED else ""
    listed = "\n\n" + "\n".join(lines) + more if lines else ""
    return f"**Sections kept**{note}: {len(kept)} of {len(decisions)}{listed}"


def _generation(name: str, output: StageOutput, what: Callable[[DraftRecord], str]) -> str | None:
    rec = next((r for r in output.records if isinstance(r, DraftRecord)), None)
    if output.status == "skipped" or rec is None:
        return None
    return _failed(name, output) or f"**{name}**: {what(rec)}"


def draft(output: StageOutput) -> str | None:
    return _generation("Draft", output, lambda r: f"{r.n_words or word_count(r.text or '')} words from "
                                                  f"{len(r.source_urls)} source{'s' if len(r.source_urls) != 1 else ''}.")


def refine(output: StageOutput) -> str | None:
    return _generation("Refined", output, lambda r: f"{r.n_words or word_count(r.text or '')} words.")


def citations(output: StageOutput) -> str | None:
    checked = [r for r in output.records if isinstance(r, CitationRecord)]
    if output.status == "skipped" or not checked:
        return None
    cited = sum(1 for r in checked if r.cited)
    note = "" if output.status == "ok" else f" (the check failed: {md(output.status)})"
    return f"**Citations checked**{note}: {cited} of {len(checked)} sources support the answer."


def sufficiency(output: StageOutput) -> str | None:
    """What the check found: every part covered, or what is missing (a follow-up round names its number)."""
    rec = next((r for r in output.records if isinstance(r, SufficiencyRecord)), None)
    if rec is None or rec.verdict is None:
        return _failed("Sources checked", output)
    after = f" after round {output.round}" if output.round else ""
    if rec.verdict == "sufficient":
        return f"**Sources checked**{after}: they cover every part of the question ({rec.sections} sections)."
    missing = "; ".join(md(m) for m in rec.missing[:_LISTED]) or "(not said)"
    what = "part of the question" if rec.verdict == "partial" else "none of the question"
    return f"**Sources checked**{after}: they cover {what}. Missing: {missing}."


def followup(output: StageOutput) -> str | None:
    """The pipeline looks again: why (what was missing) and what it searches for."""
    queries = list(output.value or [])
    if not queries:
        return f"**Looking again** (round {output.round}): nothing new to search for; the answer is written now."
    listed = "\n".join(f"{n}. {md(q)}" for n, q in enumerate(queries, 1))
    return f"**Looking again** (round {output.round}): searching for what the sources did not cover\n\n{listed}"
