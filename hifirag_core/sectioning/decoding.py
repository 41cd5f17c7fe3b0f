"""Bytes to text: honour the declared charset, survive a wrong one, refuse what is not HTML."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)|<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""",
    re.IGNORECASE,
)
# File signatures of formats that are sometimes served where HTML was expected.
_BINARY_MAGIC: tuple[bytes, ...] = (
    b"%PDF-", b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ",
    b"RIFF", b"\x7fELF", b"MZ", b"OggS", b"ID3", b"\x00\x00\x01\x00", b"wOF", b"\xd0\xcf\x11\xe0",
)
_CONTROL = bytes(range(0, 9)) + bytes(range(14, 32))
# Labels whose decoders never fail: any bytes "decode", so a UTF-8 page sent as one turns to mojibake.
_PERMISSIVE = frozenset({"iso8859-1", "cp1252", "iso8859-15", "ascii"})  # codecs.lookup() names


@dataclass(frozen=True)
class Decoded:
    text: str | None
    encoding: str | None
    status: str  # "ok", "empty", "binary"
    error: str | None = None


def _codec_name(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label.strip().strip("\"'").lower()).name
    except LookupError:
        return None


def looks_binary(head: bytes) -> bool:
    """True for known binary signatures or text full of NULs and control bytes."""
    if head.startswith(_BINARY_MAGIC):
        return True
    if not head:
        return False
    nuls = head.count(0)
    if nuls > len(head) // 100:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL))
    return controls > len(head) // 20


def sniff_meta_charset(head: bytes) -> str | None:
    m = _META_CHARSET.search(head)
    if not m:
        return None
    return (m.group(1) or m.group(2)).decode("ascii", "replace")


def decode_html(data: bytes, declared: str | None = None, sniff_bytes: int = 1024) -> Decoded:
    """Decode page bytes: BOM, then the declared charset, then the page's own meta, then UTF-8, cp1252."""
    if not data or data.isspace():
        return Decoded(None, None, "empty", "no bytes" if not data else "only whitespace")
    for bom, name in _BOMS:
        if data.startswith(bom):
            return Decoded(data.decode(name, errors="replace"), name, "ok")
    head = data[:sniff_bytes]  # the HTML standard's prescan looks for <meta charset> this far
    if looks_binary(data[:4096]):
        return Decoded(None, None, "binary", "not text: binary signature or control bytes")
    candidates: list[str] = []
    for label in (declared, sniff_meta_charset(head), "utf-8", "cp1252"):
        name = _codec_name(label)
        if name and name not in candidates:
            candidates.append(name)
    utf8_ok: bool | None = None
    for name in candidates:
        if name in _PERMISSIVE:
            # A page declared Latin-1 whose bytes are valid UTF-8 with non-ASCII in it is UTF-8:
            # the odds of Latin-1 text forming valid multi-byte sequences by chance are tiny.
            if utf8_ok is None:
                utf8_ok = _valid_utf8(data)
            if utf8_ok and not data.isascii():
                return Decoded(data.decode("utf-8"), "utf-8", "ok")
        try:
            return Decoded(data.decode(name), name, "ok")
        except (UnicodeDecodeError, LookupError):
            continue
    # Nothing decodes cleanly: keep the most trusted label and mark the broken bytes.
    return Decoded(data.decode(candidates[0], errors="replace"), candidates[0], "ok")


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def declared_charset(content_type: str | None) -> str | None:
    """The charset a Content-Type header declares (``text/html; charset=utf-8``), or None."""
    match = re.search(r"charset=([\w.-]+)", content_type or "", re.IGNORECASE)
    return match.group(1) if match else None
