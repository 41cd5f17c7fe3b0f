"""Pure, tolerant parsers for the model replies of prompts A.1, A.2, A.3 and A.5.

Real models wrap JSON in code fences or prose, quote numbers, repeat or invent items, leave
trailing commas and use single quotes. Each parser accepts those quirks, drops what cannot be
used and says so: a :class:`ParseResult` is ``ok`` when the reply held a usable answer (a valid,
possibly empty, list with no item or at least one usable item) and carries the reasons for every
dropped item. ``ok`` is False when no JSON list could be found, or every item was unusable;
the caller then applies its configured fallback and records ``parse_error``.

Nothing here evaluates model output as code: ``ast.literal_eval`` only reads literals.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

T = TypeVar("T")

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_REASONING = re.compile(r"<(think|thinking|reasoning|thought)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_REASONING_END = re.compile(r"^.*?</(think|thinking|reasoning|thought)\s*>", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")
_INT_LIKE = re.compile(r"^\s*[\[(#]?\s*(?:source|section|chunk|url)?\s*[#]?\s*(-?\d+)\s*[\])]?\s*\.?\s*$",
                       re.IGNORECASE)


@dataclass
class ParseResult(Generic[T]):
    """What a parser made of a reply: the usable items and what was dropped and why."""

    value: list[T]
    ok: bool
    found_json: bool
    raw_items: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        """A one-line reason when ``ok`` is False."""
        if self.ok:
            return None
        if not self.found_json:
            return "no JSON list in the reply"
        return "no usable item in the reply: " + "; ".join(self.problems[:5])


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>``-style reasoning blocks that some open models emit.

    A closing tag without its opening one (servers that strip the opening tag) drops everything
    before it; an opening tag that never closes means the reply is all reasoning.
    """
    cleaned = _REASONING.sub("", text)
    if _UNCLOSED_REASONING_END.search(cleaned) and not re.search(r"<(think|thinking|reasoning|thought)\b",
                                                                  cleaned, re.IGNORECASE):
        cleaned = _UNCLOSED_REASONING_END.sub("", cleaned, count=1)
    opening = re.search(r"<(think|thinking|reasoning|thought)\b[^>]*>", cleaned, re.IGNORECASE)
    if opening:
        cleaned = cleaned[: opening.start()]
    return cleaned.strip()


def _candidate_snippets(text: str) -> list[str]:
    """Places a JSON value may hide: fenced blocks first (json-tagged ones first), then the text."""
    fenced = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    ordered = [b for lang, b in fenced if lang in ("json", "json5")] + [b for lang, b in fenced if lang not in ("json", "json5")]
    # An opening fence that never closes (a truncated reply): take what follows it.
    if not fenced and "```" in text:
        ordered.append(re.sub(r"^```[A-Za-z0-9_-]*\n?", "", text[text.index("```"):]))
    ordered.append(text)
    return ordered


def _bracket_spans(text: str, open_ch: str, close_ch: str) -> list[str]:
    """Balanced ``[...]`` (or ``{...}``) substrings, outermost first, ignoring brackets in strings."""
    spans = []
    i = 0
    while (start := text.find(open_ch, i)) != -1:
        depth, quote, escaped = 0, "", False
        for j in range(start, len(text)):
            ch = text[j]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = ""
            elif ch in "\"'":
                # An apostrophe inside a word ("don't") does not open a string.
                if ch == "'" and j > 0 and text[j - 1].isalnum():
                    continue
                quote = ch
            elif ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    spans.append(text[start : j + 1])
                    break
        i = start + 1
    return spans


def loads_lenient(snippet: str) -> Any:
    """JSON, else JSON with trailing commas removed, else a Python literal (single quotes)."""
    for attempt in (snippet, _TRAILING_COMMA.sub(r"\1", snippet)):
        try:
            return json.loads(attempt)
        except (json.JSONDecodeError, ValueError):
            pass
    try:
        return ast.literal_eval(_TRAILING_COMMA.sub(r"\1", snippet))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def extract_json_list(text: str | None, keys: Sequence[str] = ()) -> list[Any] | None:
    """The first JSON list in ``text`` (in fences or prose), or a list under one of ``keys`` in an object."""
    if not text:
        return None
    text = strip_reasoning(text)
    for snippet in _candidate_snippets(text):
        stripped = snippet.strip()
        whole = loads_lenient(stripped) if stripped[:1] in "[{" else None
        if isinstance(whole, list):
            return whole
        if isinstance(whole, dict):
            found = _list_in_object(whole, keys)
            if found is not None:
                return found
        for span in _bracket_spans(snippet, "[", "]"):
            value = loads_lenient(span)
            if isinstance(value, list):
                return value
        for span in _bracket_spans(snippet, "{", "}"):
            value = loads_lenient(span)
            if isinstance(value, dict) and (found := _list_in_object(value, keys)) is not None:
                return found
    return None


def _list_in_object(obj: dict[str, Any], keys: Sequence[str]) -> list[Any] | None:
    """``{"queries": [...]}``: a list under an expected key, or the only list value."""
    for key in keys:
        if isinstance(obj.get(key), list):
            return obj[key]
    lists = [v for v in obj.values() if isinstance(v, list)]
    return lists[0] if len(lists) == 1 else None


# --- A.1: query plan -----------------------------------------------------------------------------


def parse_queries(text: str | None, *, max_queries: int) -> ParseResult[str]:
    """Search queries from a JSON list of strings; blanks and duplicates (case-insensitive) dropped."""
    items = extract_json_list(text, keys=("queries", "search_queries", "query"))
    if items is None:
        return ParseResult([], ok=False, found_json=False)
    out: list[str] = []
    seen: set[str] = set()
    problems: list[str] = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("query") or item.get("q")
        if not isinstance(item, str):
            problems.append(f"not a string: {item!r}")
            continue
        query = " ".join(item.split()).strip("\"' ")
        if not query:
            problems.append("empty query")
            continue
        if query.lower() in seen:
            problems.append(f"duplicate: {query!r}")
            continue
        seen.add(query.lower())
        out.append(query)
    if len(out) > max_queries:
        problems.append(f"{len(out) - max_queries} queries beyond max_queries={max_queries} dropped")
        out = out[:max_queries]
    # An empty plan cannot drive a search: it is a parse failure, not an answer.
    return ParseResult(out, ok=bool(out), found_json=True, raw_items=len(items), problems=problems)


# --- indices: A.3 (0-based section labels) and A.5 (1-based source numbers) ----------------------


def _as_int(item: Any) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float) and item.is_integer():
        return int(item)
    if isinstance(item, str):
        m = _INT_LIKE.match(item)
        if m:
            return int(m.group(1))
    if isinstance(item, dict):
        for key in ("index", "id", "source", "section"):
            if key in item:
                return _as_int(item[key])
    return None


def parse_indices(text: str | None, *, valid: Sequence[int] | range, keys: Sequence[str] = ()) -> ParseResult[int]:
    """Integers from a JSON list, kept in order when they are in ``valid``; duplicates dropped.

    Accepts ``3``, ``"3"``, ``"[3]"``, ``"#3"``, ``3.0`` and ``{"index": 3}``. An empty list is a
    valid answer ("none are useful"); a non-empty list with nothing valid is not.
    """
    items = extract_json_list(text, keys=keys or ("indices", "sections", "sources", "citations"))
    if items is None:
        return ParseResult([], ok=False, found_json=False)
    allowed = set(valid)
    out: list[int] = []
    problems: list[str] = []
    for item in items:
        value = _as_int(item)
        if value is None:
            problems.append(f"not an index: {item!r}")
        elif value not in allowed:
            problems.append(f"out of range: {value}")
        elif value in out:
            problems.append(f"duplicate: {value}")
        else:
            out.append(value)
    ok = not items or bool(out)
    return ParseResult(out, ok=ok, found_json=True, raw_items=len(items), problems=problems)


def parse_section_indices(text: str | None, *, n_sections: int) -> ParseResult[int]:
    """A.3: 0-based indices of the useful sections, most useful first."""
    return parse_indices(text, valid=range(n_sections), keys=("sections", "indices", "useful"))


def parse_source_numbers(text: str | None, *, numbers: Sequence[int]) -> ParseResult[int]:
    """A.5: the ``[n]`` numbers of the sources that support the answer."""
    return parse_indices(text, valid=numbers, keys=("sources", "citations", "indices"))


# --- A.2: URL filter -----------------------------------------------------------------------------

_TRACKING_PARAMS = re.compile(r"^(utm_[a-z]+|fbclid|gclid|ref|ref_src)$", re.IGNORECASE)


def url_match_key(url: str) -> str:
    """A comparison key for URLs: scheme and ``www.`` ignored, host lower-cased, default ports,
    fragments, tracking parameters and trailing slashes removed, percent-escapes decoded."""
    url = url.strip().strip("<>\"'()[]").rstrip(".,;")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    port = parts.port
    if port and port not in (80, 443):
        host = f"{host}:{port}"
    path = unquote(parts.path).rstrip("/")
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                             if not _TRACKING_PARAMS.match(k)))
    return urlunsplit(("", host, path, query, ""))


def parse_url_selection(text: str | None, *, candidate_urls: Sequence[str]) -> ParseResult[int]:
    """A.2: 0-based indices of the chosen URLs, in the model's order.

    A returned URL matches a candidate exactly first, then by :func:`url_match_key`; URLs that
    match no candidate (invented or rewritten beyond recognition) are dropped and reported.
    """
    items = extract_json_list(text, keys=("urls", "selected", "links"))
    if items is None:
        return ParseResult([], ok=False, found_json=False)
    exact = {}
    for i, url in enumerate(candidate_urls):
        exact.setdefault(url.strip(), i)
    normalized: dict[str, int] = {}
    for i, url in enumerate(candidate_urls):
        normalized.setdefault(url_match_key(url), i)
    out: list[int] = []
    problems: list[str] = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("url") or item.get("link")
        if not isinstance(item, str) or not item.strip():
            problems.append(f"not a URL: {item!r}")
            continue
        index = exact.get(item.strip())
        if index is None:
            index = normalized.get(url_match_key(item))
        if index is None:
            problems.append(f"not among the candidates: {item[:120]!r}")
        elif index in out:
            problems.append(f"duplicate: {item[:120]!r}")
        else:
            out.append(index)
    ok = not items or bool(out)
    return ParseResult(out, ok=ok, found_json=True, raw_items=len(items), problems=problems)


# --- ours: the sufficiency check -------------------------------------------------------------------

_SUFFICIENCY_WORDS = {
    "sufficient": "sufficient", "enough": "sufficient", "complete": "sufficient", "answered": "sufficient",
    "yes": "sufficient", "full": "sufficient", "fully answered": "sufficient",
    "partial": "partial", "partially": "partial", "partly": "partial", "incomplete": "partial",
    "partially answered": "partial", "some": "partial",
    "not found": "not_found", "not_found": "not_found", "notfound": "not_found", "none": "not_found",
    "no": "not_found", "insufficient": "not_found", "not answered": "not_found", "missing": "not_found",
}


def _phrases(value: Any) -> list[str]:
    """A list of short phrases from a list, a string ("a; b" or one phrase) or nothing."""
    if value is None:
        return []
    items = value if isinstance(value, list) else re.split(r"\s*[;\n]\s*", str(value))
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("part") or item.get("text") or item.get("query")
        if isinstance(item, str) and " ".join(item.split()).strip("\"'-* "):
            out.append(" ".join(item.split()).strip("\"'-* "))
    return list(dict.fromkeys(out))


def parse_sufficiency(text: str | None) -> ParseResult[tuple[str, list[str], list[str]]]:
    """``{"verdict", "covered", "missing"}`` from a reply: the first JSON object holding a verdict (in
    fences or prose), its value read tolerantly ("Partial", "partially answered", "not found"); covered
    and missing as lists or strings. A verdict of ``sufficient`` with parts missing becomes ``partial``;
    ``partial`` or ``not_found`` with nothing missing is kept but says so in ``problems``."""
    if not text:
        return ParseResult([], ok=False, found_json=False)
    text = strip_reasoning(text)
    found: dict | None = None
    for snippet in _candidate_snippets(text):
        for span in [snippet.strip(), *_bracket_spans(snippet, "{", "}")]:
            value = loads_lenient(span) if span[:1] == "{" else None
            if isinstance(value, dict) and any(k.lower() in ("verdict", "status", "sufficiency") for k in value):
                found = {k.lower(): v for k, v in value.items()}
                break
        if found is not None:
            break
    if found is None:
        return ParseResult([], ok=False, found_json=False)
    raw = str(found.get("verdict", found.get("status", found.get("sufficiency", "")))).strip().lower()
    verdict = _SUFFICIENCY_WORDS.get(" ".join(raw.replace("_", " ").replace("-", " ").split()))
    problems: list[str] = []
    if verdict is None:
        return ParseResult([], ok=False, found_json=True, raw_items=1, problems=[f"unknown verdict: {raw!r}"])
    covered, missing = _phrases(found.get("covered")), _phrases(found.get("missing"))
    if verdict == "sufficient" and missing:
        problems.append("verdict sufficient with parts missing: read as partial")
        verdict = "partial"
    if verdict != "sufficient" and not missing:
        problems.append(f"verdict {verdict} with nothing listed as missing")
    return ParseResult([(verdict, covered, missing)], ok=True, found_json=True, raw_items=1, problems=problems)


# --- ours: a follow-up turn restated (prompts/restate.txt) -------------------------------------------------

_RESTATED_KEYS = ("question", "rewritten", "rewritten_question", "standalone", "standalone_question", "query")
_LABEL = re.compile(r"^\s*(?:\*\*)?\s*(?:(?:rewritten|standalone|full|new)\s+)?question\s*(?:\*\*)?\s*:\s*(?:\*\*)?\s*",
                    re.IGNORECASE)
MAX_RESTATED_CHARS = 1000


def parse_restated(text: str | None) -> ParseResult[str]:
    """The follow-up question restated to stand alone, from ``{"question": "..."}`` (in fences or prose), a JSON
    string or one-item list, or else the reply's first line of text ("Question: ..." labels, quotes and bold
    removed). Empty, or longer than ``MAX_RESTATED_CHARS`` (a reply that answered instead), is not usable."""
    if not text:
        return ParseResult([], ok=False, found_json=False)
    text = strip_reasoning(text)
    found: str | None = None
    found_json = False
    for snippet in _candidate_snippets(text):
        for span in [snippet.strip(), *_bracket_spans(snippet, "{", "}")]:
            value = loads_lenient(span) if span[:1] in "{[\"" else None
            if isinstance(value, dict):
                lowered = {str(k).lower(): v for k, v in value.items()}
                value = next((lowered[k] for k in _RESTATED_KEYS if isinstance(lowered.get(k), str)), None)
            elif isinstance(value, list) and len(value) == 1:
                value = value[0]
            if isinstance(value, str):
                found, found_json = value, True
                break
        if found is not None:
            break
    if found is None:  # prose: the first line that says something
        found = next((line for line in text.splitlines() if line.strip().strip("`").strip()), "")
        found = _LABEL.sub("", found)
    question = " ".join(found.split()).strip("\"'`* ")
    if not question:
        return ParseResult([], ok=False, found_json=True, raw_items=1, problems=["empty question"])
    if len(question) > MAX_RESTATED_CHARS:  # (found_json: the error then says why)
        return ParseResult([], ok=False, found_json=True, raw_items=1,
                           problems=[f"{len(question):,} characters: an answer, not a question"])
    return ParseResult([question], ok=True, found_json=found_json, raw_items=1)
