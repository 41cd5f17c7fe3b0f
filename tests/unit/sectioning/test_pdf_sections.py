"""PDFs as sources: headings or page breaks into sections, scans and locked files get a status, bounded time."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest

from hifirag_core.config import SectioningConfig
from hifirag_core.sectioning.pdf import parse_pdf_sections
from tests.support.pdfgen import SCAN, pdf_document, report_pages

URL = "https://reports.example/river-survey.pdf"
CONFIG = SectioningConfig()

GUIDE = [
    [("Field guide to river sampling", 24),
     ("Before you start", 16),
     ("Check the gauge reading and the weather forecast. Sampling after heavy rain measures the", 10),
     ("runoff, not the river, so wait two dry days.", 10),
     None,
     ("Pack bottles, labels, gloves and the cool box the evening before.", 10),
     ("Taking a sample", 16),
     ("Rinse the bottle three times with river water, then fill it against the cur-", 10),
     ("rent at arm's length below the surface.", 10),
     ("Labels", 13),
     ("Write the station, date and time on each label in pencil.", 10),
     ("3", 9)],
    [("After sampling", 16),
     ("Keep the samples cold and deliver them to the laboratory within a day.", 10)],
]


def test_headings_by_font_size_become_the_section_tree() -> None:
    parsed = parse_pdf_sections(pdf_document(GUIDE, title="River sampling guide"), URL, config=CONFIG)
    assert parsed.status == "ok" and parsed.title == "River sampling guide"
    assert [(s.heading_path, s.level, s.anchor) for s in parsed.sections] == [
        (("Field guide to river sampling", "Before you start"), 2, "page=1"),
        (("Field guide to river sampling", "Taking a sample"), 2, "page=1"),
        (("Field guide to river sampling", "Taking a sample", "Labels"), 3, "page=1"),
        (("Field guide to river sampling", "After sampling"), 2, "page=2"),
    ]
    before, taking, labels, after = (s.text for s in parsed.sections)
    # wrapped lines are one paragraph; a wider gap starts the next
    assert before == ("Check the gauge reading and the weather forecast. Sampling after heavy rain measures the "
                      "runoff, not the river, so wait two dry days.\n\n"
                      "Pack bottles, labels, gloves and the cool box the evening before.")
    assert "against the current at arm's length" in taking  # a word hyphenated at a line end, joined
    assert labels == "Write the station, date and time on each label in pencil."
    assert after == "Keep the samples cold and deliver them to the laboratory within a day."  # no page number
    assert all(s.section_id and s.n_words > 0 for s in parsed.sections)


def test_sizes_set_by_the_text_matrix_count_the_same() -> None:
    by_font = parse_pdf_sections(pdf_document(GUIDE), URL, config=CONFIG)
    by_matrix = parse_pdf_sections(pdf_document(GUIDE, matrix_sizes=True), URL, config=CONFIG)
    assert [(s.heading_path, s.text) for s in by_matrix.sections] == [(s.heading_path, s.text) for s in by_font.sections]
    assert by_font.title == "Field guide to river sampling"  # no metadata title: the first heading


def test_a_document_without_headings_gets_a_section_per_page() -> None:
    pages = [[("First page, line one.", 10), ("First page, line two.", 10)], [("Second page text.", 10)]]
    parsed = parse_pdf_sections(pdf_document(pages), URL, config=CONFIG)
    assert parsed.status == "ok" and parsed.title is None
    assert [(s.heading_path, s.anchor, s.text) for s in parsed.sections] == [
        (("Page 1",), "page=1", "First page, line one. First page, line two."),
        (("Page 2",), "page=2", "Second page text."),
    ]


def test_running_headers_and_page_numbers_are_dropped() -> None:
    parsed = parse_pdf_sections(pdf_document(report_pages(4)), URL, config=CONFIG)
    text = "\n".join(s.text for s in parsed.sections)
    assert "Annual report of the river survey  " not in text and "\n4\n" not in text
    assert parsed.sections[0].heading_path[:2] == ("Annual report of the river survey", "Chapter 1: Findings of part 1")
    assert len(parsed.sections) == 4 * 3


def test_long_sections_are_split_like_html_ones() -> None:
    parsed = parse_pdf_sections(pdf_document(report_pages(2)), URL, config=SectioningConfig(max_section_chars=400))
    assert parsed.status == "ok" and all(s.n_chars <= 400 for s in parsed.sections)
    assert len({s.section_id for s in parsed.sections}) == len(parsed.sections)


def test_a_scanned_document_has_no_text_layer() -> None:
    parsed = parse_pdf_sections(pdf_document([SCAN, SCAN, SCAN]), URL, config=CONFIG)
    assert (parsed.status, parsed.sections) == ("no_text_layer", ())
    assert "3 page(s) and no text layer" in parsed.error
    mixed = parse_pdf_sections(pdf_document([SCAN, [("Typed notes on the scan.", 10)]]), URL, config=CONFIG)
    assert mixed.status == "ok" and [s.heading for s in mixed.sections] == ["Page 2"]


@pytest.mark.parametrize(("data", "status"), [
    (pdf_document([[("secret", 10)]], locked=True), "encrypted"),
    (b"%PDF-1.7\nnot really a PDF", "parse_error"),
    (b"", "parse_error"),
])
def test_unreadable_documents_get_a_status(data: bytes, status: str) -> None:
    parsed = parse_pdf_sections(data, URL, config=CONFIG)
    assert (parsed.status, parsed.sections) == (status, ()) and parsed.error.startswith("PDFium")


def test_pages_beyond_the_page_limit_are_not_read() -> None:
    parsed = parse_pdf_sections(pdf_document(report_pages(5)), URL, config=SectioningConfig(pdf_max_pages=2))
    assert parsed.status == "truncated" and "first 2 of 5 pages" in parsed.error
    # (two pages are too few to tell a running header: it stays, as text before the first heading)
    assert {s.anchor for s in parsed.sections} - {None} == {"page=1", "page=2"}


def test_time_per_document_is_bounded() -> None:
    ticks = itertools.count()  # each look at the clock is one second later
    parsed = parse_pdf_sections(pdf_document(report_pages(6)), URL, config=SectioningConfig(pdf_max_seconds=3),
                                clock=lambda: float(next(ticks)))
    assert parsed.status == "truncated" and "read 3 of 6 pages in 3 s" in parsed.error
    assert {s.anchor for s in parsed.sections} == {"page=1", "page=2", "page=3"}


def test_parsing_from_many_threads_at_once_is_safe() -> None:
    docs = [pdf_document(report_pages(n)) for n in (3, 4, 5, 6)] * 3
    alone = [parse_pdf_sections(d, URL, config=CONFIG).sections for d in docs]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda d: parse_pdf_sections(d, URL, config=CONFIG).sections, docs))
    assert together == alone
