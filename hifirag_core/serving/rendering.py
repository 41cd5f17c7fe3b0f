"""An answer's Markdown as people read it, made safe: the one renderer of the pages and the rendered stream.

Markdown goes through markdown-it-py's ``js-default`` preset with raw HTML off (``<b>`` in an answer is shown
as text), images off (an answer never loads anything), and its own link check (no ``javascript:``, ``vbscript:``,
``file:`` or ``data:``); the HTML then goes through nh3 (the ammonia sanitiser) with an allow-list of tags,
attributes and URL schemes. Nothing is escaped by hand: were the first step ever to let markup through, the
second drops it, and the pages' Content-Security-Policy would still refuse to run it.

Two additions to plain Markdown:

* **Citation markers.** ``[k]`` after a sentence (``render_citations``) becomes a link to the k-th cited URL
  when the citations are known (``[k]`` is ``citations[k - 1]``), else a plain marker; never inside code.
* **Sentences of the inspector.** The citation ledger's sentences are found in the answer's text (their
  block markers such as ``-``, ``>``, ``#`` are optional, as a list item's or a quote's text is read without
  them) and each becomes a link that selects it. A sentence spanning a heading and a paragraph gets a link
  in each; a sentence in a code block makes the whole block (its lines kept) the link. A sentence not found
  is returned apart, so the page can still list it.

The links are placed by a core rule between block and inline parsing: it puts sentinel characters into the
inline text around each sentence, and the text renderer turns them into the links. Sentinel characters in
the answer itself are removed first, so a page's text cannot forge a link.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from html import escape
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

from hifirag_core.serving.contract import STEP_SEPARATOR

# Sentinels: punctuation (Unicode class P), so that a delimiter run beside one still opens or closes emphasis.
_OPEN, _OPEN_END, _CLOSE, _CLOSE_END = "\u2e20", "\u2e21", "\u2e22", "\u2e23"
_SENTINELS = re.compile(f"[{_OPEN}{_OPEN_END}{_CLOSE}{_CLOSE_END}]")
_PIECE = re.compile(f"{_OPEN}(\\d+){_OPEN_END}|{_CLOSE}(\\d+){_CLOSE_END}")
_MARKER = re.compile(r"(?<!\w)\[(\d{1,3})\]")  # "[2]" after a sentence; "list[2]" is not one
# Tokens of a ledger sentence that the Markdown parser reads as block syntax, absent from the inline text.
_BLOCK_TOKEN = re.compile(r"(?:>+|#{1,6}|[-*+]|\d{1,9}[.)]|\|)")
_SCHEMES = ("http://", "https://")

ALLOWED_TAGS = {
    "p",
    "br",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "sup",
    "span",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "class", "id", "title"},
    "code": {"class"},
    "span": {"class", "title"},
    "sup": {"class"},
    "ol": {"start"},
}
ALLOWED_SCHEMES = {"http", "https", "mailto"}


@dataclass(frozen=True)
class LedgerSentence:
    """A sentence of the citation ledger as the inspector links it."""

    index: int
    text: str
    markers: tuple[int, ...] = ()


@dataclass
class RenderedAnswer:
    html: str
    missing: list[int] = field(default_factory=list)  # ledger sentences not found in the text
    # The selected sentence as the answer writes it, rendered: a code block with its lines (the ledger's text of
    # a sentence is flattened to one line), inline code and emphasis as in the answer; None if not found.
    selected_html: str | None = None


def _markdown() -> MarkdownIt:
    md = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.core.ruler.after("block", "ledger_sentences", _place_sentences)
    md.add_render_rule("text", _render_text)
    md.add_render_rule("code_inline", _render_code_inline)
    md.add_render_rule("link_open", _link_open(md.renderer.renderToken))
    md.add_render_rule("link_close", _link_close(md.renderer.renderToken))
    fence, indented = md.renderer.rules["fence"], md.renderer.rules["code_block"]
    md.add_render_rule("fence", _linked_block(fence))
    md.add_render_rule("code_block", _linked_block(indented))
    return md


def render_markdown(markdown: str | None, citations: Sequence[str] | None = None) -> str:
    """Safe HTML of a report or a step; ``[k]`` links to ``citations[k - 1]`` when the citations are given."""
    if not markdown:
        return ""
    env: dict[str, Any] = {"citations": list(citations) if citations is not None else None}
    return sanitise(_MD.render(_SENTINELS.sub("", markdown), env))


def render_answer(
    text: str | None,
    sentences: Sequence[LedgerSentence],
    selected: int | None = None,
    cited: set[int] | None = None,
) -> RenderedAnswer:
    """The inspector's answer: ``text`` rendered, each ledger sentence a link to ``?s=<index>``."""
    if not text:
        return RenderedAnswer("", [s.index for s in sentences])
    env: dict[str, Any] = {
        "sentences": list(sentences),
        "selected": selected,
        "cited": cited if cited is not None else {s.index for s in sentences if s.markers},
        "pieces": [],
        "found": set(),
        "sources": {},
    }
    html = sanitise(_MD.render(_SENTINELS.sub("", text), env))
    source = env["sources"].get(selected) if selected is not None else None
    return RenderedAnswer(html, [s.index for s in sentences if s.index not in env["found"]],
                          render_markdown(textwrap.dedent(source)) if source else None)


def sanitise(html: str) -> str:
    """The allow-list: the tags Markdown makes, links to http(s) and mailto only, no style or event attribute."""
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=ALLOWED_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


# --- placing the ledger's sentences -------------------------------------------------------------------------


def _sentence_pattern(sentence: str) -> re.Pattern[str] | None:
    tokens = sentence.split()
    if not any(not _BLOCK_TOKEN.fullmatch(t) for t in tokens):
        return None
    items = [f"(?:{re.escape(t)})?" if _BLOCK_TOKEN.fullmatch(t) else re.escape(t) for t in tokens]
    return re.compile(r"\s*".join(items))


def _place_sentences(state: StateCore) -> None:
    sentences: list[LedgerSentence] | None = state.env.get("sentences")
    if not sentences:
        return
    lines = state.src.split("\n")
    units: list[tuple[Any, int, int]] = []  # (token, start, end) in the joined text
    parts: list[str] = []
    at = 0
    for token in state.tokens:
        if token.type == "inline":
            text = token.content
        elif token.type in ("fence", "code_block") and token.map:
            text = "\n".join(lines[token.map[0] : token.map[1]])
        else:
            continue
        units.append((token, at, at + len(text)))
        parts.append(text)
        at += len(text) + 1
    joined = "\n".join(parts)
    inserts: dict[int, list[tuple[int, str]]] = {}  # id(token) -> (position, sentinel)
    pieces: list[tuple[int, bool, bool]] = state.env["pieces"]  # (sentence, first piece, last piece)
    cursor = 0
    for sentence in sentences:
        pattern = _sentence_pattern(sentence.text)
        found = pattern.search(joined, cursor) if pattern else None
        if found is None:
            continue
        state.env["found"].add(sentence.index)
        cursor = found.end()
        start = found.start()
        while start > 0 and joined[start - 1] in " \t":  # a block's indentation (in a list item) goes with it
            start -= 1
        state.env["sources"][sentence.index] = joined[start : found.end()]
        mine: list[int] = []
        blocks: list[Any] = []
        for token, start, end in units:
            lo, hi = max(found.start(), start), min(found.end(), end)
            if lo >= hi:
                continue
            if token.type != "inline":
                blocks.append(token)
                continue
            local = token.content[lo - start : hi - start]
            lo += len(local) - len(local.lstrip())
            hi -= len(local) - len(local.rstrip())
            if lo >= hi:
                continue
            mine.append(len(pieces))
            pieces.append((sentence.index, False, False))
            inserts.setdefault(id(token), []).extend(
                [
                    (lo - start, f"{_OPEN}{mine[-1]}{_OPEN_END}"),
                    (hi - start, f"{_CLOSE}{mine[-1]}{_CLOSE_END}"),
                ]
            )
        # a sentence without text outside code is anchored at its first block
        for n, token in enumerate(blocks):
            token.meta.setdefault("sentences", []).append((sentence.index, n == 0 and not mine))
        if mine:
            pieces[mine[0]] = (sentence.index, True, pieces[mine[0]][2])
            pieces[mine[-1]] = (sentence.index, pieces[mine[-1]][1], True)
    for token, _, _ in units:
        # inserted from the end; at one place the opening sentinel goes in first, so the closing one precedes it
        for position, mark in sorted(
            inserts.get(id(token), []), key=lambda x: (x[0], x[1][0] == _OPEN), reverse=True
        ):
            token.content = token.content[:position] + mark + token.content[position:]


def _sentence_open(env: dict[str, Any], index: int, first: bool, extra: str = "") -> str:
    classes = ["sentence", *([extra] if extra else [])]
    if env.get("selected") == index:
        classes.append("selected")
    if index not in env["cited"]:
        classes.append("uncited")
    anchor = f' id="sentence-{index}"' if first else ""
    return f'<a class="{" ".join(classes)}"{anchor} href="?s={index}#evidence">'


def _sentence_markers(env: dict[str, Any], *indices: int) -> str:
    """The markers of these sentences, each source once."""
    numbers = [m for s in env["sentences"] if s.index in indices for m in s.markers]
    return "".join(f'<sup class="marker">[{m}]</sup>' for m in dict.fromkeys(numbers))


# --- rendering ---------------------------------------------------------------------------------------------


def _render_text(self, tokens, idx, options, env) -> str:
    text = escape(tokens[idx].content, quote=False)
    if "sentences" not in env:  # a report or a step: its [k] markers; an inspected answer's text has none
        text = _MARKER.sub(lambda m: _cite(m, env.get("citations")), text)
    if "pieces" not in env:
        return _SENTINELS.sub("", text)

    def piece(m: re.Match[str]) -> str:
        number = int(m.group(1) or m.group(2))
        if number >= len(env["pieces"]):
            return ""
        index, first, last = env["pieces"][number]
        if m.group(1) is not None:
            return _sentence_open(env, index, first)
        return (_sentence_markers(env, index) if last else "") + "</a>"

    return _PIECE.sub(piece, text)


def _cite(m: re.Match[str], citations: list[str] | None) -> str:
    k = int(m.group(1))
    if citations and 1 <= k <= len(citations) and citations[k - 1].startswith(_SCHEMES):
        url = escape(citations[k - 1])
        return f'<a class="cite" href="{url}" title="source {k}: {url}">[{k}]</a>'
    return f'<span class="cite">[{k}]</span>'


def _render_code_inline(self, tokens, idx, options, env) -> str:
    return f"<code>{escape(_SENTINELS.sub('', tokens[idx].content), quote=False)}</code>"


def _link_open(default):
    """In the inspector a link inside a sentence (itself a link) is shown as its text, its URL in the title."""

    def render(self, tokens, idx, options, env) -> str:
        if "pieces" not in env:
            return default(tokens, idx, options, env)
        return f'<span class="link" title="{escape(_SENTINELS.sub("", tokens[idx].attrGet("href") or ""))}">'

    return render


def _link_close(default):
    def render(self, tokens, idx, options, env) -> str:
        return "</span>" if "pieces" in env else default(tokens, idx, options, env)

    return render


def _linked_block(default):
    """A code block as markdown-it renders it (its lines kept), the link of the sentences it holds around it."""

    def render(self, tokens, idx, options, env) -> str:
        html = default(tokens, idx, options, env)
        indices = tokens[idx].meta.get("sentences") if tokens[idx].meta else None
        if not indices or "pieces" not in env or not html.startswith("<pre><code"):
            return html
        (first, anchor), *more = indices
        markers = _sentence_markers(env, *(i for i, _ in indices))
        also = "".join(f"{_sentence_open(env, i, own)}(sentence {i + 1})</a>" for i, own in more)
        inner = html.removeprefix("<pre>").removesuffix("</pre>\n")
        return f"<pre>{_sentence_open(env, first, anchor, 'code')}{inner}{markers}</a>{also}</pre>\n"

    return render


_MD = _markdown()


# --- the rendered stream ------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _step_html(step: str) -> str:
    return render_markdown(step)


def with_html(event: bytes) -> bytes:
    """One ``data: {json}`` message of ``/run`` with its Markdown also rendered (ours, beside the contract's
    fields): ``steps_html``, a list with each step's HTML, and ``final_report_html`` (``[k]`` linked once
    the last message names the citations). Rendered on the server for every message, partial or whole, so
    the page needs no Markdown library or sanitiser of its own and shows exactly what the inspector shows."""
    text = event.decode("utf-8")
    if not text.startswith("data: "):
        return event
    message = json.loads(text[len("data: ") :])
    steps = [s for s in (message.get("intermediate_steps") or "").split(STEP_SEPARATOR) if s.strip()]
    message["steps_html"] = [_step_html(s) for s in steps]
    message["final_report_html"] = render_markdown(message.get("final_report"), message.get("citations"))
    return b"data: " + json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n\n"


async def rendered_stream(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A ``/run`` stream whose every message carries its rendered HTML too (``"render": "html"``)."""
    async for event in events:
        yield with_html(event)
