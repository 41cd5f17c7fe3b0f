"""The faster paths give what the plain ones gave: embedding batches and replicas, the parallel corpus build."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from hifirag_core.corpus import store
from hifirag_core.corpus.sites import iter_folder_pages
from hifirag_core.retrieval.embeddings import Embedder, encoder_layout, length_batches, minilm_path
from tests import PROJECT_ROOT
from tests.support.sitegen import BASE_URL

ROOT = PROJECT_ROOT

# Texts of very different lengths, so that batches really are cut by length and padding.
TEXTS = [
    "VACUUM FULL takes an exclusive lock on the table.",
    "How do I configure logging?",
    " ".join(f"word{i}" for i in range(400)),  # longer than the model's 256-token window
    "Django's ORM builds SQL lazily: a QuerySet runs its query when it is iterated, sliced or printed. " * 6,
    "ok",
    *[f"Sentence number {i} about PostgreSQL indexes and the planner's choice of {i % 7} scans." for i in range(40)],
]


def test_length_batches_cover_every_text_once_within_the_limits():
    lengths = [256] * 40 + [30] * 20 + [10] * 5 + [200, 3, 77]
    batches = length_batches(lengths, batch_size=64, max_padding=0.25, max_tokens=4096)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 64
        assert len(batch) * longest <= 4096 or len(batch) == 1
        # padding within the limit, except a text that could only join a batch on its own
        assert sum(lengths[i] for i in batch) >= 0.75 * len(batch) * longest or len(batch) == 1
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches), reverse=True)


def test_length_batches_of_nothing_and_of_one():
    assert length_batches([], 64) == []
    assert length_batches([5], 64) == [[0]]


def test_the_layout_is_one_thread_per_replica_unless_overridden(monkeypatch):
    monkeypatch.delenv("HIFIRAG_TORCH_THREADS", raising=False)
    monkeypatch.delenv("HIFIRAG_ENCODERS", raising=False)
    threads, replicas = encoder_layout()
    assert threads == 1 and 1 <= replicas <= 4
    monkeypatch.setenv("HIFIRAG_TORCH_THREADS", "2")
    monkeypatch.setenv("HIFIRAG_ENCODERS", "3")
    assert encoder_layout() == (2, 3)


@pytest.fixture(scope="module")
def reference_vectors() -> np.ndarray:
    """The vectors of one plain SentenceTransformer call, as the embedder computed them before."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_path()), device="cpu")
    return model.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_batched_replicas_give_the_plain_models_vectors(reference_vectors, tmp_path, monkeypatch, runtime):
    from hifirag_core.retrieval import embeddings

    monkeypatch.setattr(embeddings, "_ENCODERS", {})  # a fresh process's state
    monkeypatch.setenv("HIFIRAG_MINILM_RUNTIME", runtime)
    vectors = Embedder(tmp_path / "v.sqlite").encode(TEXTS)
    assert embeddings.encoder(minilm_path())._replica().name == runtime
    assert vectors.shape == reference_vectors.shape
    # Only the order of float additions differs (batch shapes): cosine scores agree to 1e-5.
    np.testing.assert_allclose(vectors, reference_vectors, atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_concurrent_encodes_from_many_threads_agree(reference_vectors, tmp_path):
    embedder = Embedder(tmp_path / "v.sqlite")
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:  # each thread asks for an overlapping slice, as questions in flight do
            results[n] = embedder.encode(TEXTS[n:] + TEXTS[:n])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, vectors in results.items():
        np.testing.assert_allclose(vectors, np.roll(reference_vectors, -n, axis=0), atol=1e-5)


def test_a_small_call_is_cut_by_length_too(reference_vectors, tmp_path, monkeypatch):
    """Most calls embed a few texts (a question's titles, one section's sentences): padding them all to
    the longest wasted a quarter of the forward passes, so they are cut by length like large ones."""
    from hifirag_core.retrieval import embeddings

    monkeypatch.setattr(embeddings, "_ENCODERS", {})
    picked = [2, 3, 0, 1, 4, 5, 6]  # two long texts among five short ones
    widths: list[list[int]] = []
    real_forward = embeddings.Encoder._forward

    def forward(self, texts):
        widths.append(self._replica().token_lengths(texts))
        return real_forward(self, texts)

    monkeypatch.setattr(embeddings.Encoder, "_forward", forward)
    vectors = Embedder(tmp_path / "v.sqlite").encode([TEXTS[i] for i in picked])
    np.testing.assert_allclose(vectors, reference_vectors[picked], atol=1e-5)
    assert len(widths) >= 2 and sum(len(batch) for batch in widths) == len(picked)
    for batch in widths:  # no batch pads a short text to a long one's width
        assert sum(batch) >= (1 - embeddings.MAX_PADDING) * len(batch) * max(batch) or len(batch) == 1


def test_embedding_on_the_default_runtime_never_imports_torch():
    """The point of the ONNX runtime: a process that embeds does not pay for importing torch."""
    code = ("import sys; from hifirag_core.retrieval.embeddings import Embedder; "
            "v = Embedder(None).encode(['VACUUM FULL takes an exclusive lock.']); "
            "print(v.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "HIFIRAG_MINILM_RUNTIME"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(1,", "384)", "False", "False"]


def test_the_onnx_export_is_made_once_and_reused(tmp_path, monkeypatch):
    from hifirag_core.retrieval import minilm as model_runtime

    monkeypatch.setenv("HIFIRAG_MODEL_CACHE", str(tmp_path / "models"))
    exports: list[Path] = []
    real_export = model_runtime._export
    monkeypatch.setattr(model_runtime, "_export", lambda path, dest: (exports.append(dest), real_export(path, dest)))
    first = model_runtime.prepare_onnx(minilm_path(), "abc123")
    second = model_runtime.prepare_onnx(minilm_path(), "abc123")
    assert first == second and first.exists() and len(exports) == 1
    assert [p.name for p in first.parent.glob("*.partial")] == []  # written under another name, then renamed
    assert model_runtime.prepare_onnx(minilm_path(), "def456") != first  # other weights, another export


def test_a_failed_export_falls_back_to_sentence_transformers_with_a_warning(tmp_path, monkeypatch, caplog):
    from hifirag_core.retrieval import minilm as model_runtime

    monkeypatch.setenv("HIFIRAG_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(model_runtime, "_WARNED", set())

    def broken(path, dest):
        raise RuntimeError("no exporter here")

    monkeypatch.setattr(model_runtime, "_export", broken)
    with caplog.at_level("WARNING", logger=model_runtime.__name__):
        runtime = model_runtime.load_minilm(minilm_path(), "broken1", threads=1)
        again = model_runtime.load_minilm(minilm_path(), "broken1", threads=1)
    assert runtime.name == again.name == "torch"
    assert runtime.embed(["ok"]).shape == (1, 384)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "no exporter here" in warnings[0]  # said once, not per thread


def test_an_unknown_runtime_is_a_clear_error(monkeypatch):
    from hifirag_core.retrieval import minilm as model_runtime

    monkeypatch.setenv("HIFIRAG_MINILM_RUNTIME", "tensorrt")
    with pytest.raises(ValueError, match="choose one of onnx, torch"):
        model_runtime.load_minilm(minilm_path(), "x", threads=1)


def _build(root: Path, site_dir: Path) -> store.Corpus:
    from hifirag_core.store.blobs import blob_store

    return store.Corpus.build(root / "corpus" / "docs", blob_store(root), iter_folder_pages(site_dir, BASE_URL),
                              sources=["test"])


def test_a_corpus_parsed_in_worker_processes_equals_one_parsed_inline(site_dir, tmp_path, monkeypatch):
    inline = _build(tmp_path / "inline", site_dir)
    monkeypatch.setattr(store, "PARALLEL_BUILD_PAGES", 2)  # the test site is small: parse it in workers too
    parallel = _build(tmp_path / "parallel", site_dir)
    assert pq.read_table(inline.pages_path).equals(pq.read_table(parallel.pages_path))
    a, b = inline.index(), parallel.index()
    for query in ("installing tidewater", "configure sync of folders", "zzz"):
        assert [(h.url, h.snippet) for h in a.search(query, 5)] == [(h.url, h.snippet) for h in b.search(query, 5)]


# A user's script that builds a corpus at import time, with no ``if __name__ == "__main__":`` guard:
# each spawned worker re-imports it and fails to start, which breaks the pool.
UNGUARDED_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {project!r})
from hifirag_core.corpus import store
from hifirag_core.corpus.sites import iter_folder_pages
from hifirag_core.store.blobs import blob_store
store.PARALLEL_BUILD_PAGES = 2
root = Path({root!r})
corpus = store.Corpus.build(root / "corpus" / "docs", blob_store(root), iter_folder_pages(Path({site!r}), {base!r}),
                            sources=["test"])
print("pages", corpus.pages_path)
"""


def test_a_build_whose_workers_cannot_start_parses_in_process_and_loses_no_page(site_dir, tmp_path):
    import subprocess
    import sys

    inline = _build(tmp_path / "inline", site_dir)
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT.format(project=str(PROJECT_ROOT), root=str(tmp_path / "script"),
                                              site=str(site_dir), base=BASE_URL))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert pq.read_table(inline.pages_path).equals(pq.read_table(store.Corpus(tmp_path / "script" / "corpus" / "docs", None).pages_path))


def test_a_shortlisted_hybrid_embeds_only_the_bm25_best_and_scores_them_as_before(tmp_path):
    from hifirag_core.retrieval.scoring import bm25_scores, hybrid_scores

    question = "How do I reclaim space with VACUUM FULL?"
    texts = ["VACUUM FULL rewrites the table to reclaim space.", "Indexes speed up lookups.",
             "The planner estimates row counts.", "Routine vacuuming reclaims space for reuse.",
             "Backups with pg_dump.", "Locks taken by VACUUM FULL block writes."]
    full = hybrid_scores(question, texts, Embedder(tmp_path / "a.sqlite"))
    embedder = Embedder(tmp_path / "b.sqlite")
    short = hybrid_scores(question, texts, embedder, shortlist=3)
    lexical = bm25_scores(question, texts)
    chosen = set(np.argsort(-lexical, kind="stable")[:3].tolist())
    assert embedder.encoded == 3 + 1  # the shortlist and the question
    for i in range(len(texts)):
        expected = full[i] if i in chosen else 0.3 * lexical[i] / lexical.max()
        assert short[i] == pytest.approx(expected, abs=1e-6)
    # a set no longer than the shortlist is scored in full
    np.testing.assert_allclose(hybrid_scores(question, texts, embedder, shortlist=6), full, atol=1e-6)


def test_every_embedder_of_a_process_shares_one_encoder_and_its_replicas(tmp_path, monkeypatch):
    from hifirag_core.retrieval import embeddings

    monkeypatch.setattr(embeddings, "_ENCODERS", {})  # a fresh process's state
    monkeypatch.setenv("HIFIRAG_ENCODERS", "2")
    loads: list[str] = []
    real_load = embeddings._load_replica

    def counting_load(path):
        loads.append(threading.current_thread().name)
        return real_load(path)

    monkeypatch.setattr(embeddings, "_load_replica", counting_load)
    first, second = Embedder(tmp_path / "a.sqlite"), Embedder(tmp_path / "b.sqlite")
    results: dict[str, np.ndarray] = {}

    def work(name: str, embedder: Embedder) -> None:
        results[name] = embedder.encode(TEXTS)

    threads = [threading.Thread(target=work, args=(n, e)) for n, e in (("a", first), ("b", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(embeddings._ENCODERS) == [minilm_path()]  # one encoder for both embedders
    shared = embeddings._ENCODERS[minilm_path()]
    assert shared.workers == 2
    # at most one replica per worker thread however many embedders and callers there are
    assert 1 <= len(loads) <= 2 and len(set(loads)) == len(loads)
    assert all(name.startswith("minilm") for name in loads)
    assert first.encoded == second.encoded == len(TEXTS)  # separate caches: each computed its own
    np.testing.assert_allclose(results["a"], results["b"], atol=1e-6)
    loads.clear()
    Embedder(tmp_path / "c.sqlite").encode(TEXTS[:5])
    assert loads == []  # a third embedder loads nothing new


# One documentation page with many sections, as the section ranker sees it: more previews than the
# shortlist, of which three are about the question.
_TOPICS = [
    ("Requirements", "Tidewater needs Python 3.9 or newer and the libyaml headers to build."),
    ("Installing from PyPI", "Run pip install tidewater inside a virtual environment."),
    ("Installing from source", "Clone the repository and run pip install -e . from its root."),
    ("First sync", "tidewater sync SRC DEST copies new and changed files from SRC to DEST."),
    ("Limiting bandwidth", "The --max-rate option limits the bandwidth a sync uses, e.g. --max-rate 2M."),
    ("Bandwidth schedules", "A schedule file sets different --max-rate limits for office hours and nights."),
    ("Conflict resolution", "When a file changed on both sides, the newest version wins and the other is kept."),
    ("Excluding files", "Patterns in .tidewaterignore leave files out of every sync."),
    ("Profiles", "A profile groups settings; select one with --profile NAME."),
    ("Logging", "Set log_level in the config file to debug to see every file compared."),
    ("Log rotation", "Logs rotate daily and seven days are kept unless log_keep says otherwise."),
    ("Dry runs", "--dry-run prints what a sync would do without copying anything."),
    ("Checksums", "By default files compare by size and time; --checksum compares their contents."),
    ("Symbolic links", "Links are copied as links; --follow-links copies what they point to."),
    ("Permissions", "File modes are kept on POSIX systems and ignored on Windows."),
    ("Scheduling with cron", "Add a crontab line that runs tidewater sync every hour."),
    ("Scheduling with systemd", "A timer unit can start the sync service at boot and every hour."),
    ("Remote targets over SSH", "A DEST of the form host:path copies over SSH with your keys."),
    ("Encryption at rest", "The encrypt option stores files encrypted with a key from the keyring."),
    ("Upgrading", "Read the changelog before upgrading; the config format changed in 2.0."),
    ("Uninstalling", "pip uninstall tidewater removes the program but leaves your config."),
    ("Getting help", "Ask on the mailing list or open an issue with the output of tidewater doctor."),
    ("Exit codes", "0 means success, 1 a partial sync, 2 bad arguments."),
    ("Environment variables", "TIDEWATER_CONFIG points to another config file."),
]


def _previews():
    from hifirag_core.types import SectionPreview

    return [SectionPreview(f"s{i}", heading, f"Tidewater manual > {heading}: {text}")
            for i, (heading, text) in enumerate(_TOPICS)]


def _rank_both_ways(question: str, tmp_path: Path) -> tuple[list[int], list[float], list[int], np.ndarray, set[int]]:
    """The ranker's kept sections and scores, the kept sections and scores of scoring every preview (the
    path before the shortlist), and the shortlist."""
    from hifirag_core.backends import offline
    from hifirag_core.config import build_config
    from hifirag_core.retrieval.scoring import bm25_scores, hybrid_scores, keep_relative
    from hifirag_core.types import PageOverview

    cfg = build_config()
    embedder = Embedder(tmp_path / "v.sqlite")
    previews = _previews()
    assert len(previews) > offline.SECTION_SHORTLIST
    page = PageOverview("https://docs.example/manual", "Tidewater manual", "")
    decision = offline.OfflineFilterModel(embedder, cfg).rank_sections(question, page, previews, max_sections=4)
    texts = [p.preview for p in previews]
    full = hybrid_scores(question, texts, embedder)
    before = keep_relative(full, min_relative=cfg.section_rank.min_relative_score, limit=4, floor=0.1)
    shortlist = set(np.argsort(-bm25_scores(question, texts), kind="stable")[:offline.SECTION_SHORTLIST].tolist())
    return decision.value, decision.scores, before, full, shortlist


@pytest.mark.parametrize("question", [
    "How can I limit the bandwidth tidewater uses during a sync?",
    "what happens when a file changed on both sides during sync",
    "How do I run a sync every hour automatically?",
])
def test_the_section_shortlist_keeps_what_scoring_every_section_kept(question, tmp_path):
    kept, scores, before, full, _ = _rank_both_ways(question, tmp_path)
    assert kept == before
    for i in kept:  # a kept section was in the shortlist, so its score is the full one
        assert scores[i] == pytest.approx(float(full[i]), abs=1e-6)


def test_where_the_shortlist_differs_it_drops_only_sections_bm25_left_out(tmp_path):
    """The known difference: when the question shares with most sections only a word every section has
    (here the product name), BM25 cannot tell them apart, and a section MiniLM alone found related
    ("Installing from source" for a question on the Python version) keeps only its lexical score. The
    best section stays; the others the ranker keeps are scored exactly as before."""
    kept, scores, before, full, shortlist = _rank_both_ways("Which Python version does tidewater need?", tmp_path)
    assert kept[0] == before[0] == 0  # Requirements
    dropped = set(before) - set(kept)
    assert dropped == {2} and not dropped & shortlist
    assert len(set(kept) & set(before)) == 3
    for i in kept:
        assert i in shortlist and scores[i] == pytest.approx(float(full[i]), abs=1e-6)
