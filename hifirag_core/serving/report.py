"""What a served question shows: a Markdown step per finished stage, and the report from its answers row.

``render_report`` is the one place an answer becomes what a client reads, for ``/run`` and
``/evaluate`` alike, from the answers row the citation stage's per-sentence records built: the
report is the text with ``[k]`` after each cited sentence and the numbered sources under it, and
its ``citations`` are the same URLs in the same order (the organisers' front end numbers
``citations`` from 1, so ``[k]`` in the report is ``citations[k - 1]``). ``/evaluate`` answers with
the plain text, as ``export-mmu`` does, because the static evaluation scores it against references
without citations. Whatever else the answer stage writes into the row is shown as written: an
answer that abstains (the sources found do not answer) names the closest sources under "See also"
in its own text and cites nothing. A question without an answer has no report.
Steps name counts, titles and URLs, and never an error message (an adapter's error can hold a URL
with a key in it): a failed stage shows its status word only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hifirag_core.records import (
    AnswerRecord,
    CitationRecord,
    DraftRecord,
    PageRecord,
    QueryPlanRecord,
    SearchResultRecord,
    SectionDecisionRecord,
    SectionRecord,
    UrlDecisionRecord,
)
from hifirag_core.stages import StageOutput, final_text, kept_urls
from hifirag_core.text import normalize_ws, word_count

# A report answers, abstains (the sources do not answer), is the last draft (the deadline came
# first), or does not exist.
ANSWERED, ABSTAINED, DRAFT, NO_REPORT = "answered", "abstained", "draft", "none"
_LISTED = 8  # URLs or sections listed in one step; the rest are counted
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>])")
_LIST_NUMBER = re.compile(r"\s*\d+[.)]")  # "1." opening a list item ends no sentence


@dataclass(frozen=True)
class Report:
    """The answer as a client gets it."""

    markdown: str | None  # /run's final_report
    citations: list[str] = field(default_factory=list)
    kind: str = NO_REPORT
    text: str | None = None  # the answer without markers or sources (/evaluate's generated_response)


def render_report(answer: AnswerRecord | None) -> Report:
    """The report of a question from its answers row (whatever the answer stage wrote)."""
    if answer is None or not answer.ok or not (answer.text or "").strip():
        return Report(None)
    text = answer.text.strip()
    if answer.abstained:  # its text lists the closest sources; it cites none
        return Report(text, [], ABSTAINED, text)
    urls = list(answer.cited_urls)
    if not urls or not (answer.cited_text or "").strip():
        return Report(text, [], ANSWERED, text)
    sources = "\n".join(f"{k}. <{_safe_url(url)}>" for k, url in enumerate(urls, 1))
    return Report(f"{answer.cited_text.strip()}\n\n**Sources**\n\n{sources}", urls, ANSWERED, text)


def partial_report(outputs: Mapping[str, StageOutput]) -> Report:
    """The best report the stages finished so far allow, for a question whose time ran out.

    The answer row when the answer stage finished; else the latest generation pass, whose
    sources were not checked by the citation stage; else none.
    """
    answer = outputs.get("answer")
    if answer is not None:
        return render_report(next((r for r in answer.records if isinstance(r, AnswerRecord)), None))
    draft = outputs.get("draft")
    if draft is None:
        return Report(None)
    refined = outputs.get("refine") or StageOutput("refine", [])
    text, _ = final_text(draft, refined)
    if not text:
        return Report(None)
    sources = next((r.source_urls for r in draft.records if isinstance(r, DraftRecord)), [])
    return Report(text, list(sources), DRAFT, text)


def answer_pieces(text: str, limit: int = 24) -> list[str]:
    """Growing prefixes of ``text`` ending at sentence or paragraph ends, for streaming the answer.

    Each piece is ``text[:k]``, so a client that shows the latest message never sees the text change
    its beginning; the last piece is the whole text. At most ``limit`` pieces (sentences are grouped).
    """
    ends = [m.end() for m in re.finditer(r"[.!?:][\"'”’)\]]*(?=\s)|\n\n", text)
            if not _LIST_NUMBER.fullmatch(text[text.rfind("\n", 0, m.end()) + 1 : m.end()])]
    ends = sorted({e for e in ends if 0 < e < len(text)} | {len(text)})
    if len(ends) > limit:
        step = len(ends) / limit
        ends = sorted({ends[min(len(ends) - 1, int((i + 1) * step) - 1)] for i in range(limit)} | {len(text)})
    return list(dict.fromkeys(text[:e].rstrip() for e in ends))


# --- one step per stage -------------------------------------------------------------------------------


def stage_step(output: StageOutput, outputs: Mapping[str, StageOutput]) -> str | None:
    """The Markdown a client is shown when ``output``'s stage finishes (None: nothing worth showing).

    ``outputs`` holds the question's stage outputs so far (names, titles and anchors come from them).
    """
    render = _STEPS.get(output.stage)
    return render(output, outputs) if render is not None else None


def md(text: str | None) -> str:
    """Plain text made safe inside Markdown (titles, queries, headings come from the web)."""
    return _MD_SPECIAL.sub(r"\\\1", normalize_ws(text or ""))


def _safe_url(url: str) -> str:
    """A URL that stays one link inside ``<...>``."""
    return url.replace(">", "%3E").replace(" ", "%20")


def _link(title: str | None, url: str) -> str:
    return f"[{md(title) or md(url)}](<{_safe_url(url)}>)"


def _failed(name: str, output: StageOutput) -> str | None:
    return None if output.status == "ok" else f"**{name}**: could not run ({md(output.status)})."


def _query_plan(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str:
    plan = next((r for r in output.records if isinstance(r, QueryPlanRecord)), None)
    queries = list(output.value or (plan.queries if plan else None) or [])
    note = "" if output.status == "ok" else f" (the planner failed: {md(output.status)}; the question as asked)"
    listed = "\n".join(f"{n}. {md(q)}" for n, q in enumerate(queries, 1))
    return f"**Query plan**{note}: {len(queries)} search{'es' if len(queries) != 1 else ''}\n\n{listed}"


def _search(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str | None:
    if output.status == "skipped":
        return "**Search**: off; the answer comes from the writer's own knowledge."
    hits = [r for r in output.records if isinstance(r, SearchResultRecord) and r.ok and r.url]
    queries = {r.query_index for r in output.records if isinstance(r, SearchResultRecord)}
    return _failed("Search", output) or (
        f"**Search**: {len(hits)} results for {len(queries)} quer{'ies' if len(queries) != 1 else 'y'}.")


def _url_filter(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str:
    found = [r for r in output.records if isinstance(r, UrlDecisionRecord)]
    kept = kept_urls(output)
    if not found:
        return "**URLs kept**: none; the search found nothing to read."
    note = "" if output.status == "ok" else f" (the filter failed: {md(output.status)}; the search's top results)"
    listed = "\n".join(f"{r.order}. {_link(r.title, r.url)}" for r in kept[:_LISTED])
    more = f"\n\n(and {len(kept) - _LISTED} more)" if len(kept) > _LISTED else ""
    return f"**URLs kept**{note}: {len(kept)} of {len(found)} found\n\n{listed}{more}"


def _fetch(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str:
    pages = [r for r in output.records if isinstance(r, PageRecord)]
    ok = sum(1 for p in pages if p.ok)
    failed = sorted({p.status for p in pages if not p.ok})
    why = f" ({', '.join(md(s) for s in failed)})" if failed else ""
    return f"**Pages read**: {ok} of {len(pages)}{why}."


def _sections(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str:
    secs = [r for r in output.records if isinstance(r, SectionRecord) and r.ok]
    pages = {s.url for s in secs}
    return f"**Sections**: {len(secs)} parsed from {len(pages)} page{'s' if len(pages) != 1 else ''}."


def _section_rank(output: StageOutput, outputs: Mapping[str, StageOutput]) -> str:
    decisions = [r for r in output.records if isinstance(r, SectionDecisionRecord)]
    kept = sorted((d for d in decisions if d.kept), key=lambda d: (d.source_order, d.rank or 0))
    parsed = outputs.get("sections")
    by_id = {s.section_id: s for s in (parsed.records if parsed else []) if isinstance(s, SectionRecord)}
    fetched = outputs.get("fetch")
    titles = {p.url: p.title for p in (fetched.records if fetched else []) if isinstance(p, PageRecord)}
    note = "" if output.status == "ok" else f" (the ranking failed: {md(output.status)}; each page's first sections)"
    lines = []
    for d in kept[:_LISTED]:
        sec = by_id.get(d.section_id)
        path = " › ".join(sec.heading_path) if sec and sec.heading_path else d.heading
        anchor = f"#{sec.anchor}" if sec and sec.anchor else ""
        lines.append(f"- {_link(path or titles.get(d.url), d.url + anchor)}")
    more = f"\n\n(and {len(kept) - _LISTED} more)" if len(kept) > _LISTED else ""
    listed = "\n\n" + "\n".join(lines) + more if lines else ""
    return f"**Sections kept**{note}: {len(kept)} of {len(decisions)}{listed}"


def _generation(name: str, what: Callable[[DraftRecord], str]) -> Callable[[StageOutput, Mapping], str | None]:
    def step(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str | None:
        rec = next((r for r in output.records if isinstance(r, DraftRecord)), None)
        if output.status == "skipped" or rec is None:
            return None
        return _failed(name, output) or f"**{name}**: {what(rec)}"

    return step


def _citations(output: StageOutput, _outputs: Mapping[str, StageOutput]) -> str | None:
    checked = [r for r in output.records if isinstance(r, CitationRecord)]
    if output.status == "skipped" or not checked:
        return None
    cited = sum(1 for r in checked if r.cited)
    note = "" if output.status == "ok" else f" (the check failed: {md(output.status)})"
    return f"**Citations checked**{note}: {cited} of {len(checked)} sources support the answer."


_STEPS: dict[str, Callable[[StageOutput, Mapping[str, StageOutput]], str | None]] = {
    "query_plan": _query_plan,
    "search": _search,
    "url_filter": _url_filter,
    "fetch": _fetch,
    "sections": _sections,
    "section_rank": _section_rank,
    "draft": _generation("Draft", lambda r: f"{r.n_words or word_count(r.text or '')} words from "
                                            f"{len(r.source_urls)} source{'s' if len(r.source_urls) != 1 else ''}."),
    "refine": _generation("Refined", lambda r: f"{r.n_words or word_count(r.text or '')} words."),
    "citations": _citations,
}
