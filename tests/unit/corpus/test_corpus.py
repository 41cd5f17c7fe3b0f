from __future__ import annotations

import json
import shutil

import pytest

from hifirag_core.backends.offline import LocalFetcher, LocalSearch
from hifirag_core.corpus.build import build_from_folder
from hifirag_core.corpus.sites import SITES, Site, docs_html_dir, iter_tarball_pages
from hifirag_core.corpus.store import CorpusError, corpus_at, normalize_url, open_corpus
from tests.support.sitegen import BASE_URL


@pytest.mark.parametrize("site, relpath, url", [
    ("python3.11-doc", "library/os.html", "https://docs.python.org/3.11/library/os.html"),
    ("python-django-doc", "topics/db/models.html", "https://docs.djangoproject.com/en/3.2/topics/db/models/"),
    ("python-django-doc", "faq/index.html", "https://docs.djangoproject.com/en/3.2/faq/"),
    ("python-django-doc", "index.html", "https://docs.djangoproject.com/en/3.2/"),
    ("postgresql-doc-15", "sql-vacuum.html", "https://www.postgresql.org/docs/15/sql-vacuum.html"),
    ("sqlite3-doc", "lang_select.html", "https://www.sqlite.org/lang_select.html"),
    ("debian-faq", "ftparchives.en.html", "https://www.debian.org/doc/manuals/debian-faq/ftparchives.en.html"),
])
def test_pages_get_their_real_urls(site, relpath, url):
    assert SITES[site].url_for(relpath) == url


def test_url_normalization():
    assert normalize_url("http://a.example/x.html#frag") == "https://a.example/x.html"


def test_a_folder_corpus_searches_like_a_web_api(data_root):
    corpus = open_corpus(data_root, "docs")
    assert corpus.manifest()["pages"] == 6
    search = LocalSearch(corpus.index())
    hits = search.search("limit bandwidth during sync", num=3)
    assert hits[0].url == BASE_URL + "sync.html"
    assert "Syncing folders" in hits[0].title
    assert "--max-rate" in hits[0].snippet or "bandwidth" in hits[0].snippet
    # navigation chrome is not indexed as content: the footer text matches nothing
    assert search.search("documentation generator authors", num=3) == [] or all(
        "generator" not in h.snippet for h in search.search("documentation generator authors", num=3))


def test_excluded_pages_are_neither_found_nor_fetched(data_root):
    corpus = open_corpus(data_root, "docs")
    index = corpus.index((BASE_URL + "sync*",))
    assert all("sync" not in h.url for h in LocalSearch(index).search("sync bandwidth max-rate", num=6))
    fetcher = LocalFetcher(index, corpus.blobs)
    assert fetcher.fetch(BASE_URL + "sync.html").status == "not_found"
    page = fetcher.fetch(BASE_URL + "install.html#requirements")
    assert page.status == "ok" and b"libyaml" in page.body
    assert fetcher.fetch("https://elsewhere.example/").status == "not_found"


def test_excluding_everything_and_missing_corpora_are_clear_errors(data_root, tmp_path):
    with pytest.raises(CorpusError, match="every page"):
        open_corpus(data_root, "docs").index(("*",))
    with pytest.raises(CorpusError, match="hifirag corpus build"):
        open_corpus(tmp_path / "empty-root", "docs")
    manifest = corpus_at(data_root, "docs").manifest_path
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "version": "1/1"}))
    with pytest.raises(CorpusError, match="older version.*hifirag corpus build"):
        open_corpus(data_root, "docs")
    with pytest.raises(CorpusError, match="no HTML pages"):
        target = corpus_at(tmp_path / "r", "x")
        (tmp_path / "nothing").mkdir()
        build_from_folder(target.root, target.blobs, tmp_path / "nothing", "https://x.example/")


def test_blobs_are_stored_once_by_content(data_root, site_dir):
    corpus = open_corpus(data_root, "docs")
    before = sum(1 for _ in (data_root / "blobs").rglob("*") if _.is_file())
    build_from_folder(corpus.root, corpus.blobs, site_dir, BASE_URL)
    after = sum(1 for _ in (data_root / "blobs").rglob("*") if _.is_file())
    assert before == after == 6


@pytest.mark.shared_data
def test_the_documentation_tarballs_hold_the_expected_sites():
    counts = {}
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        site = tarball.name.removesuffix(".html.tar.xz")
        if site == "debian-faq":  # small enough to read whole here
            pages = list(iter_tarball_pages(tarball))
            counts[site] = len(pages)
            assert all(p.url.startswith("https://www.debian.org/doc/manuals/debian-faq/") for p in pages)
    assert counts == {"debian-faq": 17}
    assert isinstance(SITES["sqlite3-doc"], Site)


def test_index_pages_are_stored_under_their_folder_url(tmp_path, site_dir):
    assert normalize_url("https://a.example/guide/index.html#x") == "https://a.example/guide/"
    assert normalize_url("https://a.example/guide/install.html") == "https://a.example/guide/install.html"
    folder = tmp_path / "site"
    shutil.copytree(site_dir, folder)
    (folder / "guide").mkdir()
    shutil.copy(site_dir / "sync.html", folder / "guide" / "index.html")
    corpus = corpus_at(tmp_path / "data", "docs")
    build_from_folder(corpus.root, corpus.blobs, folder, BASE_URL)
    urls = set(corpus.pages())
    assert BASE_URL + "guide/" in urls and BASE_URL + "guide/index.html" not in urls
    assert corpus.page(BASE_URL + "guide/index.html") is corpus.page(BASE_URL + "guide/")  # either form finds it


def test_a_manifest_gives_each_page_its_url_and_title(tmp_path, site_dir):
    manifest = tmp_path / "pages.jsonl"
    manifest.write_text("\n".join(json.dumps(line) for line in [
        {"path": "sync.html", "url": "https://mirror.example/docs/sync", "title": "Sync guide"},
        {"path": str(site_dir / "config.html"), "url": "https://mirror.example/docs/config?v=2"},
    ]) + "\n", encoding="utf-8")
    corpus = corpus_at(tmp_path / "data", "mirror")
    build_from_folder(corpus.root, corpus.blobs, site_dir, None, manifest=manifest)
    pages = corpus.pages()
    assert set(pages) == {"https://mirror.example/docs/sync", "https://mirror.example/docs/config?v=2"}
    assert pages["https://mirror.example/docs/sync"].title == "Sync guide"
    assert "Configuring Tidewater" in pages["https://mirror.example/docs/config?v=2"].title
    hits = LocalSearch(corpus.index()).search("limit bandwidth during sync", num=1)
    assert hits[0].url == "https://mirror.example/docs/sync" and hits[0].title == "Sync guide"


def test_a_bad_manifest_names_every_bad_line(tmp_path, site_dir):
    manifest = tmp_path / "pages.jsonl"
    manifest.write_text("\n".join([
        json.dumps({"path": "sync.html", "url": "https://m.example/a"}),
        "{not json",
        json.dumps({"url": "https://m.example/b"}),
        json.dumps({"path": "absent.html", "url": "https://m.example/c"}),
        json.dumps({"path": "config.html", "url": "ftp://m.example/d"}),
        json.dumps({"path": "config.html", "url": "https://m.example/a"}),
    ]) + "\n", encoding="utf-8")
    corpus = corpus_at(tmp_path / "data", "mirror")
    with pytest.raises(CorpusError) as info:
        build_from_folder(corpus.root, corpus.blobs, site_dir, None, manifest=manifest)
    text = str(info.value)
    for expected in ("5 problem(s)", "line 2: not valid JSON", "line 3: missing field 'path'", "line 4: no file",
                     "line 5: field 'url' must be an http(s) URL", "line 6: url https://m.example/a is already on line 1"):
        assert expected in text, expected
    assert not corpus.exists()  # nothing half built
