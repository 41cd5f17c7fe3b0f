"""The sectioning rules as data: what is chrome, where content lives, what counts as a heading.

Nothing here names a site. Every rule is a structural convention of HTML (tags, ARIA roles) or a
class/id naming convention that many sites and generators share; ``boilerplate.py`` compiles the
class/id rules into CSS selectors once, so matching runs inside the HTML parser, not in Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class NameRule:
    """A class/id naming convention.

    ``token``: the exact word; ``part``: the word or a -/_ piece of one; ``suffix``: the word or the
    last -/_ piece of one (``page-toc`` but not ``toc-backref``); ``substring``: anywhere.
    """

    name: str
    mode: str = "part"
    attrs: tuple[str, ...] = ("class", "id")


# Elements whose content is never text a reader sees: dropped before anything else.
# (Void elements such as <input> and <img> hold no text and need no removal.)
INVISIBLE_TAGS: tuple[str, ...] = (
    "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object",
    "button", "select", "textarea", "dialog",
)

# Chrome blocks: removed wherever they are, and the block that held them is removed too when what
# is left of it is a few words with no heading (a logo line, a tagline beside a menu).
CHROME_TAGS: tuple[str, ...] = ("nav",)
CHROME_ROLES: tuple[str, ...] = (
    "navigation", "search", "banner", "contentinfo", "menu", "menubar", "toolbar", "tablist",
    "dialog", "alertdialog",
)
CHROME_NAMES: tuple[NameRule, ...] = (
    NameRule("nav"), NameRule("navbar"), NameRule("navigation"), NameRule("navheader"),
    NameRule("navfooter"), NameRule("menu"), NameRule("mainmenu"), NameRule("submenu"),
    NameRule("searchmenu"), NameRule("searchbox"), NameRule("sidebar", "substring"),
    NameRule("sidenav"), NameRule("toc", "suffix"), NameRule("table-of-contents", "token"), NameRule("toctree-wrapper", "token"),
    NameRule("breadcrumb", "substring"), NameRule("breadcrumbs"), NameRule("pagination"),
    NameRule("pager"), NameRule("related", "token"), NameRule("footer", "token"),
    NameRule("header", "token"), NameRule("masthead"), NameRule("skip-link", "token"),
    NameRule("skiplink"), NameRule("cookie", "substring"), NameRule("consent", "substring"),
    NameRule("gdpr", "substring"), NameRule("share", "token"), NameRule("social", "token"),
    NameRule("advert", "substring"), NameRule("newsletter", "substring"),
    NameRule("mobile-nav", "token"), NameRule("sphinxsidebar"),
)
# Only these elements are tested against CHROME_NAMES (with a class or id): chrome is a block.
# (Definition lists and tables are left out: API docs hold thousands of classed ones, and the
# chrome among them sits inside a chrome <div> anyway.)
CHROME_CANDIDATE_TAGS: tuple[str, ...] = ("div", "section", "ul", "ol", "form", "p")
# ids are tested on these only: sectioning generators give every <section> an id from its heading.
CHROME_ID_TAGS: tuple[str, ...] = ("div",)
# A block named like chrome that holds more than this share of the page's text is content.
CHROME_MAX_SHARE = 0.4
# Links that say they are navigation (rel), removed with the block they leave behind.
CHROME_RELS: frozenset[str] = frozenset({"prev", "previous", "next"})

# Decorations inside content: removed alone (their parent stays, even when short).
# Permalink marks (¶ # § 🔗) after headings need no rule: HEADING_TRAILING_MARKS strips them.
DECORATION_NAMES: tuple[NameRule, ...] = (
    NameRule("sr-only", "token"), NameRule("visually-hidden", "token"),
    NameRule("screen-reader-text", "token"),
)

# header/footer elements are site chrome unless they sit inside the article they introduce.
SECTIONING_CHROME_TAGS: tuple[str, ...] = ("header", "footer", "aside")
CONTENT_CONTAINER_TAGS: frozenset[str] = frozenset({"article", "main"})

# Where the main content says it is: <main> or role="main" first, then a lone <article>.
MAIN_TAGS: frozenset[str] = frozenset({"main", "article"})

# Content-root descent: step into the child holding most of the text while its siblings hold at
# most this share of it and no heading of their own; never more than this many steps.
ROOT_SIBLING_SHARE = 0.25
ROOT_MAX_STEPS = 60
# Children that can be the content root; a lone <p> or <table> never is.
ROOT_CONTAINER_TAGS: frozenset[str] = frozenset({
    "div", "section", "article", "main", "font", "center", "form", "span", "td", "tbody", "tr",
    "table",
})
# A declared main with less than this share of the page's text is not trusted (fall back to body),
# unless it holds at least ROOT_TRUSTED_CHARS characters of text.
ROOT_MIN_SHARE = 0.2
ROOT_TRUSTED_CHARS = 2000

# A block that lost chrome children and keeps at most this many words (and no heading) is residue.
RESIDUE_MAX_WORDS = 25

# Blocks at the edges of the content (before the first heading, after the last text) that are
# mostly links, or short lines of site furniture, are dropped.
EDGE_LINK_DENSITY = 0.5
EDGE_MAX_WORDS = 60
EDGE_MAX_CHARS = 600
EDGE_MAX_DEPTH = 3  # how far into wrappers at the edge the pruning looks
EDGE_CHROME_TEXT = re.compile(
    r"^\s*(?:this page (?:was )?last (?:modified|updated)|last (?:modified|updated)|page last"
    r"|copyright\b|©|\(c\) \d{4}|all rights reserved|powered by|created using|skip to (?:main )?content"
    r"|back to top|previous\s*(?:topic|page|\|)|next\s*(?:topic|page|\|))",
    re.IGNORECASE,
)

HEADING_TAGS: dict[str, int] = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
MAX_LEVEL = 4  # deeper headings become bold lines inside their h4 section
# An h3 inside a list or a table cell is a label (DocBook's "Note" boxes in a definition list) and
# stays a bold line; an h1/h2 there means an unclosed list swallowed the page, which is walked
# as page structure instead.
STRUCTURAL_HEADINGS: frozenset[str] = frozenset({"h1", "h2"})

# Pseudo-headings: elements that act as headings without being h1-h6.
PSEUDO_HEADING_CLASS_LEVELS: dict[str, int] = {"h1": 1, "h2": 2, "h3": 3, "h4": 4}
PSEUDO_HEADING_TAGS: frozenset[str] = frozenset({"div", "p"})
# A page title written as a styled block; the real headings under it move one level down.
PSEUDO_TITLE_NAMES: tuple[NameRule, ...] = (
    NameRule("fancy_title", "token", ("class",)), NameRule("page-title", "token", ("class",)),
    NameRule("pagetitle", "token", ("class",)), NameRule("doc-title", "token", ("class",)),
    NameRule("document-title", "token", ("class",)), NameRule("entry-title", "token", ("class",)),
    NameRule("post-title", "token", ("class",)), NameRule("article-title", "token", ("class",)),
)
# A line of only bold text is a heading only on pages that have no real heading at all.
BOLD_LINE_MAX_WORDS = 14
HEADING_TRAILING_MARKS = "¶#§🔗"

# Tags as the Markdown renderer sees them.
BLOCK_TAGS: frozenset[str] = frozenset({
    "p", "pre", "ul", "ol", "dl", "table", "blockquote", "hr", "figure", "figcaption", "address",
    "details", "summary", "caption", "center", "div", "section", "article", "main", "aside",
    "header", "footer", "li", "dt", "dd", "tr", "td", "th", "tbody", "thead", "tfoot", "form",
    "fieldset", "legend", "body", "html", "h1", "h2", "h3", "h4", "h5", "h6", "font", "listing",
    "xmp", "plaintext", "hgroup", "search",
})
STRONG_TAGS: frozenset[str] = frozenset({"strong", "b"})
INLINE_TAGS: frozenset[str] = frozenset({
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "i", "ins",
    "kbd", "mark", "q", "rp", "rt", "ruby", "s", "samp", "small", "span", "strike", "strong", "sub",
    "sup", "time", "tt", "u", "var", "nobr", "label", "output", "meter", "progress",
})
SKIP_INLINE_TAGS: frozenset[str] = frozenset({"img", "wbr", "picture", "source", "track", "area"})
LANGUAGE_CLASS = re.compile(r"(?:^|\s)(?:language|lang|highlight|brush:?)-?([A-Za-z0-9_+#.-]+)")

# Bounds that keep hostile input cheap.
MAX_RENDER_DEPTH = 120  # deeper inline/list nesting is flattened to plain text
MAX_TABLE_COLUMNS = 40
