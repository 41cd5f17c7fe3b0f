"""HTML pages into heading-scoped Markdown sections (the paper's h1-h4 tree), boilerplate out.

``parse_sections`` never raises on page content: a page it cannot read comes back with a status
(``empty``, ``binary``, ``too_large``, ``too_deep``, ``no_text``, ``parse_error``) and no sections.
Text a reader cannot see is dropped: ``hidden`` and ``aria-hidden`` elements, inline styles that
hide (``styles.py``) and what the page's ``<style>`` sheets hide (``stylesheets.py``). PDFs go through ``pdf.parse_pdf_sections`` into the same shape.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser

from hifirag_core.config import SectioningConfig
from hifirag_core.sectioning.boilerplate import content_root, prune_edges, remove_boilerplate, remove_residue
from hifirag_core.sectioning.decoding import decode_html
from hifirag_core.sectioning.guards import nesting_work
from hifirag_core.sectioning.markdown import bold_lines, walk
from hifirag_core.sectioning.outline import build_sections
from hifirag_core.sectioning.section_types import ParsedPage, ParsedSection
from hifirag_core.sectioning.stylesheets import remove_hidden_by_style_sheets
from hifirag_core.sectioning.tree import format_section_tree
from hifirag_core.text import normalize_ws

__all__ = ["SECTIONER_VERSION", "ParsedPage", "ParsedSection", "format_section_tree", "parse_sections"]

# Bump when a change alters the sections of some page: the sections stage's cache key and the local
# corpus's index both carry it, so stale sections are never reused.
SECTIONER_VERSION = "4"  # 4: what style sheets hide is dropped


def _title(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("title")
    if node is None:
        return None
    return normalize_ws(node.text()) or None


_STYLE_TAG = re.compile(rb"<style", re.IGNORECASE)
_STYLE_TAG_TEXT = re.compile(r"<style", re.IGNORECASE)


def _has_style(source: bytes | str) -> bool:
    """Whether the page can hold a ``<style>`` element (most pages have none: no walk of the tree)."""
    return (_STYLE_TAG.search(source) if isinstance(source, bytes) else _STYLE_TAG_TEXT.search(source)) is not None


DEFAULT_CONFIG = SectioningConfig()  # frozen, so one shared default is safe


def parse_sections(html: bytes, url: str, *, encoding: str | None = None,
                   config: SectioningConfig = DEFAULT_CONFIG) -> ParsedPage:
    """Sections of one page in order: heading path, anchor, Markdown text, counts and a stable id."""
    data = html.encode("utf-8") if isinstance(html, str) else bytes(html)
    if len(data) > config.max_html_bytes:
        return ParsedPage(url, None, (), "too_large",
                          f"{len(data)} bytes is over sectioning.max_html_bytes={config.max_html_bytes}")
    work = nesting_work(data, config.max_nesting_work)
    if work > config.max_nesting_work:
        return ParsedPage(url, None, (), "too_deep",
                          f"nesting too deep to parse in bounded time (work estimate over "
                          f"sectioning.max_nesting_work={config.max_nesting_work})")
    decoded = decode_html(data, encoding if not isinstance(html, str) else "utf-8")
    if decoded.status != "ok" or decoded.text is None:
        return ParsedPage(url, None, (), decoded.status, decoded.error, decoded.encoding)
    try:
        # lexbor reads bytes as UTF-8: hand it the original bytes when that is what they are
        source = data if decoded.encoding == "utf-8" else decoded.text
        tree = LexborHTMLParser(source)
        title = _title(tree)
        if _has_style(source):
            remove_hidden_by_style_sheets(tree)  # first: the sheets go with the other invisible elements
        scan = remove_boilerplate(tree)
        root = content_root(tree, scan)
        if root is None:
            return ParsedPage(url, title, (), "no_text", "the page has no body", decoded.encoding)
        remove_residue(scan, root)
        prune_edges(root)
        pseudo = scan.pseudo
        # bold lines are headings only on a page that has no heading of any other kind
        bold = bold_lines(root) if not pseudo and root.css_first("h1, h2, h3, h4") is None else {}
        events = walk(root, pseudo, bold)
        sections = build_sections(events, url, max_chars=config.max_section_chars,
                                  min_chars=config.min_section_chars)
    except Exception as exc:  # a parser or renderer failure on one page must not end a batch run
        return ParsedPage(url, None, (), "parse_error", f"{type(exc).__name__}: {exc}", decoded.encoding)
    if not sections:
        return ParsedPage(url, title, (), "no_text", "no text outside the page's boilerplate", decoded.encoding)
    if title is None:
        title = next((s.heading for s in sections if s.heading), None)
    return ParsedPage(url, title, tuple(sections), "ok", None, decoded.encoding)
