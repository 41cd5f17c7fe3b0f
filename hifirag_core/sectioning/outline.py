"""Headings and blocks into sections: levels made relative to the page, paths, splits, stable ids."""

from __future__ import annotations

from dataclasses import dataclass, field

from hifirag_core.hashing import text_hash
from hifirag_core.sectioning import rules
from hifirag_core.sectioning.markdown import Event, Heading
from hifirag_core.sectioning.section_types import ParsedSection
from hifirag_core.text import split_sentences, word_count


@dataclass
class _Draft:
    path: tuple[str, ...]
    level: int
    anchor: str | None
    blocks: list[str] = field(default_factory=list)


def normalize_levels(events: list[Event]) -> list[Event]:
    """Shift heading levels so the page's top heading is level 1 (2 under a page-title block).

    A page whose outline starts at h2 (DocBook) reads the same as one that starts at h1; headings
    that end up deeper than h4 become bold lines in their h4 section.
    """
    headings = [e for e in events if isinstance(e, Heading)]
    if not headings:
        return events
    real = [h.level for h in headings if h.kind != "title"]
    title_first = headings[0].kind == "title"
    top = min(real) if real else 1
    shift = top - (2 if title_first else 1)
    out: list[Event] = []
    for e in events:
        if not isinstance(e, Heading):
            out.append(e)
            continue
        level = 1 if e.kind == "title" and title_first else max(1, e.level - shift)
        if e.kind == "title" and not title_first:
            level = max(1, top - shift)
        if level > rules.MAX_LEVEL:
            out.append(f"**{e.text}**")
        else:
            out.append(Heading(level, e.text, e.anchor, e.kind))
    return out


def _drafts(events: list[Event]) -> list[_Draft]:
    drafts = [_Draft((), 0, None)]
    stack: list[tuple[int, str]] = []
    for e in events:
        if isinstance(e, Heading):
            while stack and stack[-1][0] >= e.level:
                stack.pop()
            stack.append((e.level, e.text))
            drafts.append(_Draft(tuple(t for _, t in stack), e.level, e.anchor))
        else:
            drafts[-1].blocks.append(e)
    return drafts


def _hard_cut(text: str, limit: int) -> list[str]:
    out: list[str] = []
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        if cut <= limit // 2:
            cut = limit
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


def _pack(units: list[str], limit: int, sep: str, prefix: str = "", suffix: str = "") -> list[str]:
    """Greedy packing of units into pieces of at most ``limit`` characters (with wrapper)."""
    budget = max(1, limit - len(prefix) - len(suffix))
    pieces: list[str] = []
    cur: list[str] = []
    size = 0
    for unit in units:
        parts = [unit] if len(unit) <= budget else _hard_cut(unit, budget)
        for part in parts:
            if cur and size + len(sep) + len(part) > budget:
                pieces.append(prefix + sep.join(cur) + suffix)
                cur, size = [], 0
            cur.append(part)
            size += len(part) + (len(sep) if len(cur) > 1 else 0)
    if cur:
        pieces.append(prefix + sep.join(cur) + suffix)
    return pieces


def split_block(block: str, limit: int) -> list[str]:
    """One oversized block cut at line, row or sentence boundaries; fences and table heads repeated."""
    lines = block.split("\n")
    first = lines[0]
    if first.startswith("```") and len(lines) >= 2 and lines[-1].startswith("```"):
        return _pack(lines[1:-1], limit, "\n", first + "\n", "\n" + lines[-1])
    if first.startswith("|") and len(lines) > 2 and lines[1].startswith("|---"):
        return _pack(lines[2:], limit, "\n", first + "\n" + lines[1] + "\n")
    if len(lines) > 1:
        return _pack(lines, limit, "\n")
    return _pack(split_sentences(block) or [block], limit, " ")


def _split(blocks: list[str], limit: int) -> list[list[str]]:
    parts: list[list[str]] = []
    cur: list[str] = []
    size = 0
    for block in blocks:
        pieces = [block] if len(block) <= limit else split_block(block, limit)
        for piece in pieces:
            if cur and size + 2 + len(piece) > limit:
                parts.append(cur)
                cur, size = [], 0
            cur.append(piece)
            size += len(piece) + (2 if len(cur) > 1 else 0)
    if cur or not parts:
        parts.append(cur)
    return parts


def split_text(text: str, limit: int) -> list[str]:
    """A Markdown text cut into pieces of at most ``limit`` characters at block boundaries."""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    return ["\n\n".join(part) for part in _split(blocks, limit)] if blocks else [""]


def build_sections(events: list[Event], url: str, *, max_chars: int, min_chars: int) -> list[ParsedSection]:
    """Sections in page order; a heading with no text and no subsections is kept, so none is lost."""
    drafts = _drafts(normalize_levels(events))
    has_children = [False] * len(drafts)
    for i, d in enumerate(drafts):
        if i + 1 < len(drafts):
            nxt = drafts[i + 1]
            has_children[i] = bool(d.path) and len(nxt.path) > len(d.path) and nxt.path[: len(d.path)] == d.path
    sections: list[ParsedSection] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, d in enumerate(drafts):
        text_len = sum(len(b) for b in d.blocks)
        keep_empty = bool(d.path) and not has_children[i]
        if text_len < min_chars and not keep_empty:
            continue
        for part in _split(d.blocks, max_chars):
            text = "\n\n".join(part).strip()
            if len(text) < min_chars and not keep_empty:
                continue
            occurrence = seen.get(d.path, 0)
            seen[d.path] = occurrence + 1
            sections.append(
                ParsedSection(
                    section_id=text_hash("\x1f".join([url, *d.path, str(occurrence)])),
                    ord=len(sections),
                    heading_path=d.path,
                    heading=d.path[-1] if d.path else "",
                    level=d.level,
                    anchor=d.anchor,
                    text=text,
                    n_chars=len(text),
                    n_words=word_count(text),
                )
            )
            keep_empty = False  # one empty row per heading at most
    return sections
