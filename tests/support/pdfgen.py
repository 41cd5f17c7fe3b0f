"""A tiny PDF writer for tests and benchmarks: text pages in Helvetica, scanned pages, a locked file.

Just enough of the format (PDF 1.4: catalog, page tree, pages with content streams, a standard
Type 1 font, an image XObject, a cross-reference table) to make files that real readers open,
with text whose sizes and positions we choose.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Sequence

SCAN = "scan"  # a page that is one image and no text, as a scanner makes it
Line = tuple[str, float] | None  # (text, font size), or None for a paragraph gap
Page = Sequence[Line] | str


def _escape(text: str) -> bytes:
    raw = text.encode("cp1252", "replace")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _content(lines: Sequence[Line], *, matrix_sizes: bool) -> bytes:
    ops: list[bytes] = []
    y = 780.0
    for line in lines:
        if line is None:
            y -= 14
            continue
        text, size = line
        y -= size * 1.25  # the baseline sits one line below the previous one
        if matrix_sizes:  # sized by the text matrix, as many producers do, with a unit font size
            ops.append(b"BT /F1 1 Tf %g 0 0 %g 72 %g Tm (%s) Tj ET" % (size, size, y, _escape(text)))
        else:
            ops.append(b"BT /F1 %g Tf 72 %g Td (%s) Tj ET" % (size, y, _escape(text)))
    return b"\n".join(ops)


def pdf_document(pages: Sequence[Page], *, title: str | None = None, matrix_sizes: bool = False,
                 locked: bool = False) -> bytes:
    """A PDF with one page per item: lines of (text, size) with None for a gap, or ``SCAN``."""
    objects: list[bytes] = [b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
                            b"", b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = []
    for page in pages:
        if page == SCAN:
            image = b"\x80" * 64
            objects.append(b"<< /Type /XObject /Subtype /Image /Width 8 /Height 8 /ColorSpace /DeviceGray "
                           b"/BitsPerComponent 8 /Length %d >>\nstream\n%s\nendstream" % (len(image), image))
            stream = b"q 612 0 0 792 0 0 cm /Im1 Do Q"
            resources = b"<< /XObject << /Im1 %d 0 R >> >>" % len(objects)
        else:
            stream = _content(page, matrix_sizes=matrix_sizes)
            resources = b"<< /Font << /F1 1 0 R >> >>"
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources %s /Contents %d 0 R >>"
                       % (resources, len(objects)))
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    trailer = b"/Root 3 0 R"
    if title is not None:
        objects.append(b"<< /Title (%s) /Producer (tests/pdfgen) >>" % _escape(title))
        trailer += b" /Info %d 0 R" % len(objects)
    if locked:
        # the standard security handler with a user password: /U cannot match the empty password
        digest = hashlib.sha256(b"locked").hexdigest().encode()
        objects.append(b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -44 >>" % (digest, digest[::-1]))
        trailer += b" /Encrypt %d 0 R /ID [<%s> <%s>]" % (len(objects), digest[:32], digest[:32])
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer, xref)
    return bytes(out)


def report_pages(n_pages: int, *, seed_text: str = "") -> list[list[Line]]:
    """A report of ``n_pages`` pages: a title, chapters and sections, wrapped paragraphs, page numbers."""
    sentence = (seed_text or "Measurements were taken every hour at each of the twelve stations and compared "
                "with the seasonal mean, which removes the daily cycle from the series.")
    paragraph = textwrap.wrap(" ".join([sentence] * 4), 95)
    pages: list[list[Line]] = []
    for p in range(1, n_pages + 1):
        lines: list[Line] = [(f"Annual report of the river survey  {p}", 8)]
        if p == 1:
            lines.append(("Annual report of the river survey", 22))
        lines.append((f"Chapter {p}: Findings of part {p}", 16))
        for s in range(1, 4):
            lines.append((f"{p}.{s} Station group {s}", 13))
            for _ in range(2):
                lines.extend((text, 10) for text in paragraph)
                lines.append(None)
        lines.append((str(p), 9))
        pages.append(lines)
    return pages
