"""PDF documents into the same heading-scoped Markdown sections as HTML pages.

The text layer is read with pypdfium2 (PDFium, the PDF engine of Chromium: a C library that is
fast, copes with the damaged files the web is full of, and is fuzzed continuously upstream; the
wheel ships the binary, so it installs from PyPI with nothing to build). pypdf, the pure-Python
alternative, read the text of our generated PDFs about 4x slower (``bench/bench_pdf.py``).

* **Headings** are lines set larger than the body text (the size that covers most characters):
  each larger size is a heading level, largest first, up to h4. A document with no such line gets
  one section per page instead, headed "Page N". Either way a heading's anchor is ``page=N``,
  the PDF open parameter browsers understand (``url#page=N``).
* **Paragraphs**: lines are joined until a wider gap than the line spacing; a word hyphenated at a
  line end is joined again. Running headers and footers (page numbers, a title repeated on most
  pages) are dropped.
* **Bounded**: at most ``sectioning.pdf_max_pages`` pages and ``sectioning.pdf_max_seconds`` per
  document (checked between pages; PDFium reads one page in milliseconds). What was read by then
  is kept, under status ``truncated``.
* **Statuses**: ``no_text_layer`` for a document with pages but no text (a scan: there is no OCR
  here), ``encrypted`` for one that needs a password, ``parse_error`` for bytes PDFium cannot open.

PDFium is not thread-safe, not even across documents, so every call runs under one process-wide
lock and every PDFium object is closed inside it (a finalizer running later on another thread
would call PDFium outside the lock).
"""

from __future__ import annotations

import ctypes
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from hifirag_core.config import SectioningConfig
from hifirag_core.sectioning.markdown import Event, Heading
from hifirag_core.sectioning.outline import build_sections
from hifirag_core.sectioning.section_types import ParsedPage
from hifirag_core.text import normalize_ws

_PDFIUM_LOCK = threading.Lock()

HEADING_MIN_RATIO = 1.15  # a heading is set at least this much larger than the body text
HEADING_MAX_CHARS = 150
HEADING_MAX_WORDS = 20
PARAGRAPH_GAP = 1.6  # a baseline gap wider than this many font sizes starts a paragraph
RUNNING_MIN_PAGES = 3  # a line repeated at a page edge on most of at least this many pages is a header/footer
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?(?:\d+|[ivxlcdm]+)(?:\s*(?:/|of)\s*\d+)?$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_LINE = re.compile(r"[^\r\n]+")
_SOFT_HYPHENS = ("\ufffe", "\x02", "\u00ad")


@dataclass(frozen=True)
class Line:
    page: int  # 1-based
    text: str
    size: float | None  # the effective font size of its first character, in points
    baseline: float | None  # y of its first character's origin (PDF space: up is larger)


@dataclass(frozen=True)
class PdfText:
    lines: list[Line]
    pages: int  # pages in the document
    read: int  # pages read
    title: str | None
    stopped: str | None  # why reading stopped early


def _line_metrics(textpage: pdfium.PdfTextPage, index: int) -> tuple[float, float]:
    """Effective font size (Tf size x text matrix scale) and baseline y of one character."""
    size = pdfium_c.FPDFText_GetFontSize(textpage, index)
    matrix = pdfium_c.FS_MATRIX()
    scale = 1.0
    if pdfium_c.FPDFText_GetMatrix(textpage, index, ctypes.byref(matrix)):
        scale = abs(matrix.a * matrix.d - matrix.b * matrix.c) ** 0.5 or 1.0
    x, y = ctypes.c_double(), ctypes.c_double()
    pdfium_c.FPDFText_GetCharOrigin(textpage, index, ctypes.byref(x), ctypes.byref(y))
    return round(size * scale * 2) / 2, y.value


def _page_lines(textpage: pdfium.PdfTextPage, page_no: int) -> list[Line]:
    count = textpage.count_chars()
    if count <= 0:
        return []
    text = textpage.get_text_range()
    # characters outside the BMP take two UTF-16 units: offsets no longer match, sizes are skipped
    aligned = len(text) == count
    lines: list[Line] = []
    for match in _LINE.finditer(text):
        raw_line = match.group()
        # PDFium marks a hyphen it joined across a line break with U+FFFE and keeps both halves
        stripped = raw_line.strip().replace("\ufffe", "")
        if not stripped:
            continue
        size = baseline = None
        if aligned:
            size, baseline = _line_metrics(textpage, match.start() + len(raw_line) - len(raw_line.lstrip()))
        lines.append(Line(page_no, stripped, size, baseline))
    return lines


def read_pdf_text(data: bytes, *, max_pages: int, max_seconds: float,
                  clock: Callable[[], float] = time.monotonic) -> PdfText:
    """The text lines of a PDF with their sizes, within the page and time bounds (raises PdfiumError)."""
    with _PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data)
        try:
            title = normalize_ws(pdf.get_metadata_dict().get("Title") or "") or None
            total = len(pdf)
            lines: list[Line] = []
            deadline = clock() + max_seconds
            stopped, read = None, 0
            for index in range(total):
                if index >= max_pages:
                    stopped = f"read the first {max_pages} of {total} pages (sectioning.pdf_max_pages)"
                    break
                if clock() > deadline:
                    stopped = f"read {index} of {total} pages in {max_seconds:g} s (sectioning.pdf_max_seconds)"
                    break
                page = pdf[index]
                textpage = page.get_textpage()
                try:
                    lines.extend(_page_lines(textpage, index + 1))
                finally:
                    textpage.close()
                    page.close()
                read = index + 1
        finally:
            pdf.close()
    return PdfText(lines, total, read, title, stopped)


def _running_lines(lines: list[Line], pages: int, body: float | None) -> set[str]:
    """Texts (digits masked) at the top or bottom of most pages, set no larger than the body text:
    running headers and footers (a chapter heading that opens every page is larger, and stays)."""
    if pages < RUNNING_MIN_PAGES:
        return set()
    by_page: dict[int, list[Line]] = {}
    for line in lines:
        by_page.setdefault(line.page, []).append(line)
    edges: Counter[str] = Counter()
    for page_lines in by_page.values():
        keys = {_DIGITS.sub("#", ln.text.lower()) for ln in (*page_lines[:2], *page_lines[-2:])
                if body is None or ln.size is None or ln.size <= body}
        edges.update(keys)
    return {key for key, n in edges.items() if n >= max(RUNNING_MIN_PAGES, 0.6 * len(by_page))}


def _body_size(lines: list[Line]) -> float | None:
    weights: Counter[float] = Counter()
    for line in lines:
        if line.size is not None:
            weights[line.size] += len(line.text)
    return weights.most_common(1)[0][0] if weights else None


def _is_heading(line: Line, body: float | None) -> bool:
    if body is None or line.size is None or line.size < max(body * HEADING_MIN_RATIO, body + 1):
        return False
    text = line.text
    return (len(text) <= HEADING_MAX_CHARS and len(text.split()) <= HEADING_MAX_WORDS
            and any(c.isalpha() for c in text))


def _join(prev: str, line: str) -> str:
    """Two wrapped lines of one paragraph: a word hyphenated at the line end is joined again."""
    if prev.endswith(_SOFT_HYPHENS):
        return prev.rstrip("".join(_SOFT_HYPHENS)) + line
    if prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha() and line[:1].islower():
        return prev[:-1] + line
    return f"{prev} {line}"


def pdf_events(lines: list[Line], pages: int) -> list[Event]:
    """Headings and paragraphs; with no heading in the document, each page is a section."""
    running = _running_lines(lines, pages, _body_size(lines))
    lines = [ln for ln in lines if not _PAGE_NUMBER.match(ln.text)
             and _DIGITS.sub("#", ln.text.lower()) not in running]
    body = _body_size(lines)
    sizes = sorted({ln.size for ln in lines if _is_heading(ln, body) and ln.size is not None}, reverse=True)
    level_of = {size: min(i + 1, 4) for i, size in enumerate(sizes)}
    by_page = not sizes
    events: list[Event] = []
    paragraph: str | None = None
    prev: Line | None = None

    def close() -> None:
        nonlocal paragraph
        if paragraph:
            events.append(paragraph)
        paragraph = None

    for line in lines:
        new_page = prev is None or line.page != prev.page
        if by_page and new_page:
            close()
            events.append(Heading(1, f"Page {line.page}", f"page={line.page}", kind="page"))
        if not by_page and _is_heading(line, body) and line.size is not None:
            close()
            last = events[-1] if events else None
            # a heading wrapped over two lines continues the one just before it
            if isinstance(last, Heading) and prev is not None and prev.size == line.size and not new_page:
                events[-1] = Heading(last.level, f"{last.text} {line.text}", last.anchor)
            else:
                events.append(Heading(level_of[line.size], line.text, f"page={line.page}"))
        else:
            gap = (prev.baseline - line.baseline) if prev is not None and not new_page and \
                prev.baseline is not None and line.baseline is not None else None
            size = max(line.size or 0, (prev.size if prev else 0) or 0)
            if paragraph is None or new_page or (gap is not None and size and not 0 < gap <= PARAGRAPH_GAP * size):
                close()
                paragraph = line.text
            else:
                paragraph = _join(paragraph, line.text)
        prev = line
    close()
    return events


def parse_pdf_sections(data: bytes, url: str, *, config: SectioningConfig,
                       clock: Callable[[], float] = time.monotonic) -> ParsedPage:
    """Sections of one PDF in order, as ``parse_sections`` gives them for a page; never raises."""
    try:
        text = read_pdf_text(data, max_pages=config.pdf_max_pages, max_seconds=config.pdf_max_seconds, clock=clock)
    except pdfium.PdfiumError as exc:
        message = str(exc)
        status = "encrypted" if "password" in message.lower() else "parse_error"
        return ParsedPage(url, None, (), status, f"PDFium: {message}")
    if not text.lines:
        if text.stopped:
            return ParsedPage(url, text.title, (), "truncated", f"no text before the limit: {text.stopped}")
        return ParsedPage(url, text.title, (), "no_text_layer",
                          f"{text.pages} page(s) and no text layer (a scan? there is no OCR here)")
    events = pdf_events(text.lines, text.read)
    sections = build_sections(events, url, max_chars=config.max_section_chars, min_chars=config.min_section_chars)
    title = text.title or next((e.text for e in events if isinstance(e, Heading) and e.kind != "page"), None)
    if not sections:
        return ParsedPage(url, title, (), "no_text", "only page numbers and running headers")
    if text.stopped:
        return ParsedPage(url, title, tuple(sections), "truncated", text.stopped)
    return ParsedPage(url, title, tuple(sections), "ok")
