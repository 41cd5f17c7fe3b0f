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

from selectolax.lexbor import LexborHTMLParser, LexborNode

from hifirag_core.sectioning import rules
from hifirag_core.text import word_count

_HEADINGS = "h1, h2, h3, h4, h5, h6"
_CONTENT_HEADINGS = "h1, h2, h3, h4"
_MAX_CHROME_MATCHES = 5000  # a hostile page with more chrome-looking nodes keeps the rest
_MAX_ANCESTOR_STEPS = 400


def _name_pattern(rule: rules.NameRule) -> str:
    """Regex for one naming rule over a space-separated list of lower-cased class and id words."""
    n = re.escape(rule.name)
    if rule.mode == "substring":
        return n
    if rule.mode == "token":
        return rf"(?:^|\s){n}(?=\s|$)"
    if rule.mode == "suffix":
        return rf"(?:^|[\s_-]){n}(?=\s|$)"
    return rf"(?:^|[\s_-]){n}(?=[\s_-]|$)"


def names_regex(names: Iterable[rules.NameRule]) -> re.Pattern[str]:
    return re.compile("|".join(_name_pattern(r) for r in names))


CHROME_NAMES_RE = names_regex(rules.CHROME_NAMES)
DECORATION_NAMES_RE = names_regex(rules.DECORATION_NAMES)
_CHROME_ROLES = frozenset(rules.CHROME_ROLES)
_INVISIBLE = frozenset(rules.INVISIBLE_TAGS)
_CHROME_TAGS = frozenset(rules.CHROME_TAGS)
_SECTIONING = frozenset(rules.SECTIONING_CHROME_TAGS)
_CANDIDATE_TAGS = frozenset([*rules.CHROME_CANDIDATE_TAGS, *rules.SECTIONING_CHROME_TAGS])
# The element kinds that can be chrome or decoration; inline elements other than links with rel
# are never chrome, which keeps the thousands of highlighted-code spans out of the Python loop.
CANDIDATES_CSS = ", ".join(
    [*rules.INVISIBLE_TAGS, *rules.CHROME_TAGS, *rules.SECTIONING_CHROME_TAGS,
     *(f"{tag}[class], {tag}[id]" for tag in rules.CHROME_CANDIDATE_TAGS),
     "[role]", "[hidden]", "[aria-hidden]", "a[rel]",
     *(f'[class~="{r.name}"]' for r in rules.DECORATION_NAMES)]
)
PSEUDO_TITLE_CSS = ", ".join(
    f'[class~="{r.name}"]' for r in rules.PSEUDO_TITLE_NAMES
)
PSEUDO_HEADINGS_CSS = ", ".join(
    ['[role="heading" i]', *(f'[class~="{name}"]' for name in rules.PSEUDO_HEADING_CLASS_LEVELS),
     PSEUDO_TITLE_CSS]
)


def classify(node: LexborNode) -> str | None:
    """"invisible", "chrome", "sectioning" (header/footer/aside), "decoration" or None."""
    tag = node.tag
    if tag in _INVISIBLE:
        return "invisible"
    if tag in _CHROME_TAGS:
        return "chrome"
    attrs = node.attributes
    role = attrs.get("role")
    if role and role.strip().lower() in _CHROME_ROLES:
        return "chrome"
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return "chrome"
    rel = attrs.get("rel")
    if tag == "a" and rel and rel.strip().lower() in ("prev", "next", "previous"):
        return "chrome"
    names = f"{attrs.get('class') or ''} {attrs.get('id') or ''}".lower()
    if names.strip():
        if tag in _CANDIDATE_TAGS and CHROME_NAMES_RE.search(names):
            return "chrome"
        if DECORATION_NAMES_RE.search(names):
            return "decoration"
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
        if last is not None and _is_descendant(node, last):
            continue
        last = node.mem_id
        yield node


def _has_content_heading(node: LexborNode) -> bool:
    """A heading a reader would see as part of the content (not a link to another page)."""
    for h in node.css(_CONTENT_HEADINGS):
        link = h.css_first("a[href]")
        if link is not None:
            href = (link.attributes.get("href") or "").strip()
            if not href.startswith("#") and len(link.text(strip=True)) >= len(h.text(strip=True)):
                continue
        if h.text(strip=True):
            return True
    return False


def remove_boilerplate(tree: LexborHTMLParser) -> int:
    """Drop invisible elements, decorations and chrome blocks (with their residue); returns how many."""
    doomed: list[LexborNode] = []
    chrome_ids: set[int] = set()
    for node in tree.css(CANDIDATES_CSS):
        kind = classify(node)
        if kind is None:
            continue
        if kind == "sectioning" and _inside_content_container(node):
            continue
        doomed.append(node)
        if kind != "decoration" and kind != "invisible":
            chrome_ids.add(node.mem_id)
    kept = list(_outermost(doomed))
    parents: dict[int, LexborNode] = {}
    for node in kept:
        if node.mem_id in chrome_ids:
            parent = node.parent
            if parent is not None and parent.tag not in ("body", "html", "-undef"):
                parents.setdefault(parent.mem_id, parent)
    for node in kept:
        node.decompose()
    return len(kept) + _remove_residue(parents)


def _remove_residue(parents: dict[int, LexborNode]) -> int:
    """Blocks that held chrome and now hold a few words and no heading are chrome too."""
    doomed = {
        pid: p for pid, p in parents.items()
        if p.tag not in rules.CONTENT_CONTAINER_TAGS
        and p.css_first(_HEADINGS) is None
        and p.css_first(PSEUDO_TITLE_CSS) is None
        and word_count(p.text()) <= rules.RESIDUE_MAX_WORDS
    }
    removed = 0
    for pid, p in doomed.items():
        if any(_is_descendant(p, other) for other in doomed if other != pid):
            continue  # its ancestor goes too; never touch a freed node
        p.decompose()
        removed += 1
    return removed


def _element_children(node: LexborNode) -> Iterator[LexborNode]:
    child = node.child
    while child is not None:
        if child.is_element_node:
            yield child
        child = child.next


def _text_len(node: LexborNode) -> int:
    return len(node.text())


def content_root(tree: LexborHTMLParser) -> LexborNode | None:
    """The element that holds the main content: a declared main/article, else the text mass."""
    body = tree.body
    if body is None:
        return None
    body_len = _text_len(body)
    if body_len == 0:
        return body
    declared = tree.css(rules.MAIN_CSS)
    for selector in rules.MAIN_SELECTORS:
        found = [n for n in declared if n.css_matches(selector)] if len(declared) > 1 else (
            declared if declared and declared[0].css_matches(selector) else [])
        if len(found) == 1:
            if _text_len(found[0]) >= rules.ROOT_MIN_SHARE * body_len:
                return found[0]
        elif len(found) > 1:
            break  # several articles (a listing): let the text mass decide
    return _descend(body, body_len)


def _descend(node: LexborNode, node_len: int) -> LexborNode:
    """Step into the child holding nearly all the text, while the siblings hold no heading."""
    for _ in range(rules.ROOT_MAX_STEPS):
        kids = list(_element_children(node))
        if not kids:
            return node
        best = None
        best_len = 0
        need = (1 - rules.ROOT_SIBLING_SHARE) * node_len
        for kid in kids:
            n = _text_len(kid)
            if n > best_len:
                best, best_len = kid, n
            if n >= need:
                break  # no sibling can hold more: the rest share what is left
        if best is None or node_len == 0 or best_len < need:
            return node
        if best.tag in rules.HEADING_TAGS or best.tag in ("table", "ul", "ol", "dl", "pre", "p"):
            return node  # never root the page inside a single leaf block
        if any(k.mem_id != best.mem_id and _has_content_heading(k) for k in kids):
            return node
        node, node_len = best, best_len
    return node


def _link_density(node: LexborNode, total: int) -> float:
    if total == 0:
        return 0.0
    linked = sum(len(a.text(separator=" ", strip=True)) for a in node.css("a[href]"))
    return min(1.0, linked / total)


def _is_edge_chrome(node: LexborNode) -> bool:
    text = node.text(separator=" ", strip=True)
    if not text:
        return False  # empty blocks add no text, and may carry the anchor of the next heading
    if node.css_first(_HEADINGS) is not None or node.css_first(PSEUDO_TITLE_CSS) is not None:
        return False
    if word_count(text) > rules.EDGE_MAX_WORDS:
        return False
    return bool(rules.EDGE_CHROME_TEXT.match(text)) or _link_density(node, len(text)) >= rules.EDGE_LINK_DENSITY


def prune_edges(root: LexborNode) -> int:
    """Drop link lists and site furniture before the first heading and after the last content block."""
    kids = list(_element_children(root))
    doomed: list[LexborNode] = []
    for node in kids:
        if node.tag in rules.HEADING_TAGS or not _is_edge_chrome(node):
            break
        doomed.append(node)
    lead = len(doomed)
    for node in reversed(kids[lead:]):
        if node.tag in rules.HEADING_TAGS or not _is_edge_chrome(node):
            break
        doomed.append(node)
    for node in doomed:
        node.decompose()
    return len(doomed)
