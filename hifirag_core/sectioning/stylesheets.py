"""A page's ``<style>`` elements read for rules that hide text; the elements they hide are removed.

A class or id rule with ``display: none`` is the common way pages hide text, and hidden text is
where instructions meant for a model live. What hides is judged by ``styles.hiding_reason``, the
same test as for inline styles.

Parsing: tinycss2 (Kozea), which follows CSS Syntax Level 3, the algorithm browsers use, so a rule
reads here as it does in a browser, however broken the sheet around it (a regex or a grammar with
its own error recovery can be steered into reading another rule than the browser applies). It is
pure Python: about 1.2 MB of CSS a second here (a 690 kB framework sheet: 0.55 s; tree-sitter-css
parsed it in 0.09 s but flagged errors in both real sheets we tried, and recovers differently from
a browser). On the 3,174 documentation pages (554 of them with a ``<style>``, each under 1 kB) the
pass took 3.3% of the sectioner's CPU time, 0.21 ms a page (``bench/bench_stylesheets.py``); a page
without ``<style`` in its source skips it. Selectors are matched by lexbor, the parser the sectioner already
holds the page in (``tree.css``, ``node.css_matches``): no second DOM.

What is read:

* ``<style>`` elements whose ``type`` is CSS and whose ``media`` applies; ``<link>``ed sheets are
  never fetched;
* qualified rules at the top level and inside ``@supports``, ``@layer`` and ``@media`` blocks whose
  query applies to a 1280px-wide screen (``all``, ``screen``, ``min-width``, ``max-width``,
  ``orientation: landscape``; ``print`` and unknown features do not apply); nested rules are not read;
* selectors built of type, ``*``, ``.class``, ``#id`` and ``[attribute]`` parts joined by a space
  (descendant) or ``>`` (child). A selector with a pseudo-class (``:hover``, ``:not()``), a
  pseudo-element or a sibling combinator is skipped; the rest of its list is still read.

Precedence, for each property ``hiding_reason`` reads: the declaration with the greatest weight
wins, ``!important`` first, then specificity, then the later rule. The element's own inline style
beats a rule that is not ``!important``, and an ``!important`` inline style beats every rule. So
``.tab {display: none}`` is undone by ``.tab.active {display: block}`` or ``style="display:
block"`` (how scripts show a collapsed block), but not when the hiding rule is ``!important``.
Inline styles that hide still hide alone (``boilerplate.classify``). Rules that show an element
again through a skipped selector are not seen, so such an element stays hidden.

Inherited properties (``visibility``, the font size, ``color``, ``text-indent``) can be set back by a
descendant (``.row {font-size: 0} .row .cell {font-size: 14px}``, a common way to close the gaps
between inline blocks): then only the text outside the descendants that show it again is removed.

Bounds, so that a page with thousands of rules costs a fraction of a second: the first
``MAX_STYLE_CHARS`` characters of style text (the rest is not read), ``MAX_SELECTORS`` selectors,
``MAX_HIDING_SELECTORS`` of them that can hide matched against the page, ``MAX_JUDGED`` elements
judged, ``MAX_SHOWN_AGAIN`` descendants tested per hidden element and ``MAX_MATCH_TESTS`` tests of a
selector against an element. Past a bound the rest is not read or judged, and its text is kept:
a page can hide text from this pass behind that much CSS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import tinycss2
from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError
from tinycss2.serializer import serialize_identifier

from hifirag_core.sectioning.styles import (
    Colour,
    declarations,
    hiding_reason,
    opaque_background,
    parse_colour,
    same_colour,
)

MAX_STYLE_CHARS = 100_000  # about 0.25 s of tinycss2 here
MAX_SELECTORS = 5_000
MAX_HIDING_SELECTORS = 300
MAX_JUDGED = 2_000
MAX_SHOWN_AGAIN = 200
MAX_MATCH_TESTS = 40_000  # selector tests per page, about 0.15 s; elements not judged by then are kept
VIEWPORT_WIDTH_PX = 1280.0  # the screen media queries are evaluated for
_EM_PX = 16.0
_MAX_ANCESTORS = 60

# The properties hiding_reason reads (shorthands are expanded to these when a rule is read).
PROPERTIES = frozenset({
    "display", "visibility", "opacity", "font-size", "position", "left", "top", "text-indent", "clip",
    "clip-path", "height", "max-height", "width", "max-width", "overflow", "float", "color", "background-color",
})
# What a descendant can set back, by the reason its ancestor was hidden.
_INHERITED = {"visibility:hidden": "visibility", "font-size:0": "font-size", "color:transparent": "color",
              "color same as background": "color", "text-indent off-screen": "text-indent"}
_INLINE_CSS = {"visibility": "visibility", "font-size": "font", "color": "color", "text-indent": "indent"}
_ATTRIBUTE_MATCHERS = frozenset({"=", "~=", "|=", "^=", "$=", "*="})
_MEDIA_UNITS = {"px": 1.0, "em": _EM_PX, "rem": _EM_PX}

Weight = tuple[int, tuple[int, int, int], int]  # level, specificity, order
_SHEET, _INLINE, _SHEET_IMPORTANT, _INLINE_IMPORTANT = range(4)


@dataclass(frozen=True)
class Rule:
    """One selector of a rule, with the declarations of it that ``hiding_reason`` reads."""

    selector: str  # as lexbor reads it
    specificity: tuple[int, int, int]
    order: int
    # the rightmost compound's id, a class, its type, or ("any", ""), lower-cased: lexbor matches
    # ids and classes regardless of case on a page in quirks mode, so the index must find both
    key: tuple[str, str]
    declarations: tuple[tuple[str, str, bool], ...]  # (property, lower-cased value, important)


@dataclass
class StyleSheets:
    """The rules of a page's style sheets that can hide an element or show it again."""

    rules: list[Rule] = field(default_factory=list)
    hiding: list[Rule] = field(default_factory=list)
    by_key: dict[tuple[str, str], list[Rule]] = field(default_factory=lambda: defaultdict(list))
    chars_read: int = 0
    truncated: bool = False

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)
        self.by_key[rule.key].append(rule)


@dataclass
class Hidden:
    """An element the style sheets hide, and the descendants that show themselves again."""

    node: LexborNode
    reason: str
    shown_again: list[LexborNode]


# -- reading the sheets --------------------------------------------------------------------------

def _font_size(tokens: list) -> str:
    """The size in a ``font`` shorthand: its first length or percentage, or a number before ``/``
    or a 0 (a weight is never 0); a keyword size reads as ``medium``, which hides nothing."""
    words = [t for t in tokens if t.type not in ("whitespace", "comment")]
    for i, t in enumerate(words):
        slash = i + 1 < len(words) and words[i + 1].type == "literal" and words[i + 1].value == "/"
        if t.type in ("dimension", "percentage") or (t.type == "number" and (t.value == 0 or slash)):
            return tinycss2.serialize([t]).lower()
    return "medium"


def _expand(name: str, tokens: list) -> tuple[str, str] | None:
    """A declaration as one of PROPERTIES (``font`` and ``background`` set the one we read)."""
    if name == "font":
        return "font-size", _font_size(tokens)  # the shorthand always sets the size
    if name not in PROPERTIES and name != "background":
        return None
    value = tinycss2.serialize(tokens).strip().lower()
    if name == "background":  # sets the colour, to transparent when it names none
        return "background-color", value if parse_colour(value) is not None else "transparent"
    return name, value


def _declarations(tokens: Iterable | str) -> list[tuple[str, str, bool]]:
    out = []
    for decl in tinycss2.parse_blocks_contents(tokens, skip_comments=True, skip_whitespace=True):
        if decl.type != "declaration":
            continue  # nested rules and parse errors
        expanded = _expand(decl.lower_name, decl.value)
        if expanded is not None:
            out.append((*expanded, decl.important))
    return out


def inline_declarations(style: str) -> list[tuple[str, str, bool]]:
    """An inline ``style`` attribute's declarations, parsed as a browser does."""
    return _declarations(style)


def _split(tokens: Iterable, literal: str) -> Iterator[list]:
    part: list = []
    for token in tokens:
        if token.type == "literal" and token.value == literal:
            yield part
            part = []
        elif token.type != "comment":
            part.append(token)
    yield part


def _attribute(block) -> str | None:
    """``[name]``, ``[name op value]`` (with an ``i`` or ``s`` flag) as lexbor reads it, or None."""
    toks = [t for t in block.content if t.type not in ("whitespace", "comment")]
    if not toks or toks[0].type != "ident":
        return None
    if len(toks) == 1:
        return f"[{serialize_identifier(toks[0].value)}]"
    if len(toks) not in (3, 4) or toks[1].type != "literal" or toks[1].value not in _ATTRIBUTE_MATCHERS:
        return None
    value = toks[2]
    if value.type not in ("ident", "string"):
        return None
    flag = ""
    if len(toks) == 4:
        if toks[3].type != "ident" or toks[3].lower_value not in ("i", "s"):
            return None
        flag = f" {toks[3].lower_value}"
    return f"[{serialize_identifier(toks[0].value)}{toks[1].value}{tinycss2.serialize([value])}{flag}]"


def parse_selector(tokens: list) -> tuple[str, tuple[int, int, int], tuple[str, str]] | None:
    """A selector in the supported subset: (text for lexbor, specificity, key), or None to skip it."""
    out: list[str] = []
    ids = classes = types = 0
    combinator: str | None = None
    compound: dict[str, str] = {}  # the current compound's id, first class, type
    toks = [t for t in tokens if t.type != "comment"]
    while toks and toks[0].type == "whitespace":
        toks.pop(0)
    while toks and toks[-1].type == "whitespace":
        toks.pop()
    if not toks:
        return None
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.type == "whitespace":
            combinator = combinator or " "
            i += 1
            continue
        if t.type == "literal" and t.value == ">":
            if not out or combinator == ">":
                return None
            combinator = ">"
            i += 1
            continue
        if combinator is not None:
            out.append(" > " if combinator == ">" else " ")
            combinator, compound = None, {}
        starts = not out or out[-1] in (" ", " > ")
        if t.type == "ident" and starts:
            out.append(serialize_identifier(t.lower_value))
            compound["tag"] = t.lower_value
            types += 1
        elif t.type == "literal" and t.value == "*" and starts:
            out.append("*")
        elif t.type == "literal" and t.value == "." and i + 1 < len(toks) and toks[i + 1].type == "ident":
            i += 1
            out.append("." + serialize_identifier(toks[i].value))
            compound.setdefault("class", toks[i].value)
            classes += 1
        elif t.type == "hash" and t.is_identifier:
            out.append("#" + serialize_identifier(t.value))
            compound["id"] = t.value
            ids += 1
        elif t.type == "[] block" and (attribute := _attribute(t)) is not None:
            out.append(attribute)
            classes += 1
        else:
            return None  # a pseudo-class or -element, a sibling combinator, a namespace, ...
        i += 1
    if combinator == ">":
        return None
    key = next(((kind, compound[kind].lower()) for kind in ("id", "class", "tag") if kind in compound), ("any", ""))
    return "".join(out), (ids, classes, types), key


def _media_applies(tokens: Iterable) -> bool:
    """Whether a media query list matches a 1280px-wide screen (unknown features never match)."""
    return any(_query_applies([t for t in query if t.type != "whitespace"]) for query in _split(tokens, ","))


def _query_applies(words: list) -> bool:
    if not words:
        return True
    if words[0].type == "ident" and words[0].lower_value == "only":
        words = words[1:]
    if words and words[0].type == "ident":
        if words[0].lower_value not in ("all", "screen"):
            return False  # print, speech, an unknown type, "not ..." (which keeps text when wrong)
        words = words[1:]
    for word in words:
        if not ((word.type == "ident" and word.lower_value == "and")
                or (word.type == "() block" and _feature_applies(word))):
            return False
    return True


def _feature_applies(block) -> bool:
    toks = [t for t in block.content if t.type not in ("whitespace", "comment")]
    if len(toks) != 3 or toks[0].type != "ident" or toks[1].type != "literal" or toks[1].value != ":":
        return False  # a range ("width >= 600px"), a bare feature, ...
    name, value = toks[0].lower_value, toks[2]
    if name == "orientation":
        return value.type == "ident" and value.lower_value == "landscape"
    if name not in ("min-width", "max-width"):
        return False
    if value.type == "dimension" and value.lower_unit in _MEDIA_UNITS:
        width = value.value * _MEDIA_UNITS[value.lower_unit]
    elif value.type == "number" and value.value == 0:
        width = 0.0
    else:
        return False
    return width <= VIEWPORT_WIDTH_PX if name == "min-width" else width >= VIEWPORT_WIDTH_PX


def _rules(nodes: Iterable, sheets: StyleSheets, depth: int = 0) -> None:
    for node in nodes:
        if len(sheets.rules) >= MAX_SELECTORS:
            sheets.truncated = True
            return
        if node.type == "qualified-rule":
            decls = _declarations(node.content)
            if not decls:
                continue
            for part in _split(node.prelude, ","):
                if len(sheets.rules) >= MAX_SELECTORS:
                    sheets.truncated = True
                    return
                parsed = parse_selector(part)
                if parsed is not None:
                    selector, specificity, key = parsed
                    sheets.add(Rule(selector, specificity, len(sheets.rules), key, tuple(decls)))
        elif node.type == "at-rule" and node.content is not None and depth < 8:
            keyword = node.lower_at_keyword
            if keyword in ("supports", "layer") or (keyword == "media" and _media_applies(node.prelude)):
                _rules(tinycss2.parse_rule_list(node.content, skip_comments=True, skip_whitespace=True),
                       sheets, depth + 1)


def read_style_sheets(tree: LexborHTMLParser) -> StyleSheets:
    """The rules of the page's ``<style>`` elements, in page order, within the bounds."""
    sheets = StyleSheets()
    for style in tree.css("style"):
        kind = (style.attributes.get("type") or "text/css").strip().lower()
        media = style.attributes.get("media")
        if kind != "text/css" or (media is not None and not _media_applies(tinycss2.parse_component_value_list(media))):
            continue
        css = style.text(deep=True)
        room = MAX_STYLE_CHARS - sheets.chars_read
        if len(css) > room:
            css, sheets.truncated = css[:room], True
        sheets.chars_read += len(css)
        _rules(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True), sheets)
        if sheets.chars_read >= MAX_STYLE_CHARS or len(sheets.rules) >= MAX_SELECTORS:
            sheets.truncated = True
            break
    _mark_hiding(tree, sheets)
    return sheets


def _mark_hiding(tree: LexborHTMLParser, sheets: StyleSheets) -> None:
    """Pick the rules that can hide on their own (the others can only show an element again).

    A ``color`` can hide only against an equal background: it counts when it is transparent or
    equals a background colour the sheets or an inline style declare somewhere on the page.
    """
    backgrounds = [c for r in sheets.rules for p, v, _ in r.declarations
                   if p == "background-color" and (c := parse_colour(v)) is not None and c[3] > 0]
    if any(p == "color" for r in sheets.rules for p, _, _ in r.declarations):
        for node in tree.css('[style*="background" i]'):
            colour = opaque_background(declarations(node.attributes.get("style") or ""))
            if colour is not None:
                backgrounds.append(colour)
    for rule in sheets.rules:
        for prop, value, _ in rule.declarations:
            if prop == "color":
                colour = parse_colour(value)
                hides = colour is not None and (colour[3] <= 0.05 or any(same_colour(colour, b) for b in backgrounds))
            else:
                hides = hiding_reason({prop: value, "position": "absolute", "overflow": "hidden"},
                                      lambda: None) is not None
            if hides:
                sheets.hiding.append(rule)
                break


# -- judging elements ----------------------------------------------------------------------------

class _OverBudget(Exception):
    """MAX_MATCH_TESTS selector tests were made on this page."""


class _Cascade:
    """Each element's winning declarations among the rules that match it and its inline style."""

    def __init__(self, sheets: StyleSheets) -> None:
        self.sheets = sheets
        self.memo: dict[int, dict[str, str]] = {}
        self.tests_left = MAX_MATCH_TESTS

    def _candidates(self, node: LexborNode) -> Iterator[Rule]:
        attrs = node.attributes
        keys = [("tag", node.tag or ""), ("any", "")]
        if attrs.get("id"):
            keys.append(("id", (attrs["id"] or "").lower()))
        keys.extend(("class", c) for c in dict.fromkeys((attrs.get("class") or "").lower().split()))
        for key in keys:
            yield from self.sheets.by_key.get(key, ())

    def of(self, node: LexborNode) -> dict[str, str]:
        key = node.mem_id
        if key in self.memo:
            return self.memo[key]
        best: dict[str, tuple[Weight, str]] = {}

        def offer(prop: str, value: str, weight: Weight) -> None:
            if prop not in best or weight > best[prop][0]:
                best[prop] = (weight, value)

        for rule in self._candidates(node):
            self.tests_left -= 1
            if self.tests_left < 0:
                raise _OverBudget
            if not _matches(node, rule.selector):
                continue
            for prop, value, important in rule.declarations:
                offer(prop, value, (_SHEET_IMPORTANT if important else _SHEET, rule.specificity, rule.order))
        style = node.attributes.get("style")
        if style:
            for prop, value, important in inline_declarations(style):
                offer(prop, value, (_INLINE_IMPORTANT if important else _INLINE, (0, 0, 0), 0))
        self.memo[key] = decls = {prop: value for prop, (_, value) in best.items()}
        return decls

    def background(self, node: LexborNode) -> Colour | None:
        current: LexborNode | None = node
        for _ in range(_MAX_ANCESTORS):
            if current is None or not current.is_element_node:
                return None
            colour = opaque_background(self.of(current))
            if colour is not None:
                return colour
            current = current.parent
        return None

    def reason(self, node: LexborNode, inherited: dict[str, str] | None = None) -> str | None:
        decls = self.of(node) if inherited is None else {**inherited, **self.of(node)}
        return hiding_reason(decls, lambda: self.background(node), node.tag or "")


def _matches(node: LexborNode, selector: str) -> bool:
    try:
        return node.css_matches(selector)
    except SelectolaxError:
        return False  # a selector lexbor cannot read never hides anything


def _query(root: LexborNode | LexborHTMLParser, selectors: list[str]) -> list[LexborNode]:
    """Elements matching any of the selectors, once each."""
    if not selectors:
        return []
    try:
        found = root.css(", ".join(selectors))
    except SelectolaxError:  # one selector lexbor cannot read: ask for the others one by one
        found = []
        for selector in selectors:
            try:
                found.extend(root.css(selector))
            except SelectolaxError:
                continue
    seen: set[int] = set()
    out = []
    for node in found:
        if node.mem_id not in seen:
            seen.add(node.mem_id)
            out.append(node)
    return out


def hidden_elements(tree: LexborHTMLParser, sheets: StyleSheets) -> list[Hidden]:
    """The elements the page's style sheets hide (none for a page without hiding rules)."""
    selectors = list(dict.fromkeys(r.selector for r in sheets.hiding))[:MAX_HIDING_SELECTORS]
    if not selectors:
        return []
    cascade = _Cascade(sheets)
    out = []
    for node in _query(tree, selectors)[:MAX_JUDGED]:
        if node.tag in ("html", "head") or not node.is_element_node:
            continue
        try:
            reason = cascade.reason(node)
            if reason is None:
                continue
            prop = _INHERITED.get(reason)
            shown = _shown_again(node, prop, cascade) if prop else []
        except _OverBudget:
            break
        out.append(Hidden(node, reason, shown))
    return out


def _shown_again(node: LexborNode, prop: str, cascade: _Cascade) -> list[LexborNode]:
    """Descendants that set an inherited property back, so that they are seen again."""
    selectors = list(dict.fromkeys(r.selector for r in cascade.sheets.rules
                                   if any(p == prop for p, _, _ in r.declarations)))[:MAX_HIDING_SELECTORS]
    selectors.append(f'[style*="{_INLINE_CSS[prop]}" i]')
    inherited = {k: v for k, v in cascade.of(node).items() if k in _INHERITED.values()}
    shown = []
    for kid in _query(node, selectors)[:MAX_SHOWN_AGAIN]:
        if kid.mem_id != node.mem_id and cascade.reason(kid, inherited) is None:
            shown.append(kid)
    return shown


# -- removing them -------------------------------------------------------------------------------

def _ancestors(node: LexborNode, limit: int = 400) -> Iterator[LexborNode]:
    parent = node.parent
    for _ in range(limit):
        if parent is None:
            return
        yield parent
        parent = parent.parent


def _pieces(hidden: Hidden) -> Iterator[LexborNode]:
    """What to remove of a hidden element whose descendants show themselves again: everything
    outside them, text included, keeping only the elements on the way down to them."""
    keep = {n.mem_id for n in hidden.shown_again}
    on_path = {a.mem_id for n in hidden.shown_again for a in _ancestors(n)}
    stack = [hidden.node]
    while stack:
        child = stack.pop().child
        while child is not None:
            if child.mem_id in keep:
                pass
            elif child.mem_id in on_path:
                stack.append(child)
            elif child.is_element_node or (child.text_content or "").strip():
                yield child  # whitespace between kept elements stays: it separates their words
            child = child.next


def remove_hidden_by_style_sheets(tree: LexborHTMLParser) -> list[str]:
    """Remove what the page's style sheets hide; why each hidden element was (its nodes are freed)."""
    sheets = read_style_sheets(tree)
    hidden = hidden_elements(tree, sheets)
    doomed: dict[int, LexborNode] = {}  # by mem_id: a node found twice is freed once
    for item in hidden:
        for node in _pieces(item) if item.shown_again else (item.node,):
            doomed.setdefault(node.mem_id, node)
    # an element inside another removed one goes with it, and is never touched after it is freed
    outermost = [n for n in doomed.values() if not any(a.mem_id in doomed for a in _ancestors(n))]
    for node in outermost:
        node.decompose()
    return [item.reason for item in hidden]
