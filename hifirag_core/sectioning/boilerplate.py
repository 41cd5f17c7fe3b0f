"""Boilerplate out, main content found: page structure first (main/article, roles), then text mass.

Cost model (lexbor on ~1,500 elements a page): every CSS query walks the whole tree, and every
selector in a group adds to every element's test. So the page is queried once for the few element
kinds that can be chrome at all (block containers with a class or id, nav/header/footer/aside, role
holders), and the class/id/role names are then tested in Python by one compiled regex built from
the rules. Removal uses ``decompose()``, which frees the subtree, so a node is never touched after
an ancestor of it was removed (``_outermost`` keeps only the outer matches).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser, LexborNode

from hifirag_core.sectioning import rules
from hifirag_core.sectioning.markdown import HARD_BREAK
from hifirag_core.sectioning.styles import HIDING_STYLE_CSS, hidden_by_style
from hifirag_core.text import word_count

_HEADINGS = "h1, h2, h3, h4, h5, h6"
_CONTENT_HEADINGS = "h1, h2, h3, h4"
_MAX_CHROME_MATCHES = 5000  # a hostile page with more chrome-looking nodes keeps the rest
_MAX_ANCESTOR_STEPS = 400


class NameMatcher:
    """Class/id naming rules as set lookups over words and their -/_ pieces (no per-rule regex)."""

    def __init__(self, names: Iterable[rules.NameRule]) -> None:
        names = list(names)
        self.words = frozenset(r.name for r in names)  # every mode matches the exact word
        self.parts = frozenset(r.name for r in names if r.mode == "part")
        self.suffixes = frozenset(r.name for r in names if r.mode == "suffix")
        self.substrings = tuple(r.name for r in names if r.mode == "substring")

    def match(self, value: str) -> str | None:
        """"exact" (a whole word is a rule's name), "fuzzy" (a piece or substring is) or None."""
        words = value.split()
        if not self.words.isdisjoint(words):
            return "exact"
        for word in words:
            if "-" in word or "_" in word:
                pieces = _PIECES.split(word)
                if pieces[-1] in self.suffixes or not self.parts.isdisjoint(pieces):
                    return "fuzzy"
        return "fuzzy" if any(sub in value for sub in self.substrings) else None


_PIECES = re.compile(r"[-_]")
CHROME_NAMES = NameMatcher(rules.CHROME_NAMES)
DECORATION_NAMES = NameMatcher(rules.DECORATION_NAMES)
_TITLE_CLASSES = frozenset(r.name for r in rules.PSEUDO_TITLE_NAMES)
_CHROME_ROLES = frozenset(rules.CHROME_ROLES)
_INVISIBLE = frozenset(rules.INVISIBLE_TAGS)
_CHROME_TAGS = frozenset(rules.CHROME_TAGS)
_SECTIONING = frozenset(rules.SECTIONING_CHROME_TAGS)
_CANDIDATE_TAGS = frozenset([*rules.CHROME_CANDIDATE_TAGS, *rules.SECTIONING_CHROME_TAGS])
_ID_TAGS = frozenset(rules.CHROME_ID_TAGS)
# One query finds every element that can be chrome, a declared main, a pseudo-heading or a <br>;
# inline elements other than links with rel are never chrome, which keeps the thousands of
# highlighted-code spans out of the Python loop.
CANDIDATES_CSS = ", ".join(
    [*rules.INVISIBLE_TAGS, *rules.CHROME_TAGS, *rules.SECTIONING_CHROME_TAGS, "main", "article", "br",
     *(f"{tag}[class]" for tag in dict.fromkeys([*rules.CHROME_CANDIDATE_TAGS, *rules.PSEUDO_HEADING_TAGS])),
     *(f"{tag}[id]" for tag in rules.CHROME_ID_TAGS),
     "[role]", "[hidden]", "[aria-hidden]", "a[rel]", *HIDING_STYLE_CSS,
     *(f'[class~="{r.name}"]' for r in rules.DECORATION_NAMES)]
)
PSEUDO_TITLE_CSS = ", ".join(f'[class~="{r.name}"]' for r in rules.PSEUDO_TITLE_NAMES)


@dataclass
class PageScan:
    """What one pass over the candidates found (chrome is already removed when it returns)."""

    mains: list[tuple[str, LexborNode]] = field(default_factory=list)  # ("main"|"article", node)
    pseudo: dict[int, tuple[int, str]] = field(default_factory=dict)  # mem_id -> (level, kind)
    residue: dict[int, LexborNode] = field(default_factory=dict)  # blocks that held removed chrome
    removed: int = 0


def _pseudo_level(tag: str, attrs: dict[str, str | None], classes: list[str]) -> tuple[int, str] | None:
    if tag not in rules.PSEUDO_HEADING_TAGS and (attrs.get("role") or "").lower() != "heading":
        return None
    if (attrs.get("role") or "").strip().lower() == "heading":
        aria = (attrs.get("aria-level") or "").strip()
        return (int(aria) if aria.isdigit() and 1 <= int(aria) <= 6 else 2), "pseudo"
    if not _TITLE_CLASSES.isdisjoint(classes):
        return 1, "title"
    levels = [rules.PSEUDO_HEADING_CLASS_LEVELS[c] for c in classes if c in rules.PSEUDO_HEADING_CLASS_LEVELS]
    return (min(levels), "pseudo") if levels else None


def classify(node: LexborNode, scan: PageScan) -> str | None:
    """"invisible", "chrome", "named" (chrome by part of a class name), "sectioning", "decoration" or None.

    Records declared main content and pseudo-headings in ``scan`` on the way.
    """
    tag = node.tag
    if tag in _INVISIBLE:
        return "invisible"
    if tag in _CHROME_TAGS:
        return "chrome"
    if tag == "br":
        node.insert_before(HARD_BREAK)  # before any removal: a freed node is never touched
        return None
    attrs = node.attributes
    role = (attrs.get("role") or "").strip().lower()
    if role in _CHROME_ROLES:
        return "chrome"
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return "chrome"
    style = attrs.get("style")
    if style and hidden_by_style(node, style):
        return "invisible"  # removed alone: hidden text says nothing about the block around it
    if tag == "a":
        rel = (attrs.get("rel") or "").strip().lower()
        return "chrome" if rel in rules.CHROME_RELS else None
    if tag in rules.MAIN_TAGS or role == "main":
        scan.mains.append(("article" if tag == "article" else "main", node))
        return None
    cls = (attrs.get("class") or "").lower()
    # ids name content as often as chrome ("s-using-cookie-based-sessions"): only a whole-id match
    ident = (attrs.get("id") or "").strip().lower() if tag in _ID_TAGS else ""
    if cls or ident:
        if tag in _CANDIDATE_TAGS:
            if ident in CHROME_NAMES.words:
                return "chrome"
            match = CHROME_NAMES.match(cls)
            if match == "exact":
                return "chrome"
            if match == "fuzzy":
                return "named"  # a piece of a longer name: checked against the page's text mass
        if DECORATION_NAMES.match(cls):
            return "decoration"
    if tag in rules.PSEUDO_HEADING_TAGS or role == "heading":
        pseudo = _pseudo_level(tag, attrs, cls.split())
        if pseudo is not None:
            scan.pseudo[node.mem_id] = pseudo
    if tag in _SECTIONING:
        return "sectioning"
    return None


def _inside_content_container(node: LexborNode) -> bool:
    """True when an article/main (or role=main) encloses the node: its header is the article's own."""
    parent = node.parent
    steps = 0
    while parent is not None and steps < _MAX_ANCESTOR_STEPS:
        if parent.tag in rules.CONTENT_CONTAINER_TAGS:
            return True
        if parent.is_element_node and (parent.attributes.get("role") or "").lower() == "main":
            return True
        parent = parent.parent
        steps += 1
    return False


def _is_descendant(node: LexborNode, ancestor_id: int) -> bool:
    parent = node.parent
    steps = 0
    while parent is not None:
        if parent.mem_id == ancestor_id:
            return True
        steps += 1
        if steps >= _MAX_ANCESTOR_STEPS:
            return True  # too deep to tell: treat as nested, which only means "not removed twice"
        parent = parent.parent
    return False


def _outermost(nodes: Iterable[LexborNode]) -> Iterator[LexborNode]:
    """Nodes in document order, without those inside an earlier kept one."""
    last: int | None = None
    for count, node in enumerate(nodes):
        if count >= _MAX_CHROME_MATCHES:
            return
        if last is not None and (node.mem_id == last or _is_descendant(node, last)):
            continue
        last = node.mem_id
        yield node


def _has_content_heading(node: LexborNode) -> bool:
    """A heading a reader would see as part of the content (not a link to another page)."""
    for h in node.css(_CONTENT_HEADINGS):
        link = h.css_first("a[href]")
        if link is not None:
            href = (link.attributes.get("href") or "").strip()
            # a heading that is one link to elsewhere (or to "#", the page top) is a site name
            elsewhere = not href.startswith("#") or href == "#"
            if elsewhere and len(link.text(strip=True)) >= len(h.text(strip=True)):
                continue
        if h.text(strip=True):
            return True
    return False


def remove_boilerplate(tree: LexborHTMLParser) -> PageScan:
    """Drop invisible elements, decorations and chrome blocks (with their residue) in one pass."""
    scan = PageScan()
    doomed: list[LexborNode] = []
    chrome_ids: set[int] = set()
    body_len: int | None = None
    seen: set[int] = set()
    for node in tree.css(CANDIDATES_CSS):
        # lexbor returns a node once per selector of the group it matches: classify it once, and
        # never decompose it twice (a double free)
        key = node.mem_id
        if key in seen:
            continue
        seen.add(key)
        kind = classify(node, scan)
        if kind is None:
            continue
        if kind == "sectioning" and _inside_content_container(node):
            continue
        if kind == "named":
            # a block named like chrome that holds much of the page's text is the content itself
            # (a page about pagination, a section on cookies): chrome is never the bulk of a page
            if body_len is None:
                body_len = _text_len(tree.body) if tree.body is not None else 0
            if body_len and _text_len(node) > rules.CHROME_MAX_SHARE * body_len:
                continue
        doomed.append(node)
        if kind != "decoration" and kind != "invisible":
            chrome_ids.add(node.mem_id)
    kept = list(_outermost(doomed))
    gone = {n.mem_id for n in kept}
    # a declared main or pseudo-heading inside removed chrome is gone with it
    scan.mains = [(k, n) for k, n in scan.mains if not _inside_any(n, gone)]
    parents: dict[int, LexborNode] = {}
    for node in kept:
        if node.mem_id in chrome_ids:
            parent = node.parent
            if parent is not None and parent.tag not in ("body", "html", "-undef"):
                parents.setdefault(parent.mem_id, parent)
    for node in kept:
        node.decompose()
    scan.removed = len(kept)
    scan.residue = parents
    return scan


def _inside_any(node: LexborNode, ids: set[int]) -> bool:
    if not ids:
        return False
    current: LexborNode | None = node
    steps = 0
    while current is not None and steps < _MAX_ANCESTOR_STEPS:
        if current.mem_id in ids:
            return True
        current = current.parent
        steps += 1
    return False


def remove_residue(scan: PageScan, root: LexborNode) -> int:
    """Blocks that held chrome and now hold a few words and no heading are chrome too (a tagline
    beside a menu). Never the content root or a block around it: on a short page the wrapper its
    sidebar was taken from holds the whole content in a few words.
    """
    around = set()
    node: LexborNode | None = root
    while node is not None:
        around.add(node.mem_id)
        node = node.parent
    doomed = {}
    for pid, p in scan.residue.items():
        if pid in around or p.tag in rules.CONTENT_CONTAINER_TAGS:
            continue
        if p.css_first(_HEADINGS) is not None or p.css_first(PSEUDO_TITLE_CSS) is not None:
            continue
        if word_count(p.text()) <= rules.RESIDUE_MAX_WORDS:
            doomed[pid] = p
    removed = 0
    for pid, p in doomed.items():
        if any(_is_descendant(p, other) for other in doomed if other != pid):
            continue  # its ancestor goes too; never touch a freed node
        p.decompose()
        removed += 1
    scan.removed += removed
    return removed


def _element_children(node: LexborNode) -> Iterator[LexborNode]:
    child = node.child
    while child is not None:
        if child.is_element_node:
            yield child
        child = child.next


def _text_len(node: LexborNode) -> int:
    return len(node.text())


def content_root(tree: LexborHTMLParser, scan: PageScan) -> LexborNode | None:
    """The element that holds the main content: a declared main/article, else the text mass."""
    body = tree.body
    if body is None:
        return None
    body_len: int | None = None
    for kind in ("main", "article"):
        found = [n for k, n in scan.mains if k == kind]
        if len(found) == 1:
            main_len = _text_len(found[0])
            if main_len >= rules.ROOT_TRUSTED_CHARS:
                return found[0]  # a declared main with real text in it: no need to weigh the page
            body_len = _text_len(body)
            if main_len and main_len >= rules.ROOT_MIN_SHARE * body_len:
                return found[0]
        elif len(found) > 1:
            break  # several articles (a listing): let the text mass decide
    if body_len is None:
        body_len = _text_len(body)
    if body_len == 0:
        return body
    return _descend(body, body_len)


def _descend(node: LexborNode, node_len: int) -> LexborNode:
    """Step into the child holding nearly all the text, while the siblings hold no heading."""
    for _ in range(rules.ROOT_MAX_STEPS):
        containers: list[LexborNode] = []
        others: list[LexborNode] = []
        loose_text = False
        child = node.child
        while child is not None:
            tag = child.tag
            if tag == "-text":
                loose_text = loose_text or bool((child.text_content or "").strip())
            elif tag in rules.HEADING_TAGS:
                return node  # headings sit right here: this is the content's own level
            elif child.is_element_node:
                (containers if tag in rules.ROOT_CONTAINER_TAGS else others).append(child)
            child = child.next
        if not containers:
            return node
        need = (1 - rules.ROOT_SIBLING_SHARE) * node_len
        if len(containers) == 1 and not others and not loose_text:
            best, best_len = containers[0], node_len  # the only child: no text to measure against
        else:
            best, best_len = containers[0], -1
            for kid in containers:
                n = _text_len(kid)
                if n > best_len:
                    best, best_len = kid, n
                if n >= need:
                    break  # no sibling can hold more: the rest share what is left
            if best_len < need:
                # siblings that are mostly links (a site header, a bar of prev/next links) are
                # chrome that weighs a lot on a short page: measure the best child without them
                chrome = sum(n for k in (*containers, *others) if k.mem_id != best.mem_id
                             and (n := _text_len(k)) and _link_density(k, n) >= rules.EDGE_LINK_DENSITY)
                if best_len < (1 - rules.ROOT_SIBLING_SHARE) * (node_len - chrome):
                    return node
            if any(k.mem_id != best.mem_id and _has_content_heading(k) for k in (*containers, *others)):
                return node
        node, node_len = best, best_len
    return node


def _visible_len(text: str) -> int:
    return len(" ".join(text.split()))


def _link_density(node: LexborNode, total: int | None = None) -> float:
    """Share of the node's visible characters inside links (whitespace collapsed on both sides)."""
    total = _visible_len(node.text())
    if total == 0:
        return 0.0
    linked = sum(_visible_len(a.text()) for a in node.css("a[href]"))
    return min(1.0, linked / total)


def _is_edge_chrome(node: LexborNode) -> bool:
    if node.css_first(PSEUDO_TITLE_CSS) is not None or _has_content_heading(node):
        return False  # holds a heading (other than a site-name link): content, however many links
    text = node.text(separator=" ", strip=True)
    if not text:
        return False  # empty blocks add no text, and may carry the anchor of the next heading
    if len(text) > rules.EDGE_MAX_CHARS or word_count(text) > rules.EDGE_MAX_WORDS:
        return False
    return bool(rules.EDGE_CHROME_TEXT.match(text)) or _link_density(node, len(text)) >= rules.EDGE_LINK_DENSITY


def prune_edges(root: LexborNode, lead: bool = True, trail: bool = True, depth: int = 0) -> int:
    """Drop link lists and site furniture before the first heading and after the last content block.

    The edges of a wrapper at the edge are edges too (an unclosed <center> around the whole page).
    """
    kids = list(_element_children(root))
    doomed: list[LexborNode] = []
    first = 0
    if lead:
        for node in kids:
            if node.tag in rules.HEADING_TAGS or not _is_edge_chrome(node):
                break
            doomed.append(node)
        first = len(doomed)
    last = len(kids)
    if trail:
        for node in reversed(kids[first:]):
            if node.tag in rules.HEADING_TAGS or not _is_edge_chrome(node):
                break
            doomed.append(node)
            last -= 1
    for node in doomed:
        node.decompose()
    removed = len(doomed)
    rest = kids[first:last]
    if depth < rules.EDGE_MAX_DEPTH and rest:
        if lead and rest[0].tag in rules.ROOT_CONTAINER_TAGS:
            removed += prune_edges(rest[0], True, len(rest) == 1 and trail, depth + 1)
        if trail and rest[-1].tag in rules.ROOT_CONTAINER_TAGS and (len(rest) > 1 or not lead):
            removed += prune_edges(rest[-1], False, True, depth + 1)
    return removed
