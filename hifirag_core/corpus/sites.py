"""The documentation sites of the local corpus: where their pages come from and their real URLs.

The pages are the HTML of Debian packages (see ``../shared/data/README.md``); each site's pages
get the URL they have on the site's real host, so the offline web looks like the real one.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path, PurePosixPath

from hifirag_core.jsonl import NotUtf8Error, read_jsonl
from hifirag_core.resources import shared_data_dir


@dataclass(frozen=True)
class Site:
    name: str  # the Debian package, also the corpus name in docs_faq
    base_url: str
    pretty_urls: bool = False  # Django serves "topics/db/models/" for "topics/db/models.html"
    html_root: str = ""  # where the package installs its HTML (for building from a .deb)

    def url_for(self, relpath: str) -> str:
        rel = PurePosixPath(relpath.lstrip("./"))
        if not self.pretty_urls:
            return self.base_url + rel.as_posix()
        if rel.name == "index.html":
            parent = rel.parent.as_posix()
            return self.base_url + ("" if parent == "." else parent + "/")
        return self.base_url + rel.with_suffix("").as_posix() + "/"


SITES: dict[str, Site] = {
    s.name: s
    for s in (
        Site("python3.11-doc", "https://docs.python.org/3.11/", html_root="usr/share/doc/python3.11/html"),
        Site("python-django-doc", "https://docs.djangoproject.com/en/3.2/", pretty_urls=True,
             html_root="usr/share/doc/python-django-doc/html"),
        Site("postgresql-doc-15", "https://www.postgresql.org/docs/15/",
             html_root="usr/share/doc/postgresql-doc-15/html"),
        Site("sqlite3-doc", "https://www.sqlite.org/", html_root="usr/share/doc/sqlite3"),
        Site("debian-faq", "https://www.debian.org/doc/manuals/debian-faq/", html_root="usr/share/doc/debian/FAQ"),
    )
}


@dataclass(frozen=True)
class SourcePage:
    site: str
    relpath: str
    url: str
    html: bytes
    title: str | None = None  # the page's title when its source names one (a manifest); else the HTML's
    # What a static web server would send as Last-Modified: the file's modification time.
    last_modified: str | None = None


def docs_html_dir() -> Path:
    return shared_data_dir() / "docs_html"


def tarball_site(path: Path) -> Site:
    name = path.name.removesuffix(".tar.xz").removesuffix(".html")
    try:
        return SITES[name]
    except KeyError:
        raise ValueError(f"{path.name}: not one of the known sites {sorted(SITES)}") from None


def iter_tarball_pages(path: Path) -> Iterator[SourcePage]:
    """Every regular ``*.html`` file of one site's tarball (symlinked duplicates skipped)."""
    site = tarball_site(path)
    with tarfile.open(path, "r:xz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".html"):
                continue
            relpath = member.name.removeprefix("./")
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            yield SourcePage(site.name, relpath, site.url_for(relpath), data,
                             last_modified=formatdate(member.mtime, usegmt=True))


def iter_folder_pages(folder: Path, base_url: str | None = None, *, site: Site | None = None) -> Iterator[SourcePage]:
    """Every ``*.html`` under a folder, with URLs under ``base_url`` (or the known ``site``'s): the
    file's path below the folder, so ``guide/install.html`` is ``<base_url>guide/install.html`` and
    ``guide/index.html`` is ``<base_url>guide/`` (see ``store.normalize_url``)."""
    if site is None:
        if not base_url:
            raise ValueError("a folder of pages needs a base URL for them")
        site = Site(folder.name, base_url if base_url.endswith("/") else base_url + "/")
    for path in sorted(folder.rglob("*.html")):
        if path.is_symlink() or not path.is_file():
            continue
        relpath = path.relative_to(folder).as_posix()
        yield SourcePage(site.name, relpath, site.url_for(relpath), path.read_bytes(),
                         last_modified=formatdate(path.stat().st_mtime, usegmt=True))


# The FAQ pages of the docs corpus: the FAQ protocol (a) leaves them out of search and fetching,
# because the gold answers are their text.
FAQ_PAGE_PATTERNS: tuple[str, ...] = (
    "https://docs.python.org/3.11/faq/*",
    "https://docs.djangoproject.com/en/3.2/faq/*",
)


def gold_location(meta: dict) -> tuple[str | None, str | None]:
    """The page URL and section anchor a question's answer comes from, when the data says.

    Any question file may give ``gold_url`` (and ``gold_anchor``); the FAQ set gives its
    ``corpus``, ``page`` and ``anchor``, which map to the page's real URL.
    """
    if meta.get("gold_url"):
        return str(meta["gold_url"]), meta.get("gold_anchor") or None
    site = SITES.get(str(meta.get("corpus", "")))
    if site is None or not meta.get("page"):
        return None, None
    return site.url_for(str(meta["page"])), meta.get("anchor") or None


@dataclass(frozen=True)
class ManifestEntry:
    line_no: int
    path: Path
    url: str
    title: str | None


def read_manifest(manifest: Path, folder: Path) -> list[ManifestEntry]:
    """A JSONL manifest of pages, one ``{"path", "url", "title"?}`` per line (``path`` relative to
    ``folder`` or absolute), checked whole: every bad line is named in one ``ValueError``."""
    entries: list[ManifestEntry] = []
    seen: dict[str, int] = {}
    if not manifest.is_file():
        raise ValueError(f"manifest {manifest} does not exist")
    try:
        objects, problems = read_jsonl(manifest, "manifest")
    except NotUtf8Error as exc:
        raise ValueError(f"{manifest}: {exc.problem}") from None
    for line_no, obj in objects:
        path, url, title = obj.get("path"), obj.get("url"), obj.get("title")
        if not isinstance(path, str) or not path.strip():
            problems.append(f"line {line_no}: missing field 'path'")
            continue
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            problems.append(f"line {line_no}: field 'url' must be an http(s) URL")
            continue
        if title is not None and not isinstance(title, str):
            problems.append(f"line {line_no}: field 'title' must be a string")
            continue
        file = (folder / path) if not Path(path).is_absolute() else Path(path)
        if not file.is_file():
            problems.append(f"line {line_no}: no file {file}")
            continue
        key = url.split("#", 1)[0]
        if key in seen:
            problems.append(f"line {line_no}: url {url} is already on line {seen[key]}")
            continue
        seen[key] = line_no
        entries.append(ManifestEntry(line_no, file, url, title.strip() if title and title.strip() else None))
    if problems:
        problems.sort(key=lambda p: int(p.split(":", 1)[0].removeprefix("line ")))
        listed = "\n".join(f"  {p}" for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError(f"{manifest}: {len(problems)} problem(s)\n{listed}{more}")
    if not entries:
        raise ValueError(f"manifest {manifest} lists no pages")
    return entries


def iter_manifest_pages(entries: list[ManifestEntry], site_name: str) -> Iterator[SourcePage]:
    """The pages a manifest lists, each under its own URL (and title, when given)."""
    for e in entries:
        yield SourcePage(site_name, e.path.name, e.url, e.path.read_bytes(), title=e.title,
                         last_modified=formatdate(e.path.stat().st_mtime, usegmt=True))
