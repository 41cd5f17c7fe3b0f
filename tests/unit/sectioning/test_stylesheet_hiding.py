"""Text a page's ``<style>`` sheet hides never reaches a section: one adversarial page per way of hiding,
and a near miss whose sheet hides other elements than the ones a reader sees."""

from __future__ import annotations

import re

import pytest

from hifirag_core.sectioning import parse_sections
from tests.support.adversarial import (
    INJECTION,
    PAGE_URL,
    STYLESHEET_DIR,
    STYLESHEET_TECHNIQUES,
    stylesheet_page,
)

VISIBLE = (
    "Tidewater batches files smaller than 64 kilobytes",
    "resumes from the last completed block",
    "Text files are compressed before they are sent",
)


def _sections(html: bytes) -> list[tuple[tuple[str, ...], str]]:
    parsed = parse_sections(html, PAGE_URL)
    assert parsed.ok, parsed.error
    return [(s.heading_path, s.text) for s in parsed.sections]


def _text(html: bytes) -> str:
    return "\n".join(f"{' > '.join(path)}\n{text}" for path, text in _sections(html))


def test_every_technique_has_one_page_with_one_injected_line() -> None:
    pages = sorted(p.stem for p in STYLESHEET_DIR.glob("*.html"))
    assert pages == sorted([*STYLESHEET_TECHNIQUES, "near-miss"])
    for technique in STYLESHEET_TECHNIQUES:
        html = stylesheet_page(technique).decode()
        assert re.findall(r'data-injection="([\w-]+)"', html) == [technique]
        assert html.count(INJECTION) == 1


@pytest.mark.parametrize("technique", STYLESHEET_TECHNIQUES)
def test_text_a_style_sheet_hides_never_reaches_a_section(technique: str) -> None:
    html = stylesheet_page(technique)
    text = _text(html)
    assert INJECTION not in text and "example.com" not in text
    assert all(v in text for v in VISIBLE)
    # the only difference the hidden line makes: none
    assert _sections(html) == _sections(stylesheet_page(technique, injected=False))
    # the sheet hides it, nothing else: without the <style> element the instruction is read
    assert INJECTION in _text(stylesheet_page(technique, sheet=False))


def test_a_sheet_that_hides_other_elements_keeps_what_a_reader_sees() -> None:
    """Similar class names, an id of another element, print and narrow-screen rules, a hover rule, an
    active tab, and a collapsed block a script showed with an inline style: all of it is read; only
    the paragraph the sheet hides (``.sync-note-old``) is not."""
    html = stylesheet_page("near-miss")
    text = _text(html)
    for visible in ("batches files smaller than 64 kilobytes", "cuts the number of requests",
                    "resumes from the last completed block", "at most four megabytes",
                    "which blocks were sent", "over every transport"):
        assert visible in text
    assert "one at a time" not in text
    # exactly what the page reads as without its sheet, less the one hidden paragraph
    assert _sections(html) == _sections(stylesheet_page("near-miss", injected=False, sheet=False))
