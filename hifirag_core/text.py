"""Small text utilities shared by the stages: words, sentences, whitespace, and the prose of Markdown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_WORD = re.compile(r"\w+(?:[-'’.]\w+)*", re.UNICODE)
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! ? (optionally followed by quotes or brackets) before whitespace and an
# upper-case letter, a digit, a quote or a bracket. Abbreviations and version numbers ("e.g. x",
# "3.11 is") do not match because the next character is lower-case or there is no space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[A-Z0-9\"'“‘(\[])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Mrs.", "Dr.", "St.", "No.", "Fig.")

# Function words dropped when building keyword queries and when matching terms.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "also", "may", "might", "must", "shall", "one", "get", "got", "use", "used", "using", "way", "ways"]
)


# Phrases that say how to answer, not what to look for ("explain like I'm five", personas).
FILLER = re.compile(
    r"\b(?:explain(?: it)?(?: to me)? like (?:i'?m|i am) (?:five|5|a child)|eli5|in simple terms|"
    r"step[- ]by[- ]step|in detail|briefly|please|can you|could you|would you|tell me|"
    r"i (?:want|need|would like) to know|give me|help me understand|"
    r"as an? [^,.;:]{1,80}?(?:,|\bwith [^,.;:]{1,40}?,))",
    re.IGNORECASE,
)
INTENT_WORDS = frozenset("explain describe tell know want need give help show understand example examples".split())


def question_keywords(question: str) -> list[str]:
    """The words of a question that say what it is about: no function words, no "explain like I'm five"."""
    terms: list[str] = []
    for word in words(FILLER.sub(" ", question)):
        low = word.lower()
        if low in STOPWORDS or low in INTENT_WORDS or low in (t.lower() for t in terms):
            continue
        terms.append(word)
    return terms


def section_preview(heading_path: tuple[str, ...] | list[str], text: str | None, chars: int) -> str:
    """A section as its ranker reads it: the heading path and the first ``chars`` characters of the text."""
    path = " > ".join(heading_path) or "(untitled)"
    return f"{path}: {(text or '')[:chars]}"


def normalize_ws(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def content_terms(text: str) -> list[str]:
    """Lower-cased words without stopwords, in order, duplicates kept."""
    return [w for w in (t.lower() for t in _WORD.findall(text)) if w not in STOPWORDS]


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences; each line of a list or code block stays its own unit."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        block = normalize_ws(block)
        if not block:
            continue
        parts = _SENTENCE_END.split(block)
        merged: list[str] = []
        for part in parts:
            if merged and merged[-1].endswith(_ABBREVIATIONS):
                merged[-1] = f"{merged[-1]} {part}"
            else:
                merged.append(part)
        out.extend(p.strip() for p in merged if p.strip())
    return out


# --- the prose of a section's Markdown ------------------------------------------------------------

BlockKind = Literal["paragraph", "list_item", "table", "code", "heading", "term", "quote"]
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TERM = re.compile(r"^\*\*.+\*\*$")
# A sentence that starts by pointing back at the one before it ("This can be a value or a
# callable", "However, ...", "For example, ...") only makes sense with it.
_DEPENDENT = re.compile(
    r"^(?:(?:It|This|That|These|Those|Such|Also|However|Therefore|Thus|"
    r"Hence|But|And|Or|Nor|So|Yet|Otherwise|Instead|Similarly|Likewise|Moreover|Furthermore|Nevertheless|"
    r"Nonetheless|Conversely|Alternatively|Then|Here|Both|Neither|Either)\b|"
    r"(?:In (?:this|that|such|these|those|either|both) (?:case|cases|way|situation)|For (?:example|instance)|"
    r"As a result|In addition,|On the other hand|The (?:former|latter|above|same)|Because of this)\b)"
)
# "This document covers ...", "This module provides ...": the page or section the sentence is in, not
# the sentence before it.
_SELF_REFERENCE = re.compile(
    r"^(?:This|These) (?:document|documentation|module|modules|section|sections|chapter|page|tutorial|guide|"
    r"howto|how-to|article|package|library|release|version|FAQ|site|reference|manual|appendix|part)\b")
_SENTENCE_CLOSE = re.compile(r"[.!?][\"'”’)\]]*$")
# A sentence that only leads into what follows it: "... use this command:", "... an argument list, e.g."
_INTRODUCES = re.compile(r"(?::|\b(?:e\.g\.|i\.e\.|for example|for instance|as follows|like this|such as)[.,:]?)$",
                         re.IGNORECASE)
MIN_PROSE_WORDS = 4
# What an introducing sentence ("... use the following command:") may bring along, quoted whole; a
# longer block is left out with it. The FAQ answers quote code examples of up to about 25 lines.
MAX_QUOTED_CODE_LINES = 25
MAX_QUOTED_ITEMS = 8
MAX_QUOTED_ITEM_WORDS = 30
# "It's best to ...", "It is possible to ...": "it" points at nothing.
_IMPERSONAL_IT = re.compile(
    r"^It(?:['’]s| is| was)\s+(?:(?:also|often|usually|generally|probably|not|now|still|very)\s+)*"
    r"(?:best|better|possible|impossible|recommended|important|necessary|common|easy|hard|difficult|safe|"
    r"a good idea|worth|likely|unlikely|true|false|no longer)\b")


@dataclass(frozen=True)
class Block:
    """One block of a section's Markdown (as ``hifirag_core.sectioning.markdown`` renders it)."""

    kind: BlockKind
    text: str


def markdown_blocks(text: str) -> list[Block]:
    """A section's Markdown as blocks: paragraphs, list items, tables, fenced code, headings, terms, quotes.

    A fence that never closes (a section trimmed to fit the context) runs to the end as code.
    """
    blocks: list[Block] = []
    lines = text.split("\n")
    i = 0
    para: list[str] = []

    def close_paragraph() -> None:
        if para:
            blocks.append(Block("paragraph", normalize_ws(" ".join(para))))
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE_OPEN.match(line)
        if fence:
            close_paragraph()
            mark, body = fence.group(1), [line]
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                body.append(lines[i])
                i += 1
            body.append(lines[i] if i < len(lines) else "")
            blocks.append(Block("code", "\n".join(body).strip()))
            i += 1
            continue
        if not stripped:
            close_paragraph()
        elif stripped.startswith("|"):
            close_paragraph()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i].strip())
                i += 1
            blocks.append(Block("table", "\n".join(rows)))
            continue
        elif stripped.startswith("#"):
            close_paragraph()
            blocks.append(Block("heading", stripped.lstrip("#").strip()))
        elif stripped.startswith(">"):
            close_paragraph()
            blocks.append(Block("quote", re.sub(r"^(?:>\s?)+", "", stripped).strip()))
        elif _TERM.match(stripped):
            close_paragraph()
            blocks.append(Block("term", stripped.strip("*").strip()))
        elif _LIST_ITEM.match(line):
            close_paragraph()
            item = [_LIST_ITEM.sub("", line, count=1)]
            i += 1
            # continuation lines are indented under the item (nested lists are items of their own)
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip() \
                    and not _LIST_ITEM.match(lines[i]) and not _FENCE_OPEN.match(lines[i]):
                item.append(lines[i].strip())
                i += 1
            blocks.append(Block("list_item", normalize_ws(" ".join(item))))
            continue
        else:
            para.append(stripped)
        i += 1
    close_paragraph()
    return blocks


def is_prose_sentence(sentence: str, *, introduces: bool = False) -> bool:
    """A sentence a person would read as prose: enough words, function words among them, a closing stop
    (a colon with ``introduces``: the sentence that introduces a code example).

    A table row or navigation run flattened into one line ("Race Pole position Most laps led ...")
    has no function words and no full stop; a code line has neither either.
    """
    tokens = sentence.split()
    if introduces:
        if not _INTRODUCES.search(sentence):
            return False
        if is_dependent(sentence):  # "For example:" introduces as well as a long sentence does
            return True
    elif _INTRODUCES.search(sentence):
        return False
    if len(tokens) < MIN_PROSE_WORDS:
        return False
    function = sum(1 for t in tokens if t.lower().strip(",.;:!?\"'()") in STOPWORDS)
    if introduces or _SENTENCE_CLOSE.search(sentence):
        return function >= 1 and function / len(tokens) >= 0.12
    # No closing stop ("See PEP 308 for more details about conditional expressions"): prose only when
    # it reads like it, which a flattened table row or a navigation run never does.
    return len(tokens) >= 6 and function / len(tokens) >= 0.2 and sentence[-1:].isalnum()


def is_dependent(sentence: str) -> bool:
    """Whether a sentence opens by pointing back at the one before it ("It's best to ..." does not)."""
    text = sentence.lstrip("\"'“‘(")
    return bool(_DEPENDENT.match(text)) and not _IMPERSONAL_IT.match(text) and not _SELF_REFERENCE.match(text)


def is_block(unit_part: str) -> bool:
    """Whether a part of a prose unit is a quoted block (code, list or blockquote), not a sentence."""
    return unit_part.startswith(("```", "~~~", "- ", "> "))


def _quoted(blocks: list[Block], start: int) -> tuple[str | None, int]:
    """The block an introducing sentence leads into, quoted whole as Markdown, and the index after it:
    a short code block, a run of short list items, or a run of blockquote lines (else None)."""
    first = blocks[start]
    if first.kind == "code":
        fits = first.text.count("\n") - 1 <= MAX_QUOTED_CODE_LINES
        return (first.text if fits else None), start + 1
    end = start
    while end < len(blocks) and blocks[end].kind == first.kind:
        end += 1
    items = blocks[start:end]
    if first.kind == "list_item" and len(items) <= MAX_QUOTED_ITEMS and all(
            word_count(b.text) <= MAX_QUOTED_ITEM_WORDS for b in items):
        return "\n".join(f"- {b.text}" for b in items), end
    if first.kind == "quote":
        return "\n".join(f"> {b.text}" for b in items if b.text), end
    return None, start


def prose_units(text: str) -> list[tuple[str, ...]]:
    """The prose of a section's Markdown as readable units, in order.

    Tables, headings, signatures, navigation lists and code never count as sentences. A sentence that
    points back at the one before it comes in a unit together with it (or is left out when that one is not
    prose), and the antecedent is a unit of its own as well, so a writer may take it alone;
    its antecedent is the sentence just before it in its paragraph or list item, or the last sentence of
    the paragraph just before, when nothing but a paragraph break lies between. A sentence that ends in
    a colon (or "e.g.") is kept only with what it introduces, quoted whole as the unit's last part: a
    short code block, a short list, or a blockquote (a dependent one with its antecedent, which stays a
    unit of its own as well).
    """
    blocks = markdown_blocks(text)
    units: list[list[str]] = []
    open_unit: list[str] | None = None  # the unit a dependent sentence may join
    intro: list[str] | None = None  # sentences ending in a colon, waiting for what they introduce
    i = 0
    while i < len(blocks):
        block = blocks[i]
        if intro is not None and block.kind in ("code", "list_item", "quote"):
            quoted, after = _quoted(blocks, i)
            if quoted:  # the antecedent of a dependent intro stays a unit of its own too
                units.append([*intro, quoted])
                intro = open_unit = None
                i = after
                continue
        intro = None
        if block.kind not in ("paragraph", "list_item", "quote"):
            open_unit = None
            i += 1
            continue
        if block.kind != "paragraph":
            open_unit = None  # a list item or a quote does not continue the paragraph before it
        for sentence in split_sentences(block.text):
            intro = None
            if is_prose_sentence(sentence, introduces=True):
                if not is_dependent(sentence):
                    intro = [sentence]
                elif open_unit is not None:
                    intro = [*open_unit, sentence]
                open_unit = None
                continue
            if not is_prose_sentence(sentence):
                open_unit = None
                continue
            if is_dependent(sentence):
                if open_unit is not None:  # with its antecedent; the antecedent alone stays a unit too
                    open_unit = [*open_unit, sentence]
                    units.append(open_unit)
                continue  # no antecedent: left out
            open_unit = [sentence]
            units.append(open_unit)
        if block.kind != "paragraph":
            open_unit = None
        i += 1
    return [tuple(u) for u in units]
