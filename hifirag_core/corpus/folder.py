"""The user's own files as a search provider: a folder of HTML, PDF, Markdown and text files.

The folder becomes a local corpus (``store.Corpus``: the same BM25 index over passages, snippets, steering
and fetching as the offline documentation corpus), built under the data root on first use and again when a
file is added, removed or changed. Every file is stored as an HTML page, so the pipeline reads it like any
page: HTML as it is; Markdown rendered by markdown-it-py (CommonMark), its ``#`` headings the sections;
a PDF read by the sectioner's PDF reader (``sectioning/pdf.py``) and written back as headings and
paragraphs; a text file as paragraphs under one heading, its file name (a document without headings is one
section, split only where the sectioner splits long sections).

A file is cited as ``folder://<host>/<path below the folder>``: the path is relative to the folder, so a
citation stays the same on another machine or checkout, and ``<host>`` (``search.folder_host``, by default
the folder's name + ``.local``) is the one host the site rules (``steer.sites``, ``steer.exclude_sites``)
see for every file of the folder.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from markdown_it import MarkdownIt

from hifirag_core.config import SectioningConfig
from hifirag_core.corpus.sites import SourcePage
from hifirag_core.corpus.store import Corpus, CorpusError, corpus_at
from hifirag_core.hashing import stable_hash
from hifirag_core.sectioning.pdf import parse_pdf_sections

FOLDER_SCHEME = "folder"
# The suffixes read, and as what.
KINDS: dict[str, str] = {
    **dict.fromkeys((".html", ".htm"), "html"),
    **dict.fromkeys((".md", ".markdown"), "markdown"),
    **dict.fromkeys((".txt", ".text"), "text"),
    ".pdf": "pdf",
}
FOLDER_VERSION = "1"  # bump when a file's conversion to HTML changes


def folder_host(folder: str | Path, host: str | None = None) -> str:
    """The host every file of ``folder`` is cited under: ``host``, else the folder's name + ``.local``."""
    if host:
        return host.strip().lower()
    name = re.sub(r"[^a-z0-9-]+", "-", Path(folder).resolve().name.lower()).strip("-") or "files"
    return f"{name}.local"


def file_url(host: str, relpath: str) -> str:
    """The stable URL of the file at ``relpath`` (below the folder)."""
    return f"{FOLDER_SCHEME}://{host}/{quote(relpath, safe='/')}"


def file_relpath(url: str) -> str:
    """The path below the folder that a ``folder://`` URL names."""
    return unquote(urlsplit(url).path.lstrip("/"))


def is_folder_url(url: str) -> bool:
    return url.startswith(f"{FOLDER_SCHEME}://")


def _page(title: str, body: str) -> bytes:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        f"<body><main>{body}</main></body></html>"
    ).encode()


_MD = MarkdownIt("commonmark").enable("table")


def markdown_page(text: str, name: str) -> bytes:
    """A Markdown file as a page; its first heading is its title, else its file name."""
    first = re.search(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)
    return _page(first.group(1) if first else name, _MD.render(text))


def text_page(text: str, name: str) -> bytes:
    """A text file as a page: its paragraphs (blank-line separated) under one heading, the file's name."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    body = f"<h1>{html.escape(name)}</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return _page(name, body)


def pdf_page(data: bytes, url: str, name: str, config: SectioningConfig) -> bytes | None:
    """A PDF as a page of its sections (heading levels kept); None when it has no text to read."""
    parsed = parse_pdf_sections(data, url, config=config)
    if not parsed.sections:
        return None
    parts = []
    for section in parsed.sections:
        if section.heading:
            level = min(max(section.level, 1), 4)
            parts.append(f"<h{level}>{html.escape(section.heading)}</h{level}>")
        parts.extend(f"<p>{html.escape(p.strip())}</p>" for p in section.text.split("\n\n") if p.strip())
    return _page(parsed.title or name, "".join(parts))


def as_page(path: Path, url: str, config: SectioningConfig) -> bytes | None:
    """One file as the HTML page the corpus stores; None for a file it cannot read as text."""
    kind = KINDS.get(path.suffix.lower())
    data = path.read_bytes()
    if kind == "html":
        return data
    if kind == "pdf":
        return pdf_page(data, url, path.name, config)
    text = data.decode("utf-8", errors="replace")
    return markdown_page(text, path.name) if kind == "markdown" else text_page(text, path.name)


def folder_files(folder: Path) -> list[Path]:
    """The files of ``folder`` the provider reads, in path order (symbolic links and hidden files left out)."""
    return [
        p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and p.suffix.lower() in KINDS
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]


def folder_pages(folder: Path, host: str, config: SectioningConfig) -> Iterator[SourcePage]:
    for path in folder_files(folder):
        relpath = path.relative_to(folder).as_posix()
        url = file_url(host, relpath)
        page = as_page(path, url, config)
        if page is not None:
            yield SourcePage(
                host, relpath, url, page, last_modified=formatdate(path.stat().st_mtime, usegmt=True)
            )


def folder_signature(folder: Path, host: str) -> str:
    """What the built corpus depends on: each file's path, size and modification time, the host, the version."""
    files = [
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder_files(folder)
    ]
    return stable_hash({"v": FOLDER_VERSION, "host": host, "files": files}, 16)


def folder_corpus(
    data_root: Path,
    folder: str | Path,
    host: str | None = None,
    config: SectioningConfig = SectioningConfig(),
) -> Corpus:
    """The folder's corpus under the data root, built now when it is missing or the folder changed."""
    folder = Path(folder).expanduser().resolve()
    if not folder.is_dir():
        raise CorpusError(f"search.folder={str(folder)!r} is not a folder")
    host = folder_host(folder, host)
    name = f"folder-{host}-{stable_hash(str(folder), 8)}"
    corpus = corpus_at(data_root, name)
    signature = f"signature:{folder_signature(folder, host)}"
    if corpus.is_current() and signature in corpus.manifest().get("sources", []):
        return corpus
    try:
        return Corpus.build(
            corpus.root, corpus.blobs, folder_pages(folder, host, config), sources=[str(folder), signature]
        )
    except CorpusError as exc:
        raise CorpusError(
            f"search.folder={str(folder)!r}: {exc} (it reads {', '.join(sorted(KINDS))} files)"
        ) from None
