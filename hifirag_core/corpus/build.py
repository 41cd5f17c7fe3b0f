"""Building the local corpus: from the shared tarballs, a folder, or Debian's own packages."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from hifirag_core.config import PipelineConfig, search_providers
from hifirag_core.corpus.folder import folder_corpus
from hifirag_core.corpus.sites import (
    SITES,
    SourcePage,
    docs_html_dir,
    iter_folder_pages,
    iter_manifest_pages,
    iter_tarball_pages,
    read_manifest,
)
from hifirag_core.corpus.store import Corpus, CorpusError, corpus_at
from hifirag_core.store.blobs import BlobStore


def _tarball_pages(folder: Path) -> Iterator[SourcePage]:
    for tarball in sorted(folder.glob("*.html.tar.xz")):
        yield from iter_tarball_pages(tarball)


def build_from_tarballs(root: Path, blobs: BlobStore, folder: Path,
                        progress: Callable[[int], None] | None = None) -> Corpus:
    tarballs = sorted(folder.glob("*.html.tar.xz"))
    if not tarballs:
        raise CorpusError(f"no *.html.tar.xz files in {folder}")
    return Corpus.build(root, blobs, _tarball_pages(folder), sources=[t.name for t in tarballs], progress=progress)


def build_from_folder(root: Path, blobs: BlobStore, folder: Path, base_url: str | None,
                      progress: Callable[[int], None] | None = None, manifest: Path | None = None) -> Corpus:
    """Every ``*.html`` under ``folder`` at ``base_url`` + its path, or, with a ``manifest``, exactly the
    pages it lists, each at its own URL (crawls and mirrors whose file paths are not their URLs)."""
    if not folder.is_dir():
        raise CorpusError(f"{folder} is not a folder")
    if manifest is not None:
        try:
            entries = read_manifest(manifest, folder)
        except ValueError as exc:
            raise CorpusError(str(exc)) from None
        return Corpus.build(root, blobs, iter_manifest_pages(entries, folder.name),
                            sources=[f"{folder} (manifest {manifest})"], progress=progress)
    if not base_url:
        raise CorpusError("a folder without a manifest needs a base URL (the URL its pages are published under)")
    return Corpus.build(root, blobs, iter_folder_pages(folder, base_url), sources=[str(folder)], progress=progress)


def build_from_debian(root: Path, blobs: BlobStore, progress: Callable[[int], None] | None = None,
                      log: Callable[[str], None] = print) -> Corpus:
    """Fetch the same five documentation packages with ``apt-get download`` and build from them."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise CorpusError("apt-get/dpkg-deb are not available: pass a folder of HTML pages with --folder")
    with tempfile.TemporaryDirectory(prefix="hifirag-debs-") as tmp:
        work = Path(tmp)
        log(f"downloading {', '.join(SITES)} with apt-get ...")
        done = subprocess.run(["apt-get", "download", *SITES], cwd=work, capture_output=True, text=True)
        if done.returncode != 0:
            raise CorpusError(f"apt-get download failed: {done.stderr.strip()[-500:]}")

        def pages() -> Iterator[SourcePage]:
            for deb in sorted(work.glob("*.deb")):
                target = work / deb.stem
                subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
                site = SITES[deb.name.split("_", 1)[0]]
                yield from iter_folder_pages(target / site.html_root, site=site)

        return Corpus.build(root, blobs, pages(), sources=["apt-get download " + " ".join(SITES)], progress=progress)


def build_default(root: Path, blobs: BlobStore, progress: Callable[[int], None] | None = None,
                  log: Callable[[str], None] = print) -> Corpus:
    """The documentation corpus from ../shared/data/docs_html, or from Debian when that is absent."""
    folder = docs_html_dir()
    if folder.is_dir() and any(folder.glob("*.html.tar.xz")):
        return build_from_tarballs(root, blobs, folder, progress)
    log(f"{folder} is absent; fetching the documentation packages from Debian instead")
    return build_from_debian(root, blobs, progress, log)


def ensure_corpus(cfg: PipelineConfig, data_root: Path, log: Callable[[str], None] = print) -> None:
    """Build the local documentation corpus on first use, when the config reads from a local corpus.

    Another corpus (``corpus.name``) that is missing or stale is an error that says how to build it.
    """
    if "folder" in search_providers(cfg):  # the user's own files: built, or rebuilt when they changed
        folder_corpus(data_root, cfg.search.folder or "", cfg.search.folder_host, cfg.sectioning)
    if "local" not in (*search_providers(cfg), cfg.backends.fetch):
        return
    corpus = corpus_at(data_root, cfg.corpus.name)
    if corpus.is_current():
        return
    if cfg.corpus.name != "docs":
        state = "was built by an older version" if corpus.exists() else "is not built"
        raise CorpusError(f"the corpus {cfg.corpus.name!r} {state}; run `hifirag corpus build --name ...`")
    log("Building the local documentation corpus (once; a minute or two, its self-calibration included) ...")
    built = build_default(corpus.root, corpus.blobs, log=log)
    log(f"Corpus built: {built.manifest()['pages']} pages")
    from hifirag_core.corpus.probes import (
        calibrate_corpus,  # the probes read MiniLM and spaCy: only when building
    )
    from hifirag_core.evidence.self_calibration import describe
    from hifirag_core.retrieval.embeddings import Embedder

    done = calibrate_corpus(built, Embedder(Path(data_root) / "cache" / "vectors.sqlite"), cfg.corpus.name)
    log(describe(done.stored))
