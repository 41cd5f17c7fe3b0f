"""The content root as a stream of headings and Markdown blocks, one handler per tag.

Speed comes from letting lexbor do the per-node work: the text of a paragraph is one C call (a
<br> was turned into a marker text node by ``boilerplate.classify``), so Python walks only the
block structure. Inline code and emphasis stay plain text: wrapping them in Markdown marks cost
more Python per page than all the rest of the rendering, and a section reads the same without.
The walk is iterative (an explicit stack), so 10,000 nested divs cost a list, not the Python
stack; block renderers recurse but flatten to plain text past a depth bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from selectolax.lexbor import LexborNode

from hifirag_core.sectioning import rules

HARD_BREAK = "\x01"  # <br>: a line break inside a paragraph
_BLOCKISH_CSS = "p, div, ul, ol, dl, table, pre, blockquote, section, article, h1, h2, h3, h4, h5, h6"
_NOISE_LANGUAGES = frozenset({"default", "none", "text", "plain", "plaintext", "nohighlight", "notranslate"})


@dataclass(frozen=True)
class Heading:
    level: int  # the tag's level (1-6); outline.py shifts and caps it
    text: str
    anchor: str | None
    kind: str = "h"  # "h" (h1-h6), "pseudo" (class/role), "title" (page-title block), "bold" (bold line), "page" (a PDF page)


Event = Heading | str  # a heading, or a Markdown block


class StructuralHeading(Exception):  # noqa: N818 - a signal, not an error
    """A page-level heading met inside a block (an unclosed list swallowed the page)."""


def clean(text: str) -> str:
    """Collapse whitespace; the <br> marker becomes a newline; ¶ permalinks go."""
    text = " ".join(text.split())  # str.split keeps the \x01 marker: it is not whitespace
    if "¶" in text:
        text = text.replace("¶", "").rstrip()
    if HARD_BREAK in text:
        return "\n".join(line.strip() for line in text.split(HARD_BREAK) if line.strip())
    return text.strip()


def _text(node: LexborNode) -> str:
    return clean(node.text(separator=""))


def _is_block(tag: str) -> bool:
    return tag in rules.BLOCK_TAGS or tag in BLOCK_RENDERERS


def blocks_of(node: LexborNode, depth: int) -> list[str]:
    """The node's children as Markdown blocks: runs of inline content become paragraphs."""
    if depth > rules.MAX_RENDER_DEPTH:
        text = clean(node.text(separator=" "))
        return [text] if text else []
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        if run:
            text = clean("".join(run))
            if text:
                out.append(text)
            run.clear()

    child = node.child
    while child is not None:
        tag = child.tag
        if tag == "-text":
            run.append(child.text_content or "")
        elif not child.is_element_node or tag in rules.SKIP_INLINE_TAGS:
            pass
        elif tag in rules.HEADING_TAGS:
            if tag in rules.STRUCTURAL_HEADINGS:
                raise StructuralHeading(tag)
            close()
            text = _text(child)
            if text:
                out.append(f"**{text}**")
        elif tag in BLOCK_RENDERERS:
            close()
            text = BLOCK_RENDERERS[tag](child, depth + 1)
            if text:
                out.append(text)
        elif tag in rules.BLOCK_TAGS:
            close()
            out.extend(blocks_of(child, depth + 1))
        else:
            run.append(child.text(separator=""))
        child = child.next
    close()
    return out


def _has_block_child(node: LexborNode) -> bool:
    child = node.child
    while child is not None:
        if child.is_element_node and _is_block(child.tag):
            return True
        child = child.next
    return False


def _first_block_child(node: LexborNode) -> LexborNode | None:
    child = node.child
    while child is not None:
        if child.is_element_node and _is_block(child.tag):
            return child
        child = child.next
    return None


def _before(node: LexborNode, stop: LexborNode) -> list[LexborNode]:
    out = []
    child = node.child
    while child is not None and child.mem_id != stop.mem_id:
        out.append(child)
        child = child.next
    return out


def _inline_text(node: LexborNode) -> str:
    if node.tag == "-text":
        return node.text_content or ""
    return node.text(separator="") if node.is_element_node else ""


def render_paragraph(node: LexborNode, depth: int = 0) -> str:
    # the parser closes a <p> at any block start, so a paragraph holds inline content only
    return _text(node)


def _indent(text: str, width: int) -> str:
    pad = " " * width
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def render_list(node: LexborNode, depth: int = 0) -> str:
    """Bullets or numbers, nested lists indented under their item."""
    if depth > rules.MAX_RENDER_DEPTH:
        return clean(node.text(separator=" "))
    ordered = node.tag == "ol"
    start = node.attributes.get("start") if ordered else None
    number = int(start) if start and start.strip().isdigit() else 1
    items: list[str] = []
    child = node.child
    while child is not None:
        tag = child.tag
        if tag == "li":
            blocks = blocks_of(child, depth + 1) if _has_block_child(child) else [_text(child)]
            blocks = [b for b in blocks if b]
            marker = f"{number}." if ordered else "-"
            number += 1
            if blocks:
                width = len(marker) + 1
                first = _indent(blocks[0], width)[width:]
                items.append("\n".join([f"{marker} {first}", *(_indent(b, width) for b in blocks[1:])]))
        elif tag in ("ul", "ol"):
            nested = render_list(child, depth + 1)
            if nested:
                items.append(_indent(nested, 2))
        elif tag == "-text":
            text = clean(child.text_content or "")
            if text:
                items.append(f"- {text}")
        elif tag in rules.STRUCTURAL_HEADINGS:
            raise StructuralHeading(tag)
        elif child.is_element_node and tag not in rules.SKIP_INLINE_TAGS:
            items.extend(f"- {b}" for b in blocks_of(child, depth + 1) if b)
        child = child.next
    return "\n".join(items)


def render_dl(node: LexborNode, depth: int = 0) -> str:
    """Definition lists: the term in bold, its definition as paragraphs below it."""
    if depth > rules.MAX_RENDER_DEPTH:
        return clean(node.text(separator=" "))
    blocks: list[str] = []
    child = node.child
    while child is not None:
        tag = child.tag
        if tag == "dt":
            # plain text: API signatures are full of <em> parameters and literal asterisks
            term = clean(child.text(separator="")).replace("\n", " ")
            if term:
                blocks.append(f"**{term}**")
        elif tag == "dd":
            blocks.extend(blocks_of(child, depth + 1) if _has_block_child(child) else [_text(child)])
        elif tag in rules.STRUCTURAL_HEADINGS:
            raise StructuralHeading(tag)
        elif child.is_element_node:
            blocks.extend(blocks_of(child, depth + 1))
        child = child.next
    return "\n\n".join(b for b in blocks if b)


def _language(node: LexborNode) -> str:
    probe: LexborNode | None = node
    for _ in range(3):
        if probe is None:
            break
        m = rules.LANGUAGE_CLASS.search(probe.attributes.get("class") or "")
        if m and m.group(1).lower() not in _NOISE_LANGUAGES:
            return m.group(1).lower()
        probe = probe.parent
    code = node.child
    if code is not None and code.tag == "code":
        m = rules.LANGUAGE_CLASS.search(code.attributes.get("class") or "")
        if m and m.group(1).lower() not in _NOISE_LANGUAGES:
            return m.group(1).lower()
    return ""


def render_pre(node: LexborNode, depth: int = 0) -> str:
    """A fenced code block, the text as it was laid out."""
    code = node.text(separator="").replace("\r\n", "\n").replace("\xa0", " ")
    lines = [line.rstrip() for line in code.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        return ""
    body = "\n".join(lines)
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{_language(node)}\n{body}\n{fence}"


def render_blockquote(node: LexborNode, depth: int = 0) -> str:
    return "\n>\n".join(
        "\n".join(f"> {line}" if line else ">" for line in b.split("\n")) for b in blocks_of(node, depth + 1)
    )


def _cell_text(cell: LexborNode, depth: int) -> str:
    blocks = blocks_of(cell, depth + 1) if _has_block_child(cell) else [_text(cell)]
    return " ".join(b.replace("\n", " ") for b in blocks if b).replace("|", "\\|")


def _children(node: LexborNode) -> list[LexborNode]:
    out = []
    child = node.child
    while child is not None:
        if child.is_element_node:
            out.append(child)
        child = child.next
    return out


def _rows(table: LexborNode) -> list[list[LexborNode]]:
    """The table's own rows (not those of nested tables), in order."""
    rows: list[list[LexborNode]] = []
    for part in _children(table):
        if part.tag in ("thead", "tbody", "tfoot"):
            rows.extend(cells for tr in _children(part) if tr.tag == "tr" and (cells := _cells(tr)))
        elif part.tag == "tr" and (cells := _cells(part)):
            rows.append(cells)
    return rows


def _cells(tr: LexborNode) -> list[LexborNode]:
    return [c for c in _children(tr) if c.tag in ("td", "th")]


def _span(cell: LexborNode) -> int:
    raw = (cell.attributes.get("colspan") or "1").strip()
    return max(1, min(int(raw), rules.MAX_TABLE_COLUMNS)) if raw.isdigit() else 1


def render_table(node: LexborNode, depth: int = 0) -> str:
    """A Markdown table; one-column tables read better as paragraphs."""
    if depth > rules.MAX_RENDER_DEPTH:
        return clean(node.text(separator=" "))
    head = ""
    first = node.child
    while first is not None and not first.is_element_node:
        first = first.next
    if first is not None and first.tag == "caption":
        cap = clean(first.text(separator=" "))
        head = f"**{cap}**\n\n" if cap else ""
    rows = _rows(node)
    if not rows:
        return head.strip()
    width = min(max(sum(_span(c) for c in cells) for cells in rows), rules.MAX_TABLE_COLUMNS)
    if width <= 1:
        blocks = [b for cells in rows for c in cells for b in blocks_of(c, depth + 1)]
        return (head + "\n\n".join(blocks)).strip()
    grid: list[list[str]] = []
    for cells in rows:
        line: list[str] = []
        for c in cells:
            line.append(_cell_text(c, depth))
            line.extend([""] * (_span(c) - 1))
        grid.append(line[:width] + [""] * (width - len(line)))
    if not any(any(row) for row in grid):
        return head.strip()
    out = ["| " + " | ".join(grid[0]) + " |", "|" + "---|" * width]
    out.extend("| " + " | ".join(row) + " |" for row in grid[1:])
    return head + "\n".join(out)


BLOCK_RENDERERS: dict[str, Callable[[LexborNode, int], str]] = {
    "p": render_paragraph,
    "pre": render_pre,
    "listing": render_pre,
    "xmp": render_pre,
    "plaintext": render_pre,
    "ul": render_list,
    "ol": render_list,
    "menu": render_list,
    "dl": render_dl,
    "table": render_table,
    "blockquote": render_blockquote,
    "address": render_paragraph,
    "figcaption": render_paragraph,
    "caption": render_paragraph,
    "summary": render_paragraph,
}
# lexbor's node.css() matches the node itself too, hence "table table" for a nested table
_LAYOUT_PROBE_CSS = "table h1, table h2, table h3, table h4, table table"


def is_layout_table(node: LexborNode) -> bool:
    """A table that lays out a page (holds headings or tables) is walked like a container."""
    return node.css_first(_LAYOUT_PROBE_CSS) is not None


def heading_text(node: LexborNode) -> str:
    return clean(node.text(separator="")).replace("\n", " ").rstrip(rules.HEADING_TRAILING_MARKS).rstrip()


def _marker_id(node: LexborNode) -> str | None:
    attrs = node.attributes
    return attrs.get("id") or (attrs.get("name") if node.tag == "a" else None)


def _blank(node: LexborNode) -> bool:
    if node.tag == "-text":
        return not (node.text_content or "").strip()
    return not node.is_element_node or not node.text(strip=True)


def heading_anchor(node: LexborNode) -> str | None:
    """The fragment that links to this heading: its id, an anchor in it or just before it, its section's id."""
    own = node.attributes.get("id")
    if own:
        return own
    child = node.child
    while child is not None and _blank(child):  # <h2><a id="x"></a>Title</h2> (DocBook)
        if child.is_element_node and (found := _marker_id(child)):
            return found
        child = child.next
    prev = node.prev
    for _ in range(6):
        if prev is None or not _blank(prev):
            break
        if prev.is_element_node and (found := _marker_id(prev)):
            return found
        prev = prev.prev
    current = node
    for _ in range(4):
        parent = current.parent
        if parent is None or parent.tag in ("body", "html"):
            break
        first = parent.child
        while first is not None and first.mem_id != current.mem_id and _blank(first):
            first = first.next
        if first is None or first.mem_id != current.mem_id:
            break
        if found := parent.attributes.get("id"):
            return found
        current = parent
    return None  # an id inside the heading's text (an index target) points at a word, not the heading


def bold_lines(root: LexborNode) -> dict[int, str]:
    """Blocks that are nothing but one short bold phrase (read as headings on heading-less pages)."""
    found: dict[int, str] = {}
    for node in root.css("p, div"):
        only: LexborNode | None = None
        child = node.child
        ok = True
        while child is not None and ok:
            if child.tag == "-text":
                ok = not (child.text_content or "").strip()
            elif child.is_element_node:
                ok = only is None and child.tag in rules.STRONG_TAGS
                only = child
            child = child.next
        if not ok or only is None:
            continue
        text = clean(only.text(separator=""))
        if text and len(text.split()) <= rules.BOLD_LINE_MAX_WORDS and text[-1] not in ".,;":
            found[node.mem_id] = text
    return found


def walk(root: LexborNode, pseudo: dict[int, tuple[int, str]], bold: dict[int, str]) -> list[Event]:
    """Headings and Markdown blocks of the content root, in document order."""
    events: list[Event] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            text = clean("".join(run))
            if text:
                events.append(text)
            run.clear()

    special = pseudo or bold
    stack: list[LexborNode | None] = [root.child]
    while stack:
        node = stack[-1]
        if node is None:
            stack.pop()
            flush()
            continue
        stack[-1] = node.next
        tag = node.tag
        if tag == "-text":
            run.append(node.text_content or "")
            continue
        if not node.is_element_node or tag in rules.SKIP_INLINE_TAGS:
            continue
        if special:
            key = node.mem_id
            if key in pseudo:
                flush()
                level, kind = pseudo[key]
                text = heading_text(node)
                if text:
                    events.append(Heading(level, text, heading_anchor(node), kind))
                continue
            if key in bold:
                flush()
                events.append(Heading(2, bold[key], heading_anchor(node), "bold"))
                continue
        level = rules.HEADING_TAGS.get(tag)
        if level is not None:
            flush()
            first_block = _first_block_child(node)
            if first_block is None:
                text = heading_text(node)
            else:
                # an unclosed heading swallowed what follows (broken markup): its leading inline
                # text is the heading, the blocks inside it are content
                text = clean(" ".join(_inline_text(c) for c in _before(node, first_block)))
                stack.append(first_block)
            if text:
                events.append(Heading(level, text, heading_anchor(node)))
            continue
        renderer = BLOCK_RENDERERS.get(tag)
        if renderer is not None and not (tag == "table" and is_layout_table(node)):
            flush()
            try:
                text = renderer(node, 0)
            except StructuralHeading:
                stack.append(node.child)  # walk it as a container: its headings are the page's
                continue
            if text:
                events.append(text)
            continue
        if (tag in rules.BLOCK_TAGS or _has_block_child(node)
                or (tag not in rules.INLINE_TAGS and node.css_first(_BLOCKISH_CSS) is not None)):
            # a container, an inline element wrapping blocks, or an unknown element (a custom
            # element, or "<integer>" left unescaped in the text) with blocks somewhere inside
            flush()
            stack.append(node.child)
            continue
        run.append(node.text(separator=""))
    flush()
    return events
