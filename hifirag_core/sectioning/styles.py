"""Styles that hide an element from a reader: its text is no part of the page we read.

Text a reader cannot see is where pages hide instructions meant for a model ("ignore the
previous instructions ..."). ``hiding_reason`` judges one element's declarations, whether they come
from its inline ``style`` attribute (``hidden_by_style``) or from the page's style sheets
(``stylesheets.py``, which also weighs rules that show the element again). Only declarations that
hide for certain count:

* ``display: none``; ``visibility: hidden`` or ``collapse``; ``opacity`` of at most 0.05;
* a zero or tiny font size (``font-size`` or the ``font`` shorthand): under 1px or 1pt, under
  0.1em or rem, under 10%;
* text the colour of its background: ``color`` against the nearest ``background`` or
  ``background-color`` on the element or an ancestor (within a few units per channel), or a
  transparent ``color``; a background nobody declared is unknown, never assumed white;
* moved off-screen: ``left``, ``top`` or ``text-indent`` of -999px or beyond;
* clipped away: ``clip`` to an empty ``rect()`` on an absolutely positioned element, or a
  ``clip-path`` that leaves nothing (``inset(50%)``, ``circle(0)``, a polygon of one point);
* a block box of at most 1px (``height``, ``max-height``, ``width``, ``max-width``) with
  ``overflow: hidden`` (an inline element or a table cell has no such box).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from selectolax.lexbor import LexborNode

# What the parser is asked for: elements whose style can hide them (lexbor matches the
# substrings case-insensitively, so Python sees only these few).
HIDING_STYLE_CSS: tuple[str, ...] = tuple(
    f'[style*="{prop}" i]' for prop in ("display", "visibility", "opacity", "font", "color", "left", "top",
                                        "indent", "height", "clip")
)
COLOUR_TOLERANCE = 6  # per channel: #fefefe on #ffffff is the same colour to a reader
_MAX_ANCESTORS = 60

_NAMED: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0), "white": (255, 255, 255), "silver": (192, 192, 192), "gray": (128, 128, 128),
    "grey": (128, 128, 128), "red": (255, 0, 0), "maroon": (128, 0, 0), "yellow": (255, 255, 0),
    "olive": (128, 128, 0), "lime": (0, 255, 0), "green": (0, 128, 0), "aqua": (0, 255, 255),
    "cyan": (0, 255, 255), "teal": (0, 128, 128), "blue": (0, 0, 255), "navy": (0, 0, 128),
    "fuchsia": (255, 0, 255), "magenta": (255, 0, 255), "purple": (128, 0, 128), "orange": (255, 165, 0),
    "whitesmoke": (245, 245, 245), "snow": (255, 250, 250), "ivory": (255, 255, 240),
    "lightgray": (211, 211, 211), "lightgrey": (211, 211, 211), "darkgray": (169, 169, 169),
    "darkgrey": (169, 169, 169),
}
_HEX = re.compile(r"#([0-9a-f]{3,8})\b")
_RGB = re.compile(r"rgba?\(\s*([\d.]+%?)[\s,]+([\d.]+%?)[\s,]+([\d.]+%?)(?:\s*[,/]\s*([\d.]+%?))?\s*\)")
_SIZE = re.compile(r"^(-?\d*\.?\d+)\s*(px|pt|em|rem|%|vw|vh|ex|ch)?$")
_FONT_SIZE_IN_SHORTHAND = re.compile(r"(?:^|\s)(\d*\.?\d+)(px|pt|em|rem|%)?(?=/|\s|$)")

Colour = tuple[int, int, int, float]  # r, g, b, alpha


def declarations(style: str) -> dict[str, str]:
    """``{"property": "value"}`` of an inline style, lower-cased, ``!important`` dropped, last wins."""
    out: dict[str, str] = {}
    for part in style.split(";"):
        name, sep, value = part.partition(":")
        if sep:
            out[name.strip().lower()] = value.lower().replace("!important", "").strip()
    return out


def _channel(text: str) -> int:
    return round(float(text[:-1]) * 255 / 100) if text.endswith("%") else round(float(text))


def parse_colour(value: str) -> Colour | None:
    """A CSS colour from a value (the first colour in a shorthand), or None when there is none we read."""
    value = value.strip()
    if m := _HEX.search(value):
        digits = m.group(1)
        if len(digits) in (3, 4):
            digits = "".join(c * 2 for c in digits)
        if len(digits) not in (6, 8):
            return None
        alpha = int(digits[6:8], 16) / 255 if len(digits) == 8 else 1.0
        return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16), alpha
    if m := _RGB.search(value):
        r, g, b = (_channel(x) for x in m.group(1, 2, 3))
        a = m.group(4)
        alpha = 1.0 if a is None else (float(a[:-1]) / 100 if a.endswith("%") else float(a))
        return r, g, b, alpha
    for word in re.split(r"[\s,]+", value):
        if word == "transparent":
            return 0, 0, 0, 0.0
        if word in _NAMED:
            return (*_NAMED[word], 1.0)
    return None


def _tiny_font(value: str, shorthand: bool) -> bool:
    if shorthand:
        m = _FONT_SIZE_IN_SHORTHAND.search(value)
        if m is None:
            return False
        number, unit = float(m.group(1)), m.group(2) or "px"
    else:
        m = _SIZE.match(value)
        if m is None:
            return False
        number, unit = float(m.group(1)), m.group(2) or "px"
    limits = {"px": 1.0, "pt": 1.0, "em": 0.1, "rem": 0.1, "%": 10.0, "ex": 0.2, "ch": 0.2}
    return number < limits.get(unit, 0.0) or number <= 0


def _length(value: str | None) -> float | None:
    if not value:
        return None
    m = _SIZE.match(value.strip())
    return float(m.group(1)) if m and (m.group(2) in (None, "px", "pt", "em", "rem")) else None


def _background(node: LexborNode) -> Colour | None:
    """The nearest opaque inline background colour at or above ``node``."""
    current: LexborNode | None = node
    for _ in range(_MAX_ANCESTORS):
        if current is None or not current.is_element_node:
            return None
        style = current.attributes.get("style")
        if style:
            colour = opaque_background(declarations(style))
            if colour is not None:
                return colour
        current = current.parent
    return None


def opaque_background(decls: Mapping[str, str]) -> Colour | None:
    """The opaque background colour one element's declarations give it, or None."""
    for prop in ("background-color", "background"):
        colour = parse_colour(decls[prop]) if prop in decls else None
        if colour is not None and colour[3] > 0:
            return colour
    return None


def same_colour(a: Colour, b: Colour) -> bool:
    return all(abs(x - y) <= COLOUR_TOLERANCE for x, y in zip(a[:3], b[:3], strict=True))


def _px(value: str | None) -> float | None:
    """A length in pixels (em and rem at 16px), or None for any other unit or no length."""
    m = _SIZE.match(value.strip()) if value else None
    if m is None:
        return None
    scale = {None: 1.0, "px": 1.0, "pt": 4 / 3, "em": 16.0, "rem": 16.0}.get(m.group(2))
    return None if scale is None else float(m.group(1)) * scale


def _empty_rect(value: str | None) -> bool:
    """``clip: rect(top, right, bottom, left)`` that leaves no area (``auto`` is the box's edge)."""
    m = _RECT.search(value) if value else None
    if m is None:
        return False
    edges = [None if v == "auto" else _px(v) for v in m.group(1).replace(",", " ").split()]
    if len(edges) != 4:
        return False
    top, right, bottom, left = edges
    return (top is not None and bottom is not None and bottom <= top) or \
        (left is not None and right is not None and right <= left)


def _empty_clip_path(value: str | None) -> bool:
    """A ``clip-path`` shape with no area: ``inset`` of 50% from both sides, a zero radius, one point."""
    m = _SHAPE.search(value) if value else None
    if m is None:
        return False
    shape, args = m.group(1), m.group(2).split(" round ")[0]
    if shape == "inset":
        sides = ["0%" if v in ("0", "0px") else v for v in args.split()]
        if not 1 <= len(sides) <= 4 or not all(v.endswith("%") for v in sides):
            return False  # lengths: how much is left depends on the box's size, which we do not know
        # the margin shorthand: 1, 2, 3 or 4 values for top, right, bottom, left
        top, right, bottom, left = (float(sides[i][:-1]) for i in _SHORTHAND_SIDES[len(sides)])
        return top + bottom >= 100 or right + left >= 100
    radii = args.split(" at ")[0].split()
    if shape in ("circle", "ellipse"):
        sizes = [_px(r) if not r.endswith("%") else float(r[:-1]) for r in radii]
        return bool(sizes) and any(s is not None and s <= 0 for s in sizes)
    points = {" ".join(p.split()) for p in args.split(",")}
    return len(points) == 1 and "," in args  # polygon: every vertex the same point


_RECT = re.compile(r"rect\(([^)]*)\)")
_SHAPE = re.compile(r"^(inset|circle|ellipse|polygon)\(([^)]*)\)")
_TINY_BOX_PX = 1.0
# Elements laid out inline (or as table cells) unless a style says otherwise: a width or height
# does not apply to them (a cell's is a minimum), nor does overflow, so a tiny box hides nothing.
_INLINE_TAGS = frozenset({
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "label",
    "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "tt", "u", "var",
    "td", "th", "tr",
})
_NOT_A_BOX = frozenset({"inline", "contents", "table-cell", "table-row", "table-row-group", "table-column"})
_SHORTHAND_SIDES = {1: (0, 0, 0, 0), 2: (0, 1, 0, 1), 3: (0, 1, 2, 1), 4: (0, 1, 2, 3)}


def hidden_by_style(node: LexborNode, style: str) -> str | None:
    """Why the element's inline style hides it from a reader, or None."""
    return hiding_reason(declarations(style), lambda: _background(node), node.tag or "")


def _is_box(decls: Mapping[str, str], tag: str) -> bool:
    """Whether the element is a block-level box, which a width, height or overflow applies to."""
    if decls.get("position") in ("absolute", "fixed") or decls.get("float") in ("left", "right"):
        return True  # both make any element a block
    display = decls.get("display")
    return display not in _NOT_A_BOX if display else tag not in _INLINE_TAGS


def hiding_reason(decls: Mapping[str, str], background: Callable[[], Colour | None], tag: str = "div") -> str | None:
    """Why these declarations (lower-cased, the winners for one element ``tag``) hide it, or None.

    ``background`` gives the nearest opaque background at or above the element; it is called only
    when the element declares a ``color``.
    """
    if decls.get("display") == "none":
        return "display:none"
    if decls.get("visibility") in ("hidden", "collapse"):
        return "visibility:hidden"
    opacity = decls.get("opacity")
    if opacity is not None:
        try:
            level = float(opacity[:-1]) / 100 if opacity.endswith("%") else float(opacity)
        except ValueError:
            level = 1.0
        if level <= 0.05:
            return "opacity:0"
    if ("font-size" in decls and _tiny_font(decls["font-size"], False)) or \
            ("font" in decls and _tiny_font(decls["font"], True)):
        return "font-size:0"
    for prop in ("left", "top", "text-indent"):
        offset = _length(decls.get(prop))
        if offset is not None and offset <= -999:
            return f"{prop} off-screen"
    if decls.get("position") in ("absolute", "fixed") and _empty_rect(decls.get("clip")):
        return "clip:rect(0)"
    if _empty_clip_path(decls.get("clip-path")):
        return "clip-path:0"
    overflow = decls.get("overflow", "").split()
    if overflow and all(v in ("hidden", "clip") for v in overflow) and _is_box(decls, tag):
        for prop in ("height", "max-height", "width", "max-width"):
            size = _px(decls.get(prop))
            if size is not None and size <= _TINY_BOX_PX:
                return "height:0" if "height" in prop else "width:0"
    colour = parse_colour(decls["color"]) if "color" in decls else None
    if colour is not None:
        if colour[3] <= 0.05:
            return "color:transparent"
        behind = background()
        if behind is not None and same_colour(colour, behind):
            return "color same as background"
    return None
