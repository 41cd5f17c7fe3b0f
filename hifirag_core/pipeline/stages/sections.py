"""Sections: each fetched page cut into heading-scoped Markdown sections (HTML, PDF, plain text, Reddit threads)."""


from __future__ import annotations

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.overlap import EarlyKey
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.threads import carried_sections
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    PageRecord,
    Record,
    SectionRecord,
)
from hifirag_core.sectioning import parse_sections
from hifirag_core.sectioning.decoding import declared_charset
from hifirag_core.sectioning.pdf import parse_pdf_sections
from hifirag_core.sectioning.plain import parse_text_sections
from hifirag_core.web.reddit import (
    select_tree,
    thread_from_json,
    thread_sections,
)


def split_sections(question: Question, pages: StageOutput, rt: Runtime,
                   carried: tuple[SectionRecord, ...] = ()) -> StageOutput:
    """Each fetched page's sections; a page carried from the answer a follow-up turn follows brings the sections
    that turn kept (``carried``), for section ranking to judge again."""
    records: list[Record] = []
    for page in pages.records:
        assert isinstance(page, PageRecord)
        if not page.ok or page.content_sha256 is None:
            continue
        kept_before = carried_sections(page, carried)
        if kept_before is not None:
            records.extend(kept_before)
            continue
        early = rt.early.take(EarlyKey.sections(question, page))
        records.extend(early if early is not None else page_sections(page, rt))
    return StageOutput(records=records)


def page_sections(page: PageRecord, rt: Runtime) -> list[SectionRecord]:
    """One fetched page's sections (with a status row when it has none, or only the part read)."""
    if not page.ok or page.content_sha256 is None:
        return []
    body = rt.blobs.get(page.content_sha256)
    if page.kind == "reddit":  # a discussion: the submission, then each top comment with its replies
        parsed = thread_sections(select_tree(thread_from_json(body), rt.cfg.reddit), rt.cfg.reddit)
    elif page.kind == "pdf":
        parsed = parse_pdf_sections(body, page.final_url or page.url, config=rt.cfg.sectioning)
    elif page.kind == "text":  # a document a search provider sent as plain text
        parsed = parse_text_sections(body.decode("utf-8", "replace"), page.url, title=page.title,
                                     config=rt.cfg.sectioning)
    else:
        parsed = parse_sections(body, page.final_url or page.url, encoding=declared_charset(page.content_type),
                                config=rt.cfg.sectioning)
    records = [SectionRecord(url=page.url, section_id=s.section_id, ord=s.ord, heading_path=list(s.heading_path),
                             heading=s.heading, level=s.level, anchor=s.anchor, text=s.text, n_chars=s.n_chars,
                             n_words=s.n_words)
               for s in parsed.sections]
    if parsed.status != OK:  # no sections, or (a PDF cut at its bounds, "truncated") the part read
        records.append(SectionRecord(url=page.url, section_id="", status=parsed.status, error=parsed.error))
    return records
