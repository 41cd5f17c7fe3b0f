"""Content-addressed storage for raw page bytes: each distinct page is stored once, by SHA-256."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from hifirag_core.hashing import sha256_bytes


class BlobStore:
    def __init__(self, root: Path):
        self.root = root

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` (once) and return its SHA-256."""
        digest = sha256_bytes(data)
        target = self.path(digest)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{digest}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)  # atomic: readers never see a half-written blob
        return digest

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()

    def __contains__(self, digest: str) -> bool:
        return self.path(digest).exists()


def blob_store(data_root: Path) -> BlobStore:
    """The data root's store of raw page bytes."""
    return BlobStore(Path(data_root) / "blobs")
