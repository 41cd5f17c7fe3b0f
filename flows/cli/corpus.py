"""``hifirag corpus build`` and ``corpus search``: the local corpus, the offline web."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import DataRoot, console, err, fail
from hifirag_core.corpus.store import CorpusError
from hifirag_core.evidence.self_calibration import PROBES
from hifirag_core.resources import data_root as resolve_data_root


def build(
    folder: Annotated[Path | None, typer.Option(help="A folder of HTML pages instead of the documentation tarballs.")] = None,
    base_url: Annotated[str | None, typer.Option(help="The URL the folder's pages live under (with --folder): "
                                                 "dir/page.html becomes BASE/dir/page.html, dir/index.html BASE/dir/.")] = None,
    manifest: Annotated[Path | None, typer.Option(help="With --folder: a JSONL file of the pages to take, one "
                                                  '{"path", "url", "title"?} per line (path relative to the '
                                                  "folder), for crawls and mirrors whose paths are not their URLs.")] = None,
    tarballs: Annotated[Path | None, typer.Option(help="A folder of *.html.tar.xz \\[default: ../shared/data/docs_html].")] = None,
    name: Annotated[str, typer.Option(help="Corpus name (selected with --set corpus.name=...).")] = "docs",
    probes: Annotated[int, typer.Option(help="Questions the corpus asks itself to calibrate its answerability "
                                        "judgment (0: none; the shipped calibration decides).", min=0)] = PROBES,
    data_root: DataRoot = None,
) -> None:
    """Build (or rebuild) the local corpus: page bytes, text, a BM25 index, and its own answerability calibration.

    Without options it reads the five documentation tarballs of ../shared/data/docs_html, or, when
    that folder is absent, fetches the same Debian packages with apt-get. With --folder, every *.html
    file gets --base-url plus its path (dir/index.html becomes dir/); with --folder and --manifest, the
    manifest says each page's URL (and optionally its title) instead.

    Then the corpus probes itself (issue 41): questions made from a sample of its own pages (question-like
    headings, sentences turned into queries), each asked with its page present, with the section holding
    the answer masked and with the page masked; the threshold of "the sources do not answer" is fitted on
    them and stored beside the corpus (calibration.json), and printed. A run over this corpus alone uses it;
    each answer row names it. `hifirag corpus calibrate` rebuilds it, byte for byte.

    [bold]Example[/bold]: hifirag corpus build --folder ./mirror --manifest ./mirror/pages.jsonl --name mysite
    """
    from rich.progress import Progress

    from hifirag_core.corpus.build import build_default, build_from_folder, build_from_tarballs
    from hifirag_core.corpus.store import corpus_at

    if folder is not None and not base_url and manifest is None:
        fail(ValueError("--folder needs --base-url (the URL its pages are published under) or --manifest "
                         "(each page's URL)"))
    if manifest is not None and folder is None:
        fail(ValueError("--manifest lists pages of a folder: pass --folder too"))
    target = corpus_at(resolve_data_root(data_root), name)
    try:
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("parsing pages", total=None)

            def tick(n: int) -> None:
                progress.update(bar, completed=n, description=f"parsing pages ({n})")

            if folder is not None:
                built = build_from_folder(target.root, target.blobs, folder, base_url, tick, manifest=manifest)
            elif tarballs is not None:
                built = build_from_tarballs(target.root, target.blobs, tarballs, tick)
            else:
                built = build_default(target.root, target.blobs, tick, log=lambda m: err.print(m))
    except (CorpusError, OSError, ValueError) as exc:
        fail(exc)
    manifest = built.manifest()
    console.print(f"Built corpus {name!r}: {manifest['pages']} pages from {', '.join(manifest['sites'])} "
                  f"in {built.root}")
    if probes:
        _calibrate(built, name, probes, data_root)


def _calibrate(corpus, name: str, probes: int, data_root) -> None:
    """Probe the corpus, store its calibration and print it (with what it cost)."""
    import time

    from rich.progress import Progress

    from hifirag_core.corpus.probes import calibrate_corpus
    from hifirag_core.evidence.self_calibration import describe
    from hifirag_core.pipeline.wiring import shared_embedder

    started = time.perf_counter()
    try:
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("probing the corpus", total=probes)
            done = calibrate_corpus(corpus, shared_embedder(resolve_data_root(data_root)), name, probes,
                                    lambda n: progress.update(bar, completed=n))
    except (CorpusError, OSError, ValueError) as exc:
        fail(exc)
    console.print(describe(done.stored), highlight=False)
    console.print(f"  {done.probes} probes over {done.sections} sections, {done.items} items, in "
                  f"{time.perf_counter() - started:.0f} s: {corpus.root / 'calibration.json'}", highlight=False)


def calibrate(
    name: Annotated[str, typer.Option(help="Corpus name.")] = "docs",
    probes: Annotated[int, typer.Option(help="Questions the corpus asks itself.", min=1)] = PROBES,
    data_root: DataRoot = None,
) -> None:
    """Rebuild a built corpus's own answerability calibration (calibration.json, probes.jsonl), as
    `hifirag corpus build` made it: the same pages give the same bytes.

    [bold]Example[/bold]: hifirag corpus calibrate --name docs && sha256sum warehouse/data/corpus/docs/calibration.json
    """
    from hifirag_core.corpus.store import open_corpus

    try:
        corpus = open_corpus(resolve_data_root(data_root), name)
    except CorpusError as exc:
        fail(exc)
    _calibrate(corpus, name, probes, data_root)


def search(
    query: Annotated[str, typer.Argument(help="What to search for.")],
    num: Annotated[int, typer.Option(help="How many results.")] = 10,
    exclude: Annotated[list[str] | None, typer.Option(help="URL glob to leave out (repeatable).")] = None,
    name: Annotated[str, typer.Option(help="Corpus name.")] = "docs",
    data_root: DataRoot = None,
) -> None:
    """Search the local corpus the way the pipeline's search stage does.

    [bold]Example[/bold]: hifirag corpus search "vacuum full lock" --num 5
    """
    from hifirag_core.corpus.store import open_corpus

    try:
        hits = open_corpus(resolve_data_root(data_root), name).index(tuple(exclude or ())).search(query, num)
    except CorpusError as exc:
        fail(exc)
    for rank, hit in enumerate(hits, 1):
        console.print(f"[bold]{rank}. {hit.title}[/bold]\n   [cyan]{hit.url}[/cyan]\n   {hit.snippet}", highlight=False)
