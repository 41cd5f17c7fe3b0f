"""Page dates: metadata, URL, text and headers, best published date first; the corpus records them."""

from __future__ import annotations

from datetime import date

import pytest

from hifirag_core.corpus.build import build_from_folder
from hifirag_core.corpus.store import corpus_at, open_corpus
from hifirag_core.web.page_dates import best_date, dates_of_page, page_dates, parse_date


@pytest.mark.parametrize(("text", "expected"), [
    ("2025-03-14", date(2025, 3, 14)),
    ("2025-03-14T09:30:00+02:00", date(2025, 3, 14)),
    ("2025-03-14T09:30:00.123Z", date(2025, 3, 14)),
    ("2025/03/14", date(2025, 3, 14)),
    ("Fri, 14 Mar 2025 09:30:00 GMT", date(2025, 3, 14)),
    ("March 3, 2025", date(2025, 3, 3)),
    ("Mar. 3rd 2025", date(2025, 3, 3)),
    ("3 September 2025", date(2025, 9, 3)),
    ("Sept 3, 2025", date(2025, 9, 3)),
    ("14/03/2025", None),  # day and month order is ambiguous: not guessed
    ("1987-05-01", None),  # before the web dates anything
    ("2025-02-30", None),
    ("yesterday", None),
    ("", None),
])
def test_parse_date_reads_the_usual_forms_and_refuses_guesses(text, expected):
    assert parse_date(text) == expected


def test_a_date_after_the_reading_day_is_not_a_date():
    assert parse_date("2031-01-01", today=date(2026, 1, 1)) is None
    assert parse_date("2026-01-02", today=date(2026, 1, 1)) == date(2026, 1, 2)  # a day of time-zone slack


def _html(head: str = "", body: str = "<h1>Title</h1><p>Text.</p>") -> str:
    return f"<!doctype html><html><head><title>T</title>{head}</head><body>{body}</body></html>"


def test_every_signal_is_found_and_published_dates_rank_first():
    html = _html(
        head=('<meta property="article:modified_time" content="2025-05-02T10:00:00Z">'
              '<meta name="citation_publication_date" content="2025/03/01">'
              '<script type="application/ld+json">{"@context": "https://schema.org", "@graph": ['
              '{"@type": "WebSite"}, {"@type": "NewsArticle", "datePublished": "2025-03-04T08:00:00Z", '
              '"dateModified": "2025-04-01"}]}</script>'),
        body='<h1>Title</h1><p>By A. Writer</p><time class="entry-date" datetime="2025-03-05">5 March</time>'
             '<p>Last updated on April 9, 2025.</p>')
    found = page_dates(html, url="https://news.example/2025/03/06/story", last_modified="Wed, 07 May 2025 10:00:00 GMT")
    as_tuples = [(d.date.isoformat(), d.kind, d.source) for d in found]
    assert as_tuples == [
        ("2025-03-04", "published", "json-ld:datePublished"),
        ("2025-03-01", "published", "meta:citation_publication_date"),
        ("2025-03-05", "published", "html:time"),
        ("2025-03-06", "published", "url:path"),
        ("2025-04-01", "modified", "json-ld:dateModified"),
        ("2025-05-02", "modified", "meta:article:modified_time"),
        ("2025-04-09", "modified", "text:updated"),
        ("2025-05-07", "modified", "http:last-modified"),
    ]
    assert best_date(found).source == "json-ld:datePublished"


def test_text_dates_labelled_near_the_top_and_bylines():
    labelled = _html(body="<h1>E.9. Release 15.12</h1><p><strong>Release date: </strong>2025-02-20</p>")
    assert best_date(page_dates(labelled)).date == date(2025, 2, 20)
    # A byline right under the main heading (the sectioner's Markdown, chrome removed)
    assert best_date(page_dates(_html(), main_text="# Django 1.1 release notes\n\n*July 29, 2009*\n\nText."
                                )).source == "text:byline"
    # ... but not a "Date:" field further down (documentation pages print their build day there)
    deep = "# What's New\n\n**Release:**\n\n3.11.2\n\n**Date:**\n\nOctober 07, 2026\n\nText."
    assert best_date(page_dates(_html(), main_text=deep)) is None
    # "released on" deep inside a long page is about something else
    far = _html(body="<h1>T</h1><p>" + "word " * 2000 + "Python 3.0 was released on December 3, 2008.</p>")
    assert best_date(page_dates(far)) is None


def test_a_modification_date_counts_only_when_any_evidence_is_asked_for():
    found = page_dates(_html(), last_modified="Tue, 01 Jul 2025 00:00:00 GMT")
    assert best_date(found) is None
    assert best_date(found, "any").source == "http:last-modified"


def test_undated_and_unreadable_pages_have_no_date():
    assert page_dates(_html()) == []
    assert page_dates(None) == []
    assert page_dates(b"\x00\x01binary") == []
    assert page_dates(_html(head='<script type="application/ld+json">{not json</script>')) == []


def test_dates_of_page_reads_the_byline_from_the_sectioned_text():
    html = (b"<html><body><header><h1>Site name</h1></header><main><h1>Tidewater 3.0 is out</h1>"
            b"<p><em>March 10, 2025</em></p><p>Tidewater 3.0 syncs folders twice as fast as 2.1 did, "
            b"because it compares checksums in parallel on every core.</p></main>"
            b"<footer>Copyright 2019</footer></body></html>")
    found = dates_of_page(html, url="https://blog.example/tidewater-3")
    assert [(d.date, d.source) for d in found] == [(date(2025, 3, 10), "text:byline")]


def test_the_corpus_records_each_pages_dates(tmp_path):
    site = tmp_path / "site"
    (site / "news").mkdir(parents=True)
    (site / "news" / "fresh.html").write_text(_html(
        head='<meta name="date" content="2025-06-01">', body="<h1>Fresh</h1><p>New things happened in June.</p>"))
    (site / "news" / "old.html").write_text(_html(body="<h1>Old</h1><p>Published: March 3, 2021</p>"))
    (site / "undated.html").write_text(_html(body="<h1>Undated</h1><p>No date at all here.</p>"))
    root = tmp_path / "data"
    target = corpus_at(root, "news")
    build_from_folder(target.root, target.blobs, site, "https://news.example/")
    corpus = open_corpus(root, "news")
    dates = corpus.page_dates()
    assert best_date(dates["https://news.example/news/fresh.html"]).date == date(2025, 6, 1)
    assert best_date(dates["https://news.example/news/old.html"]).source == "text:published"
    assert best_date(dates["https://news.example/undated.html"]) is None
    # every page has its file time as the Last-Modified a static server would send
    assert all(any(d.source == "http:last-modified" for d in ds) for ds in dates.values())
