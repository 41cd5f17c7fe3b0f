"""A page's bytes as HiFi-RAG last read them: from the local corpus, else from a run's stored fetch."""

from __future__ import annotations

from pathlib import Path

from hifirag_core.corpus.store import corpus_at, normalize_url
from hifirag_core.store.blobs import blob_store
from hifirag_core.store.queries import stored_page_sha
from hifirag_core.store.warehouse import Warehouse


def stored_page(data_root: Path, url: str, corpus_name: str = "docs") -> bytes | None:
    """The page's bytes from the corpus ``corpus_name``, else from the newest run that fetched it; None
    when neither has it (nothing is fetched)."""
    blobs = blob_store(data_root)
    corpus = corpus_at(data_root, corpus_name)
    page = corpus.page(url) if corpus.exists() else None
    body = blobs.get(page.sha256) if page else None
    if body is None:
        sha = stored_page_sha(Warehouse(data_root), normalize_url(url))
        body = blobs.get(sha) if sha and sha in blobs else None
    return body
