"""What sectioning returns: a page with its status and its ordered, heading-scoped sections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParsedSection:
    section_id: str  # stable: url + heading path + occurrence of that path in the page
    ord: int  # 0-based order in the page
    heading_path: tuple[str, ...]  # ("Title h1", "h2 text", ...) up to h4
    heading: str  # the last element of heading_path ("" for text before any heading)
    level: int  # 1-4 (0 for a preamble with no heading)
    anchor: str | None  # the id/name anchor of the heading where the page has one
    text: str  # Markdown: paragraphs, lists, tables, fenced code, links as text
    n_chars: int
    n_words: int


@dataclass(frozen=True)
class ParsedPage:
    url: str
    title: str | None
    sections: tuple[ParsedSection, ...]
    # "ok", "empty", "binary", "too_large", "too_deep", "no_text", "parse_error"; PDFs also
    # "no_text_layer", "encrypted", and "truncated" (sections hold what was read within the bounds)
    status: str
    error: str | None = None
    encoding: str | None = None  # the charset the bytes were read with

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def markdown(self) -> str:
        """The sections as one Markdown text, each under its ``#`` heading (how the local corpus stores a page)."""
        return "\n\n".join((("#" * max(s.level, 1) + " " + s.heading + "\n\n") if s.heading else "") + s.text
                             for s in self.sections)
