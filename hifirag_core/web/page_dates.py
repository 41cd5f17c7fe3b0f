"""When a web page was published: read from its metadata, its URL, its text or its HTTP headers.

Search engines and grounding metadata give a page's URL and title, never its date, so the date is
read from the page itself. Every signal found is returned as a :class:`PageDate` with its *kind*
(``published`` or ``modified``) and the place it came from, best first:

1. JSON-LD (``datePublished``, ``dateCreated``, ``uploadDate``; ``dateModified``);
2. ``<meta>`` tags (``article:published_time``, ``date``, ``dc.date``, ``citation_publication_date``
   ...; ``article:modified_time``, ``dcterms.modified`` ...);
3. ``<time datetime>`` marked as the publication (``itemprop="datePublished"``, ``pubdate``);
4. a date in the URL's path (``/2025/03/14/``), as news sites publish under;
5. the text: a labelled date near the top ("Release date: 2025-02-13", "Published March 3, 2025"),
   a date standing alone as one of the first lines of the main text (a byline), and labelled
   modification dates anywhere ("Last updated on October 07, 2026", "last modified on 2020-06-18");
6. the HTTP ``Last-Modified`` header (a modification date).

A page's date (:func:`best_date`) is its best *published* date. Modification dates are kept and
reported, but count only when the caller asks for ``any`` evidence: a documentation site rebuilt
last week, or a dynamic page whose ``Last-Modified`` is the time it was served, says nothing about
when its content became known.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from selectolax.lexbor import LexborHTMLParser

from hifirag_core.sectioning import parse_sections

DateKind = Literal["published", "modified"]
DateEvidence = Literal["published", "any"]

EARLIEST = date(1990, 1, 1)  # older "dates" on the web are version numbers or typos, not publications
LEAD_LINES = 2  # lines right under the main text's first heading where a byline date stands (a "Date:" field further down
# is often the build date of a documentation page, not its publication)
LABEL_SPAN = 6000  # characters from the top of the page text where a "published" label counts

_META: dict[str, DateKind] = {
    **dict.fromkeys((
        "article:published_time", "og:published_time", "datepublished", "date", "dc.date", "dc.date.issued",
        "dc.date.created", "dcterms.date", "dcterms.issued", "dcterms.created", "citation_publication_date",
        "citation_date", "citation_online_date", "prism.publicationdate", "pubdate", "publishdate", "publish-date",
        "publish_date", "publication_date", "parsely-pub-date", "sailthru.date", "article.published",
        "originalpublicationdate", "release_date",
    ), "published"),
    **dict.fromkeys((
        "article:modified_time", "og:updated_time", "datemodified", "last-modified", "dc.date.modified",
        "dcterms.modified", "revised", "lastmod",
    ), "modified"),
}
_JSON_LD: dict[str, DateKind] = {"datePublished": "published", "dateCreated": "published",
                                 "uploadDate": "published", "dateModified": "modified"}

_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")
_MONTHS = {name: n for n, name in enumerate(_MONTH_NAMES, 1)} | {name[:3]: n for n, name in enumerate(_MONTH_NAMES, 1)}
_MONTHS["sept"] = 9
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE = (rf"(?:\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?(?:\.\d+)?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?"
         rf"|\d{{4}}/\d{{2}}/\d{{2}}|{_MONTH}\s+{_DAY},?\s+\d{{4}}|{_DAY}\s+{_MONTH},?\s+\d{{4}})")
_MODIFIED_LABEL = r"last[ -]?(?:updated|modified|changed|revised|edited|reviewed)|updated|modified|revised"
_PUBLISHED_LABEL = (r"release date|date published|publication date|first published|published|posted|"
                    r"released")
_LABELLED = re.compile(rf"\b(?P<label>{_MODIFIED_LABEL}|{_PUBLISHED_LABEL})\b(?:\s+(?:on|at))?\s*[:\-–—]?\s*"
                       rf"(?:on\s+)?(?P<date>{_DATE})", re.IGNORECASE)
_ALONE = re.compile(rf"^[\s*_~>|()\[\]]*(?:(?:posted|published|dated)\s*:?\s*(?:on\s+)?)?(?P<date>{_DATE})"
                    rf"[\s*_~.|()\[\]]*$", re.IGNORECASE)
_URL_DATE = re.compile(r"/((?:19|20)\d{2})[/-](\d{1,2})[/-](\d{1,2})(?:[/-]|$)")
_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_SLASHED = re.compile(r"^(\d{4})/(\d{2})/(\d{2})$")
_NAMED = re.compile(rf"^(?:(?P<m1>{_MONTH})\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y1>\d{{4}})"
                    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m2>{_MONTH}),?\s+(?P<y2>\d{{4}}))$", re.IGNORECASE)


@dataclass(frozen=True)
class PageDate:
    """One date signal of a page: the day, what it dates, and where it was read."""

    date: date
    kind: DateKind
    source: str  # e.g. "json-ld:datePublished", "meta:article:published_time", "text:label", "http:last-modified"

    def to_json(self) -> dict[str, str]:
        """``{"date": "2025-03-14", "kind": "published", "source": "..."}``."""
        return {"date": self.date.isoformat(), "kind": self.kind, "source": self.source}


def parse_date(value: str | None, *, today: date | None = None) -> date | None:
    """A calendar day from ISO 8601, ``YYYY/MM/DD``, an HTTP or RFC 2822 date, or "March 3, 2025" /
    "3 March 2025"; None for anything else, for days before 1990, and for days after ``today`` + 1."""
    if not value:
        return None
    text = " ".join(str(value).split())
    found: date | None = None
    try:
        if m := _ISO.match(text) or _SLASHED.match(text):
            found = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif m := _NAMED.match(text):
            month = (m.group("m1") or m.group("m2")).lower().rstrip(".")
            found = date(int(m.group("y1") or m.group("y2")), _MONTHS[month], int(m.group("d1") or m.group("d2")))
        elif re.search(r"\d{1,2} \w{3} \d{4}", text):
            found = parsedate_to_datetime(text).date()
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    if found is None or found < EARLIEST:
        return None
    if today is not None and found > today + timedelta(days=1):
        return None  # a page cannot have been published after the day it is read
    return found


def _json_ld_dates(tree: LexborHTMLParser) -> Iterator[tuple[str, str]]:
    for script in tree.css('script[type="application/ld+json"]'):
        try:
            data = json.loads(script.text(deep=True) or "null", strict=False)
        except json.JSONDecodeError:
            continue
        yield from _walk_json_ld(data, 0)


def _walk_json_ld(node: Any, depth: int) -> Iterator[tuple[str, str]]:
    if depth > 8:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _JSON_LD and isinstance(value, str):
                yield key, value
            elif isinstance(value, (dict, list)):
                yield from _walk_json_ld(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_json_ld(item, depth + 1)


def _meta_dates(tree: LexborHTMLParser) -> Iterator[tuple[str, str]]:
    for meta in tree.css("meta"):
        attrs = meta.attributes
        content = attrs.get("content")
        for attr in ("property", "name", "itemprop", "http-equiv"):
            name = (attrs.get(attr) or "").strip().lower()
            if name in _META and content:
                yield name, content
                break


def _time_dates(tree: LexborHTMLParser) -> Iterator[tuple[DateKind, str]]:
    for node in tree.css("time[datetime]"):
        attrs = node.attributes
        prop = (attrs.get("itemprop") or "").lower()
        classes = (attrs.get("class") or "").lower()
        if prop == "datepublished" or "pubdate" in attrs or "published" in classes or "entry-date" in classes:
            yield "published", attrs.get("datetime") or ""
        elif prop == "datemodified" or "updated" in classes or "modified" in classes:
            yield "modified", attrs.get("datetime") or ""


def _lead_date(main_text: str, today: date | None) -> date | None:
    """A date standing alone as one of the first lines after the main text's first heading (a byline)."""
    lines = [ln.strip() for ln in main_text.splitlines() if ln.strip()]
    start = next((i + 1 for i, ln in enumerate(lines[:3]) if ln.startswith("#")), 0)
    for line in lines[start:start + LEAD_LINES]:
        if m := _ALONE.match(line):
            return parse_date(m.group("date"), today=today)
    return None


def _label_kind(label: str) -> DateKind:
    return "modified" if re.fullmatch(_MODIFIED_LABEL, label, re.IGNORECASE) else "published"


def page_dates(html: bytes | str | None, *, url: str | None = None, last_modified: str | None = None,
               main_text: str | None = None, today: date | None = None) -> list[PageDate]:
    """Every date signal of a page, best first (see the module docstring for the order).

    ``main_text`` is the page's main content as Markdown (the sectioner's output, site chrome
    removed): the byline check reads its first lines. Without it there is no byline check.
    """
    found: list[PageDate] = []

    def add(value: str | None, kind: DateKind, source: str) -> None:
        day = parse_date(value, today=today)
        if day is not None and not any(d.kind == kind and d.source == source for d in found):
            found.append(PageDate(day, kind, source))

    tree = None
    if html:
        try:
            tree = LexborHTMLParser(html if isinstance(html, str) else bytes(html))
        except Exception:  # a page the parser refuses has no readable date, nothing more
            tree = None
    body = ""
    if tree is not None:
        for key, value in _json_ld_dates(tree):
            add(value, _JSON_LD[key], f"json-ld:{key}")
        for name, value in _meta_dates(tree):
            add(value, _META[name], f"meta:{name}")
        for kind, value in _time_dates(tree):
            add(value, kind, "html:time")
        body = tree.body.text(separator="\n") if tree.body is not None else ""
    if url and (m := _URL_DATE.search(url.split("?", 1)[0])):
        add(f"{m.group(1)}-{int(m.group(2)):02d}-{int(m.group(3)):02d}", "published", "url:path")
    for m in _LABELLED.finditer(body):
        kind = _label_kind(m.group("label"))
        if kind == "published" and m.start() > LABEL_SPAN:
            continue  # "released on ..." deep inside a page is about something else, not the page
        add(m.group("date"), kind, f"text:{'updated' if kind == 'modified' else 'published'}")
    if main_text and (day := _lead_date(main_text, today)) is not None:
        add(day.isoformat(), "published", "text:byline")
    if last_modified:
        add(last_modified, "modified", "http:last-modified")
    order = {"json-ld": 0, "meta": 1, "html": 2, "url": 3, "text": 4, "http": 5}
    return sorted(found, key=lambda d: (d.kind != "published", order.get(d.source.split(":", 1)[0], 9)))


def best_date(dates: list[PageDate], evidence: DateEvidence = "published") -> PageDate | None:
    """The page's date: its best published date; with ``any``, else its best modification date."""
    for d in dates:
        if d.kind == "published":
            return d
    if evidence == "any":
        return next((d for d in dates if d.kind == "modified"), None)
    return None


def dates_of_page(html: bytes | str | None, *, url: str, last_modified: str | None = None,
                  today: date | None = None) -> list[PageDate]:
    """:func:`page_dates` of a fetched page, with its main text from the sectioner."""
    main_text = None
    if html:
        parsed = parse_sections(html.encode("utf-8") if isinstance(html, str) else html, url)
        main_text = parsed.markdown() if parsed.ok else None
    return page_dates(html, url=url, last_modified=last_modified, main_text=main_text, today=today)

