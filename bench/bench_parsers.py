"""Which HTML parser to build sectioning on: lexbor (selectolax), lxml, BeautifulSoup with lxml.

For each: CPU pages/s to parse every page, and to parse and visit every node; then the hostile
inputs the sectioner must survive (10,000 nested divs, 100,000 unclosed tags, a 20 MB page).
Prints figures; asserts nothing. Run: /work/main/.venv/bin/python bench/bench_parsers.py [--sample N]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lxml.html  # noqa: E402
from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages

warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)


def lexbor_parse(b: bytes) -> object:
    return LexborHTMLParser(b)


def lexbor_walk(b: bytes) -> int:
    return sum(1 for _ in LexborHTMLParser(b).root.traverse(include_text=True))


def lxml_parse(b: bytes) -> object:
    return lxml.html.fromstring(b)


def lxml_walk(b: bytes) -> int:
    return sum(1 for _ in lxml.html.fromstring(b).iter())


def bs4_parse(b: bytes) -> object:
    return BeautifulSoup(b, "lxml")


def bs4_walk(b: bytes) -> int:
    return sum(1 for _ in BeautifulSoup(b, "lxml").descendants)


HOSTILE = {
    "10,000 nested divs": b"<html><body>" + b"<div>" * 10_000 + b"<h2>x</h2>deep" + b"</div>" * 10_000,
    "100,000 unclosed <b>": b"<html><body>" + b"<b>x" * 100_000,
    "20 MB of paragraphs": b"<html><body>" + b"<p>some words here</p>" * 950_000,
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=1, help="every Nth page")
    args = ap.parse_args()
    if not docs_html_dir().is_dir():
        print(f"skipped: no corpus at {docs_html_dir()}")
        return 0
    pages = [p.html for t in sorted(docs_html_dir().glob("*.html.tar.xz")) for p in iter_tarball_pages(t)]
    pages = pages[:: args.sample]
    print(f"{len(pages)} pages, {sum(map(len, pages)) / 1e6:.0f} MB")
    for name, fn, sub in [("lexbor parse", lexbor_parse, 1), ("lexbor parse+visit", lexbor_walk, 1),
                          ("lxml parse", lxml_parse, 1), ("lxml parse+visit", lxml_walk, 1),
                          ("bs4+lxml parse", bs4_parse, 10), ("bs4+lxml parse+visit", bs4_walk, 10)]:
        sample = pages[::sub]
        t0 = time.process_time()
        for b in sample:
            fn(b)
        dt = time.process_time() - t0
        print(f"{name:22s} {len(sample) / dt:8.0f} pages/s")
    for label, data in HOSTILE.items():
        for name, fn in [("lexbor", lexbor_walk), ("lxml", lxml_walk), ("bs4+lxml", bs4_walk)]:
            t0 = time.process_time()
            try:
                fn(data)
                outcome = "ok"
            except Exception as exc:  # the point is to see which parser fails how
                outcome = f"{type(exc).__name__}"
            print(f"{label:22s} {name:9s} {time.process_time() - t0:6.2f} s  {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
