"""PDF parsing speed: pages per second and sections, on PDFs generated here (tests/support/pdfgen.py).

Side by side in one run, on the same documents:

* ``text only``: pypdfium2 reading each page's text layer, nothing else (the floor);
* ``sections``: ``parse_pdf_sections``, the whole path (sizes, headings, paragraphs, sections);
* ``pypdf``: pypdf's ``extract_text`` on the same pages, when pypdf can be imported (it is not a
  dependency; ``pip install --target DIR pypdf`` and ``PYTHONPATH=DIR`` to compare).

    /work/main/.venv/bin/python bench/bench_pdf.py
    /work/main/.venv/bin/python bench/bench_pdf.py --pages 10 50 300 --repeat 3
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pypdfium2 as pdfium  # noqa: E402

from hifirag_core.config import SectioningConfig  # noqa: E402
from hifirag_core.sectioning.pdf import parse_pdf_sections  # noqa: E402
from tests.support.pdfgen import pdf_document, report_pages  # noqa: E402


def text_only(data: bytes) -> int:
    pdf = pdfium.PdfDocument(data)
    chars = 0
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            chars += len(textpage.get_text_range())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    return chars


def with_pypdf(data: bytes) -> int | None:
    try:
        import pypdf
    except ImportError:
        return None
    return sum(len(p.extract_text() or "") for p in pypdf.PdfReader(io.BytesIO(data)).pages)


def best_seconds(fn, data: bytes, repeat: int) -> float | None:
    best = None
    for _ in range(repeat):
        began = time.process_time()
        if fn(data) is None:
            return None
        spent = time.process_time() - began
        best = spent if best is None else min(best, spent)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (CPU seconds)")
    args = parser.parse_args()
    cfg = SectioningConfig(pdf_max_pages=10_000, pdf_max_seconds=600)
    print(f"{'pages':>6} {'MB':>6} {'text only p/s':>14} {'sections p/s':>13} {'pypdf p/s':>10} "
          f"{'sections':>9} {'per page':>9} {'x text only':>12}")
    for n in args.pages:
        data = pdf_document(report_pages(n), title=f"Report of {n} pages")
        parsed = parse_pdf_sections(data, "https://bench.example/report.pdf", config=cfg)
        assert parsed.status == "ok", parsed.error
        floor = best_seconds(text_only, data, args.repeat) or float("nan")
        full = best_seconds(lambda d: parse_pdf_sections(d, "u", config=cfg), data, args.repeat) or float("nan")
        other = best_seconds(with_pypdf, data, args.repeat)
        pypdf_rate = f"{n / other:>10.0f}" if other else f"{'-':>10}"
        print(f"{n:>6} {len(data) / 1e6:>6.2f} {n / floor:>14.0f} {n / full:>13.0f} {pypdf_rate} "
              f"{len(parsed.sections):>9} {len(parsed.sections) / n:>9.1f} {full / floor:>12.1f}")
    heads = parsed.sections[:4]
    print("\nfirst sections of the last document:")
    for s in heads:
        print(f"  {' > '.join(s.heading_path)}  [#{s.anchor}]  {s.n_words} words")


if __name__ == "__main__":
    main()
