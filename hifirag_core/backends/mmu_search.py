"""MMU-RAGent's own search services, FineWeb and ClueWeb22, as ``SearchBackend``s whose results carry
their documents' text.

Wire format (the organisers' text-to-text page, AGI-LTI/MMU-RAGent-Preview; RMIT's R2RAG client
rmit-ir/NeurIPS-MMU-RAG ``src/tools/web_search.py``):

* FineWeb, no key: ``GET {base}/fineweb/search?query=…&k=…``;
* ClueWeb22-B: ``GET {base}/search?query=…&k=…`` with the header ``x-api-key``; ClueWeb22-A adds
  ``cw22_a=true``.

Both answer ``{"results": [...]}``, each result a base64-encoded JSON document: FineWeb's ``{"url", "id",
"text", "date", "dump", "language", "language_score", "token_count", ...}``, ClueWeb22's ``{"URL",
"ClueWeb22-ID", "Clean-Text", ...}``. A result that does not decode is skipped (and counted in
``skipped``). Neither service has steering parameters: the stages after search enforce the site rules and
the date window (the documents have no publication date: FineWeb's ``date`` is when Common Crawl fetched
the page, so they count as undated).

The documents are the crawl: :meth:`MmuSearchBackend.carried` hands a found URL's text to the fetch stage
(``hifirag_core.backends.carried``), which records it as a page of kind ``text`` with ``text_source =
"search_provider"`` instead of fetching the URL. The runtime also gives the backend the data root's
``DocumentStore`` (:meth:`MmuSearchBackend.keep_in`): its documents outlive the process, so a later one that takes
the search answers from a cache still reads their text rather than fetching the URLs. The text has no markup: it is sectioned as plain text
(``hifirag_core.sectioning.plain``: paragraphs at blank lines, under the document's first line as its
heading, packed into sections of at most ``sectioning.max_section_chars``).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass

from hifirag_core.backend_registry import search_url
from hifirag_core.backends.search_common import JsonSearchClient, hit
from hifirag_core.secrets import Secret, get_secret
from hifirag_core.store.documents import DocumentStore
from hifirag_core.types import SearchHit, SearchSteer

SNIPPET_CHARS = 300
TITLE_CHARS = 80
MAX_K = 100
# the documents a backend keeps for the fetch stage: a run's questions times their results, bounded
MAX_CARRIED = 20_000


@dataclass(frozen=True)
class CarriedDocument:
    """A document that arrived with a search result."""

    url: str
    text: str
    doc_id: str
    provider: str


def decode_document(item: object) -> dict | None:
    """One base64-encoded JSON document of a reply (None when it does not decode to an object)."""
    if not isinstance(item, str):
        return None
    try:
        doc = json.loads(base64.b64decode(item, validate=True).decode("utf-8", errors="replace"))
    except (binascii.Error, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def document_fields(doc: dict) -> tuple[str, str, str]:
    """URL, text and id of a FineWeb or ClueWeb22 document."""
    url = str(doc.get("url") or doc.get("URL") or "").strip()
    text = str(doc.get("text") or doc.get("Clean-Text") or "")
    return url, text, str(doc.get("id") or doc.get("ClueWeb22-ID") or "")


class MmuSearchBackend:
    """FineWeb or ClueWeb22 search; the documents found stay available to the fetch stage."""

    def __init__(self, client: JsonSearchClient, *, provider: str, url: str, api_key: Secret | None = None,
                 extra: dict[str, str] | None = None):
        self.provider = provider
        self._client = client
        self._url = url
        self._key = api_key
        self._extra = extra or {}
        self._docs: dict[str, CarriedDocument] = {}
        self._lock = threading.Lock()
        self._store: DocumentStore | None = None
        self.skipped = 0  # results that did not decode

    def keep_in(self, store: DocumentStore) -> None:
        """Keep the documents found in ``store`` too, and look there for those this process did not find."""
        self._store = store

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def search(self, query: str, *, num: int, steer: SearchSteer | None = None) -> list[SearchHit]:
        """Up to ``num`` documents in the service's order (steering is enforced after search)."""
        headers = {"x-api-key": self._key.reveal()} if self._key is not None else {}
        data = self._client.request("GET", self._url, params={"query": query, "k": max(1, min(num, MAX_K)),
                                                              **self._extra}, headers=headers)
        hits: list[SearchHit] = []
        kept: list[tuple[str, str, str]] = []
        for item in data.get("results") or []:
            doc = decode_document(item)
            url, text, doc_id = document_fields(doc) if doc is not None else ("", "", "")
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            title = str((doc or {}).get("title") or "") or (lines[0][:TITLE_CHARS] if lines else "")
            found = hit(title, url, text[:SNIPPET_CHARS])
            if found is None or not lines:
                with self._lock:
                    self.skipped += 1
                continue
            hits.append(found)
            kept.append((url, text, doc_id))
            with self._lock:
                if len(self._docs) < MAX_CARRIED:
                    self._docs[url] = CarriedDocument(url, text, doc_id, self.provider)
        if self._store is not None:
            self._store.put(self.provider, kept)
        return hits[:num]

    def carried(self, url: str) -> CarriedDocument | None:
        """The document a search found at ``url``, with its text (None: the URL must be fetched)."""
        with self._lock:
            doc = self._docs.get(url)
        if doc is None and self._store is not None and (stored := self._store.get(self.provider, url)):
            doc = CarriedDocument(url, stored[0], stored[1], self.provider)
        return doc


def _client(cfg, guards, name: str) -> JsonSearchClient:
    # errors name the backend; the limits are the service's, shared by FineWeb and both ClueWeb22 indexes
    return JsonSearchClient(name, guard=guards.guard("clueweb22"), timeout_s=cfg.limits.search_timeout_s,
                            paid=False, call_cost_usd=guards.call_cost("clueweb22"))


def build_fineweb(cfg, guards, env) -> MmuSearchBackend:
    """The backend of the ``fineweb`` row (hifirag_core.backend_registry); no key."""
    return MmuSearchBackend(_client(cfg, guards, "fineweb"), provider="fineweb",
                            url=search_url(cfg, "fineweb") + "/fineweb/search")


def build_clueweb_b(cfg, guards, env) -> MmuSearchBackend:
    """The backend of the ``clueweb22-b`` row."""
    return MmuSearchBackend(_client(cfg, guards, "clueweb22-b"), provider="clueweb22-b", url=search_url(cfg, "clueweb22-b") + "/search",
                            api_key=get_secret("clueweb_api_key", env))


def build_clueweb_a(cfg, guards, env) -> MmuSearchBackend:
    """The backend of the ``clueweb22-a`` row (``cw22_a=true``)."""
    return MmuSearchBackend(_client(cfg, guards, "clueweb22-a"), provider="clueweb22-a", url=search_url(cfg, "clueweb22-a") + "/search",
                            api_key=get_secret("clueweb_api_key", env), extra={"cw22_a": "true"})
