"""Build tests/support/gold/sectioning_gold.json from the real pages, independently of the sectioner.

The expectations come from each site's known page template, read with lxml (not lexbor, not our
rules): the element that holds the content per site, the h1-h4 inside it, and a sentence from the
first paragraph under a sampled heading. Only short strings are stored, never page text.
Run: .venv/bin/python tools/build_sectioning_gold.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages

OUT = Path(__file__).resolve().parents[1] / "tests" / "gold" / "sectioning_gold.json"
PAGES_PER_SITE = {"python3.11-doc": 14, "python-django-doc": 14, "postgresql-doc-15": 14,
                  "sqlite3-doc": 14, "debian-faq": 8}
# Pages whose content carries chrome-like names (a page about pagination, sections on cookies and
# navigation): the places where a class/id rule would remove content.
EXTRA_PAGES = {
    "python-django-doc": ["topics/pagination.html", "topics/http/sessions.html", "ref/paginator.html"],
    "python3.11-doc": ["library/http.cookies.html", "library/http.cookiejar.html"],
    "sqlite3-doc": ["lang_select.html", "about.html"],
}
SECTIONS_PER_PAGE = 5
MAX_HEADINGS_LISTED = 40
MAX_HEADING_CHARS = 160
# The template region that holds the content, and template parts inside it that are not content.
CONTENT = {
    "python3.11-doc": "//div[@role='main']",
    "python-django-doc": "//div[@id='yui-main']",
    "postgresql-doc-15": "//body",
    "sqlite3-doc": "//body",
    "debian-faq": "//body",
}
NOT_CONTENT = (
    "ancestor::*[contains(concat(' ', @class, ' '), ' navheader ') or contains(concat(' ', @class, ' '), ' navfooter ')"
    " or contains(concat(' ', @class, ' '), ' toc ') or contains(concat(' ', @class, ' '), ' menu ')"
    " or contains(@class, 'sidebar') or self::nav]"
)
# Strings of each template's chrome that must not reach any section (besides evaluation.SITE_CHROME).
MUST_NOT = {
    "python3.11-doc": ["Previous topic", "Quick search"],
    "python-django-doc": ["Django 3.2.25 documentation", "Last update:"],
    "postgresql-doc-15": ["PostgreSQL 15.20 Documentation"],
    "sqlite3-doc": ["Small. Fast. Reliable."],
    "debian-faq": [],
}


def set_heading_limit(limit: int | None) -> None:
    """How many headings a page entry lists (None: all, for the benchmark's reference)."""
    global MAX_HEADINGS_LISTED
    MAX_HEADINGS_LISTED = limit if limit is not None else 10**9


def flat(text: str) -> str:
    return " ".join(text.replace("¶", " ").split())


def snippet(text: str) -> str | None:
    """About 50 characters from inside a paragraph, cut at word boundaries."""
    words = flat(text).split()
    if len(words) < 12:
        return None
    return " ".join(words[2:10])


def page_entry(site: str, relpath: str, url: str, html: bytes) -> dict | None:
    doc = lxml.html.fromstring(html)
    found = doc.xpath(CONTENT[site])
    if not found:
        return None
    root = found[0]
    heads = [h for h in root.iter("h1", "h2", "h3", "h4") if not h.xpath(NOT_CONTENT)]
    if site == "sqlite3-doc":  # the logo block and the right-hand summary box are template
        heads = [h for h in heads if not h.xpath("ancestor::div[contains(@class, 'nosearch')]")]
    order = {el: i for i, el in enumerate(root.iter())}
    head_pos = sorted(order[h] for h in heads)
    paras = [(order[p], p) for p in root.iter("p") if not p.xpath(NOT_CONTENT)]
    paths: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    entries = []
    for h in heads:
        level = int(h.tag[1])
        text = flat(h.text_content())
        if not text:
            continue
        if len(text) > MAX_HEADING_CHARS:
            return None  # an unclosed heading swallowed the page: no clean expectation here
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        path = tuple(t for _, t in stack)
        paths.append(path)
        start = order[h]
        end = next((pos for pos in head_pos if pos > start), len(order))
        para = next((p for pos, p in paras if start < pos < end and snippet(p.text_content())), None)
        entries.append({"path": list(path[-2:]), "must": [snippet(para.text_content())] if para is not None else []})
    if not paths:
        return None
    step = max(1, len(entries) // SECTIONS_PER_PAGE)
    sample = entries[::step][:SECTIONS_PER_PAGE]
    return {
        "site": site, "relpath": relpath, "url": url,
        "sections": sample,
        "headings": sorted({p[-1] for p in paths})[:MAX_HEADINGS_LISTED],
        "must_not": MUST_NOT[site],
    }


def main() -> None:
    gold = []
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        pages = sorted(iter_tarball_pages(tarball), key=lambda p: p.relpath)
        site = pages[0].site
        candidates = [p for p in pages if "genindex" not in p.relpath and "search" not in p.relpath]
        step = max(1, len(candidates) // (2 * PAGES_PER_SITE[site]))
        picked = 0
        for p in candidates[::step]:
            entry = page_entry(site, p.relpath, p.url, p.html)
            if entry and entry["sections"]:
                gold.append(entry)
                picked += 1
            if picked >= PAGES_PER_SITE[site]:
                break
        chosen = {e["relpath"] for e in gold}
        for p in pages:
            if p.relpath in EXTRA_PAGES.get(site, []) and p.relpath not in chosen:
                entry = page_entry(site, p.relpath, p.url, p.html)
                if entry and entry["sections"]:
                    gold.append(entry)
    OUT.write_text(json.dumps(gold, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(gold)} pages -> {OUT}")


if __name__ == "__main__":
    main()
