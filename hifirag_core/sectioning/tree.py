"""A page's sections as an indented tree, for ``hifirag sections URL``."""

from __future__ import annotations

from hifirag_core.sectioning.section_types import ParsedPage

_PREVIEW = 72


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def format_section_tree(page: ParsedPage, *, preview: bool = True) -> str:
    """One line per section, indented by heading depth, with size, anchor and the first words."""
    head = page.title or page.url
    lines = [f"{head}  <{page.url}>", f"status: {page.status}" + (f" ({page.error})" if page.error else "")
             + f", {len(page.sections)} sections"]
    shown: set[tuple[str, ...]] = set()
    for s in page.sections:
        depth = len(s.heading_path)
        # headings with no text of their own still frame their children: show them once
        for i in range(1, depth):
            prefix = s.heading_path[:i]
            if prefix not in shown:
                shown.add(prefix)
                lines.append(f"{'  ' * (i - 1)}§ {prefix[-1]}")
        shown.add(s.heading_path)
        indent = "  " * max(depth - 1, 0)
        label = s.heading if s.heading else "(before the first heading)"
        tag = f"h{s.level}" if s.level else "--"
        anchor = f" #{s.anchor}" if s.anchor else ""
        lines.append(f"{indent}{tag} {label}{anchor}  [{s.n_words} words]")
        if preview and s.text:
            lines.append(f"{indent}   {_preview(s.text)}")
    return "\n".join(lines)
