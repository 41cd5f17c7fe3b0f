"""Sectioning benchmark: ours vs trafilatura vs html2text over all 3,174 doc pages, side by side.

Each method runs in its own subprocess (so peak RSS is its own), reads the pages one at a time from
the site tarballs, and is timed in CPU seconds around the extraction call only. For each method:

- pages/s (CPU) and peak RSS (also shown for a process that only reads the pages: the floor);
- FAQ mapped: share of the 220 FAQ questions with exactly one heading equal to the question whose
  text (up to the next heading) holds the gold answer at ROUGE-L recall >= 0.9 (Markdown outputs
  are read twice, with and without code-fence tracking, and the better reading counts);
- pages leaking: share of pages whose output matches a navigation pattern of its site
  (``hifirag_core.evaluation.sectioning.SITE_CHROME``, written from the sites' real chrome);
- headings kept: share of the content headings of every page (h1-h4 inside each site's content
  element, read with lxml as the gold builder in tests/support/gold does) found among the method's headings.

For trafilatura and html2text the Markdown output is cut into sections at its heading lines.
Timings are printed, never asserted. Run:
    /work/main/.venv/bin/python bench/bench_sectioning.py [--sample N] [--methods ours,trafilatura]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.corpus.sites import docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.evaluation.sectioning import FaqOutcome, navigation_leaks  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402

METHODS = ("read-only", "ours", "trafilatura", "html2text")
WORKERS = (*METHODS, "reference")
GOLD = ROOT / "tests" / "gold" / "sectioning_gold.json"  # its pages are always in a --sample run
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def norm_heading(text: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # Markdown links as their text
    text = text.replace("¶", "").replace("`", "").replace("**", "")
    return " ".join(text.split()).strip(" *_#")


def markdown_sections(md: str, fences: bool = True) -> list[tuple[str, str]]:
    """(heading, text up to the next heading) pairs of a Markdown document; code fences respected.

    ``fences=False`` ignores fences, for output that opens a fence mid-line (trafilatura does),
    where tracking them would hide every later heading.
    """
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in md.split("\n"):
        if fences and _FENCE.match(line):
            fenced = not fenced
        m = None if fenced else _MD_HEADING.match(line)
        if m:
            out.append((norm_heading(m.group(2)), []))
        else:
            out[-1][1].append(line)
    return [(h, "\n".join(body)) for h, body in out]


def _md_result(md: str) -> tuple[list[list[tuple[str, str]]], set[str], str]:
    """Both readings of a Markdown output (with and without fence tracking), its headings, its text."""
    readings = [markdown_sections(md), markdown_sections(md, fences=False)]
    return readings, {h for secs in readings for h, _ in secs if h}, md


def _extractor(method: str):
    """A function html bytes, url -> (sections as (heading, text) pairs, all headings, full text)."""
    if method == "ours":
        from hifirag_core.evaluation.sectioning import page_text
        from hifirag_core.sectioning import parse_sections

        def run(html: bytes, url: str):
            page = parse_sections(html, url)
            secs = [(s.heading, s.text) for s in page.sections]
            heads = {h for s in page.sections for h in s.heading_path}
            return [secs], heads, page_text(page.sections)

        return run
    if method == "trafilatura":
        import trafilatura

        def run(html: bytes, url: str):
            md = trafilatura.extract(html, url=url, output_format="markdown", include_formatting=True,
                                     include_links=False, include_tables=True, include_comments=False,
                                     include_images=False, deduplicate=False) or ""
            return _md_result(md)

        return run
    if method == "html2text":
        import html2text

        def run(html: bytes, url: str):
            conv = html2text.HTML2Text(baseurl=url)
            conv.body_width = 0
            conv.ignore_links = True
            conv.ignore_images = True
            md = conv.handle(html.decode("utf-8", errors="replace"))
            return _md_result(md)

        return run
    return None


def _pages(sample: int):
    keep = {(r["corpus"], r["page"]) for r in _faq()} | {
        (e["site"], e["relpath"]) for e in json.loads(GOLD.read_text())}
    for tarball in sorted(docs_html_dir().glob("*.html.tar.xz")):
        for i, page in enumerate(iter_tarball_pages(tarball)):
            if sample > 1 and i % sample and (page.site, page.relpath) not in keep:
                continue
            yield page


def reference(sample: int, out: Path) -> None:
    """Every page's content headings, read independently of the sectioner (lxml, site templates)."""
    from tools.build_sectioning_gold import page_entry, set_heading_limit

    set_heading_limit(None)
    heads = {}
    for page in _pages(sample):
        entry = page_entry(page.site, page.relpath, page.url, page.html)
        if entry:
            heads[f"{page.site}:{page.relpath}"] = entry["headings"]
    out.write_text(json.dumps(heads))


def worker(method: str, sample: int, out: Path, ref: Path | None = None) -> None:
    """Run one method over the corpus and write its raw results as JSON."""
    faq_pages = {(r["corpus"], r["page"]) for r in _faq()}
    expected = json.loads(ref.read_text()) if ref else {}
    run = _extractor(method)
    cpu = 0.0
    pages = 0
    leaking: list[str] = []
    empty = 0
    faq_sections: dict[str, list[list[tuple[str, str]]]] = {}
    kept = total = 0
    for page in _pages(sample):
        key = (page.site, page.relpath)
        name = f"{page.site}:{page.relpath}"
        pages += 1
        if run is None:
            continue
        t0 = time.process_time()
        secs, heads, text = run(page.html, page.url)
        cpu += time.process_time() - t0
        if not text.strip():
            empty += 1
        if navigation_leaks(page.site, text):
            leaking.append(name)
        if key in faq_pages:
            faq_sections[name] = secs
        if name in expected:
            found = {norm_heading(x) for x in heads}
            total += len(expected[name])
            kept += sum(norm_heading(h) in found for h in expected[name])
    out.write_text(json.dumps({
        "method": method, "pages": pages, "cpu_s": cpu, "empty": empty, "leaking": leaking,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "faq_sections": faq_sections, "gold_kept": kept, "gold_total": total,
    }))


def _faq() -> list[dict]:
    path = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def faq_mapped(faq_sections: dict[str, list[list[tuple[str, str]]]]) -> list[FaqOutcome]:
    """Each question against each reading of its page's output; the best reading counts."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    out = []
    for row in _faq():
        q = norm_heading(row["question"])
        best = FaqOutcome(row["id"], 0, 0.0, False)
        for secs in faq_sections.get(f"{row['corpus']}:{row['page']}", []):
            hits = [text for h, text in secs if norm_heading(h) == q]
            recall = scorer.score(row["answer"], hits[0])["rougeL"].recall if len(hits) == 1 else 0.0
            outcome = FaqOutcome(row["id"], len(hits), recall, False)
            if outcome.mapped() or (not best.mapped() and recall > best.recall):
                best = outcome
        out.append(best)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="sectioning benchmark (prints figures, asserts nothing)")
    ap.add_argument("--sample", type=int, default=1, help="every Nth page (FAQ and gold pages always)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--ref", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--show-leaks", type=int, default=3, help="example leaking pages to list per method")
    args = ap.parse_args()
    if args.worker == "reference":
        reference(args.sample, args.out)
        return 0
    if args.worker:
        worker(args.worker, args.sample, args.out, args.ref)
        return 0
    if not docs_html_dir().is_dir():
        print(f"skipped: no corpus at {docs_html_dir()} (set HIFIRAG_SHARED_DATA)")
        return 0
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference.json"
        subprocess.run([sys.executable, __file__, "--worker", "reference", "--out", str(ref),
                        "--sample", str(args.sample)], check=True)
        for method in args.methods.split(","):
            out = Path(tmp) / f"{method}.json"
            subprocess.run([sys.executable, __file__, "--worker", method, "--out", str(out),
                            "--sample", str(args.sample), "--ref", str(ref)], check=True)
            results[method] = json.loads(out.read_text())
    print(f"\n{'method':12s} {'pages':>6s} {'pages/s':>8s} {'peak MB':>8s} {'FAQ mapped':>11s} "
          f"{'leaking':>8s} {'headings kept':>14s} {'empty':>6s}")
    for method, r in results.items():
        rss = r["maxrss_kb"] / 1024
        if method == "read-only":
            print(f"{method:12s} {r['pages']:6d} {'-':>8s} {rss:8.0f} {'-':>11s} {'-':>8s} {'-':>14s} {'-':>6s}")
            continue
        outcomes = faq_mapped(r["faq_sections"])
        mapped = sum(o.mapped() for o in outcomes) / len(outcomes)
        r["pps"] = r["pages"] / r["cpu_s"] if r["cpu_s"] else float("inf")
        r["leak_share"] = len(r["leaking"]) / r["pages"]
        r["mapped"] = mapped
        kept = r["gold_kept"] / r["gold_total"] if r["gold_total"] else 0.0
        print(f"{method:12s} {r['pages']:6d} {r['pps']:8.0f} {rss:8.0f} {mapped:11.1%} "
              f"{r['leak_share']:8.1%} {kept:14.1%} {r['empty']:6d}")
    if "ours" in results and "trafilatura" in results:
        o, t = results["ours"], results["trafilatura"]
        print(f"\nours vs trafilatura: {o['pps'] / t['pps']:.1f}x pages/s (target >= 10x), "
              f"peak memory {o['maxrss_kb'] / t['maxrss_kb']:.2f}x (target <= 1x)")
    if "ours" in results and "html2text" in results:
        print(f"ours vs html2text:   {results['ours']['pps'] / results['html2text']['pps']:.1f}x pages/s")
    for method, r in results.items():
        if r.get("leaking") and args.show_leaks:
            print(f"{method} leaking examples: {', '.join(r['leaking'][: args.show_leaks])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
