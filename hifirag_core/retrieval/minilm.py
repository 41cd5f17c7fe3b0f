"""MiniLM's forward pass, on ONNX Runtime or on sentence-transformers, with the same vectors.

Importing sentence-transformers (and with it torch and transformers) costs 5-8 s of CPU in every
process that embeds: the demo, the loop, each Dask worker. ONNX Runtime imports in 0.2 s and runs the
same graph as fast on one thread. So the default runtime runs an ONNX export of the registry
package's MiniLM weights, made once per machine with torch (``prepare_onnx``, which ``make setup``
calls; a process that finds no export makes it on first use) and kept in the model cache
(``HIFIRAG_MODEL_CACHE``, default ``~/.cache/hifirag/models``). Tokenization is the model folder's
own ``tokenizer.json``; pooling and normalization are the ones its sentence-transformers modules
declare (mean of the token vectors, then unit length), checked before the ONNX path is taken.

``HIFIRAG_MINILM_RUNTIME=torch`` keeps the sentence-transformers path, which is also the fallback
where ONNX Runtime is missing or the export fails (logged once). Both give the same vectors within
1e-5 (tests/unit/retrieval/test_speed_paths.py), so they share one vector cache and one stage cache identity.

Process cache: ``_SESSIONS`` holds one ONNX Runtime session per model folder, shared by the encoding
threads (a session holds the weights and takes a second to open).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

RUNTIMES = ("onnx", "torch")
ONNX_OPSET = 17
# the sentence-transformers modules the ONNX path reproduces: transformer, mean pooling, unit length
_EXPECTED_MODULES = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                     "sentence_transformers.models.Normalize"]


class MiniLM(Protocol):
    """One runtime's forward pass for a model folder."""

    name: str

    def token_lengths(self, texts: Sequence[str]) -> list[int]: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def chosen_runtime() -> str:
    runtime = os.environ.get("HIFIRAG_MINILM_RUNTIME", "onnx")
    if runtime not in RUNTIMES:
        raise ValueError(f"HIFIRAG_MINILM_RUNTIME={runtime!r}: choose one of {', '.join(RUNTIMES)}")
    return runtime


def model_cache() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hifirag" / "models"
    return Path(os.environ.get("HIFIRAG_MODEL_CACHE") or default)


def onnx_path(model_path: Path, fingerprint: str) -> Path:
    """Where the ONNX export of a model folder lives; the fingerprint changes with its weights."""
    return model_cache() / f"sentence-model-{fingerprint}-opset{ONNX_OPSET}.onnx"


class OnnxMiniLM:
    """The exported graph on ONNX Runtime; ``run`` is thread-safe, so one session serves every thread."""

    name = "onnx"

    def __init__(self, model_path: Path, graph: Path, threads: int):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.max_length = _max_seq_length(model_path)
        self.tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        self.tokenizer.no_padding()  # padding is done here, per batch
        self.tokenizer.enable_truncation(self.max_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about the exporter's unused initializers are noise
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self.tokenizer.encode_batch(list(texts))]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encoded):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                            "token_type_ids": np.zeros_like(ids)})
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32)


class TorchMiniLM:
    """sentence-transformers' own forward pass (one instance per thread: its tokenizer is not thread-safe)."""

    name = "torch"

    def __init__(self, model_path: Path, threads: int):
        import torch
        from sentence_transformers import SentenceTransformer

        if torch.get_num_threads() != threads:  # process-wide; the first load sets it
            torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(model_path), device="cpu")

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        ids = self.model.tokenizer(list(texts), truncation=True, max_length=self.model.max_seq_length)["input_ids"]
        return [len(x) for x in ids]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=len(texts), normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype(np.float32)


_SESSIONS: dict[Path, OnnxMiniLM] = {}
_LOCK = threading.Lock()
_WARNED: set[str] = set()


def load_minilm(model_path: Path, fingerprint: str, threads: int) -> MiniLM:
    """A runtime for one encoding thread: the process's shared ONNX session, else a torch instance."""
    # Never reach for a hub: the model is a local folder.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with _LOCK:
        if chosen_runtime() == "onnx":
            graph = onnx_path(model_path, fingerprint)
            if graph in _SESSIONS:
                return _SESSIONS[graph]
            try:
                _check_modules(model_path)
                prepare_onnx(model_path, fingerprint)
                _SESSIONS[graph] = OnnxMiniLM(model_path, graph, threads)
                return _SESSIONS[graph]
            except Exception as exc:  # noqa: BLE001 - any failure here leaves the slower, equal path
                if str(graph) not in _WARNED:
                    _WARNED.add(str(graph))
                    log.warning("MiniLM on ONNX Runtime is not available (%s: %s); using sentence-transformers",
                                type(exc).__name__, exc)
        return TorchMiniLM(model_path, threads)


def prepare_onnx(model_path: Path, fingerprint: str) -> Path:
    """The ONNX export of a model folder, made now unless it exists (one process exports; others wait)."""
    graph = onnx_path(model_path, fingerprint)
    if graph.exists():
        return graph
    graph.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(graph.with_suffix(".lock")):
        if not graph.exists():
            partial = graph.with_suffix(f".{os.getpid()}.partial")
            try:
                _export(model_path, partial)
                os.replace(partial, graph)
            finally:
                partial.unlink(missing_ok=True)
    return graph


def _export(model_path: Path, dest: Path) -> None:
    """Trace the transformer's forward pass (pooling stays in numpy) with dynamic batch and length axes."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = Hidden(AutoModel.from_pretrained(str(model_path)).eval())
    example = torch.ones(2, 8, dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad(), _quiet():
        torch.onnx.export(model, (example, example, torch.zeros_like(example)), str(dest),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                        "last_hidden_state": axes},
                          opset_version=ONNX_OPSET, dynamo=False)


def _check_modules(model_path: Path) -> None:
    modules = [m["type"] for m in json.loads((model_path / "modules.json").read_text())]
    pooling = json.loads((model_path / "1_Pooling" / "config.json").read_text())
    means_only = pooling.get("pooling_mode_mean_tokens") and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens")
    if modules != _EXPECTED_MODULES or not means_only:
        raise ValueError(f"{model_path.name} is not a mean-pooled, normalized transformer")


def _max_seq_length(model_path: Path) -> int:
    return int(json.loads((model_path / "sentence_bert_config.json").read_text())["max_seq_length"])


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The TorchScript exporter warns about its own deprecation and about traced shapes; none applies here."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
