"""Sections of a plain-text document (no markup, no headings), such as the ones a search provider sends
with its results (MMU-RAGent's FineWeb and ClueWeb22).

The text is split into paragraphs at blank lines (a text with no blank line at all: at each line break);
lines inside a paragraph are joined with spaces. The paragraphs sit under one heading, the document's
title (for a document without one, its first line, cut to 80 characters; a first paragraph that is the
title is not repeated as text), and become sections the same way an HTML page's run of paragraphs under a
heading does: consecutive paragraphs packed into sections of at most ``sectioning.max_section_chars``,
split only between paragraphs (a longer paragraph is cut as an HTML one is, ``outline.split_block``). Section ids are stable: the URL, the heading and the part's occurrence.
"""

from __future__ import annotations

import re

from hifirag_core.config import SectioningConfig
from hifirag_core.sectioning.markdown import Event, Heading
from hifirag_core.sectioning.outline import build_sections
from hifirag_core.sectioning.section_types import ParsedPage

_BLANK_LINES = re.compile(r"\n[ \t]*\n+")
DEFAULT_CONFIG = SectioningConfig()
TITLE_CHARS = 80


def paragraphs(text: str) -> list[str]:
    """The text's paragraphs: split at blank lines, else (no blank line anywhere) at line breaks."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    blocks = _BLANK_LINES.split(text) if _BLANK_LINES.search(text) else text.split("\n")
    return [" ".join(line.strip() for line in b.split("\n") if line.strip()) for b in blocks if b.strip()]


def parse_text_sections(text: str, url: str, *, title: str | None = None,
                        config: SectioningConfig = DEFAULT_CONFIG) -> ParsedPage:
    """The sections of a plain-text document (see the module docstring)."""
    paras = paragraphs(text)
    if not paras:
        return ParsedPage(url, title, (), "no_text", "the document has no text", "utf-8")
    heading = (title or "").strip() or paras[0][:TITLE_CHARS]
    if paras[0] == heading and len(paras) > 1:  # the first line is the title: not text again
        paras = paras[1:]
    events: list[Event] = [Heading(1, heading, None, "title"), *paras]
    sections = build_sections(events, url, max_chars=config.max_section_chars, min_chars=config.min_section_chars)
    if not sections:
        return ParsedPage(url, heading, (), "no_text", "the document has no text", "utf-8")
    return ParsedPage(url, heading, tuple(sections), "ok", None, "utf-8")
