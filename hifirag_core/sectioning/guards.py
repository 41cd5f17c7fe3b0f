"""Input guards: refuse, before parsing, pages whose parse would take unbounded time.

An HTML tree builder looks down its stack of open elements for block-level start tags (to close
an open <p>, a <li>, ...), so its work grows with (block tags x nesting depth): lexbor takes 0.3 s
for 10,000 nested divs, 5 s for 40,000, and a 10 MB page could nest 2 million. ``nesting_work``
estimates that product from the raw bytes. Inline tags (span, a, b) are left out: they do not
trigger those scans (40,000 nested spans parse in 0.2 s), and pages of highlighted code hold tens
of thousands of them, which would make the scan itself cost more than the parse.
"""

from __future__ import annotations

import re

# Block containers that nest, and block elements whose start tag scans the stack but that close
# themselves (a long list of unclosed <li> or <p> is flat, not deep).
_NESTING = ("div|section|article|aside|nav|header|footer|main|blockquote|center|details|dialog|dir|"
            "dl|fieldset|figure|figcaption|form|hgroup|menu|ol|ul|table|address|search")
_FLAT = "p|li|dd|dt|tr|td|th|h[1-6]|pre|listing|summary|caption|tbody|thead|tfoot"
_TAG = re.compile(rb"<(/?)(" + f"{_NESTING}|{_FLAT}".encode() + rb")(?=[\s>/])", re.IGNORECASE)
_FLAT_NAMES = frozenset(
    b"p li dd dt tr td th h1 h2 h3 h4 h5 h6 pre listing summary caption tbody thead tfoot".split()
)


def nesting_work(data: bytes, budget: int) -> int:
    """Sum over block start tags of the nesting depth they open at; stops counting past ``budget``.

    Returns 0 without scanning when the page has too few tags to reach the budget at all.
    """
    tags = data.count(b"<")
    if tags * tags // 2 <= budget:
        return 0
    depth = 0
    work = 0
    for closing, name in _TAG.findall(data):
        if closing:
            if name.lower() not in _FLAT_NAMES:
                depth = max(0, depth - 1)
            continue
        work += depth
        if work > budget:
            break
        if name.lower() not in _FLAT_NAMES:
            depth += 1
    return work
