"""A question that follows no earlier answer keeps the cache keys it had before follow-up turns existed.

``tests/support/data/cache_keys_without_follows.json`` holds every stage's cache key (first pass and follow-up rounds) of
four questions over the Tidewater site under the default run variant, as main at 45495a0 (the commit before
follow-up turns) computed them, but for the answer stage's: since issue 41 the answerability decision it reads names
the calibration that made it, so its key changed once (regenerated then, the other 40 keys unchanged). Follow-up turns add inputs to the query plan, fetch and sections stages only for a
question that names an earlier answer, and a column to query plans that stays out of the fingerprint while
empty; if any of that leaked into a plain question's key, every stored stage of every run would be computed
(and paid for) again. A deliberate key change elsewhere (a stage's version bumped) regenerates the file:
``python -m tests.unit.pipeline.test_follow_up_keys`` writes it from the code as it is.

A key is compared exactly where the stage's inputs hold no float. Elsewhere the inputs carry MiniLM's float32
scores, whose last bits differ between CPUs: on an AVX-512 machine 24 of the 44 keys written on an AVX2 one
differed, every one of them downstream of a score, and none where the inputs hold no float. So those steps are
compared by their shape: the key's payload with every float of its inputs blanked, which still holds every
field, record and decision, and the config.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hifirag_core.questions import Question
from tests import SUPPORT
from tests.support.sitegen import BASE_URL, QUESTIONS, write_examples, write_site

GOLDEN = SUPPORT / "data" / "cache_keys_without_follows.json"
EXAMPLES = "examples.jsonl"
ASKED = [
    Question(q["iid"], q["query"], None, n, {}) for n, q in enumerate(QUESTIONS, 1)
] + [Question("S1", "How do I install Tidewater with pip?", None, 4, {"sites": ["docs.tidewater.example"],
                                                                      "length": "short"})]


def pipeline_keys(data_root: Path) -> dict[str, dict[str, list[str]]]:
    """Per question: ``keys``, "stage round cache-key" of each step in order, and ``shapes``, "stage round
    shape-hash" (:func:`_shape`), under the default run variant. The few-shot examples are the test site's, as
    ``examples.jsonl`` in the working directory: their path is part of the refine pass's config slice, so it is
    the same relative path wherever the keys are computed."""
    from hifirag_core.llm.examples import resolve_example_set
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.runner import QuestionRunner
    from hifirag_core.pipeline.specs import StageSpec
    from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT, variant_overrides
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.profiles import resolve_config

    cfg = resolve_config(variant=DEFAULT_RUN_VARIANT, variant_settings=variant_overrides(DEFAULT_RUN_VARIANT),
                         overrides=[f"generation.examples={EXAMPLES}"])
    write_examples(Path(EXAMPLES))
    rt = build_runtime(RunContext("keys", str(data_root), cfg, resolve_example_set(EXAMPLES, "custom")))
    shapes: dict[str, str] = {}  # cache key -> its shape
    key_of = StageSpec.cache_key

    def recording(spec, *args, **kwargs):
        key = key_of(spec, *args, **kwargs)
        shapes[key] = _shape(spec.key_payload(*args, **kwargs))
        return key

    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(StageSpec, "cache_key", recording)
        for question in ASKED:
            ledger = QuestionRunner(question, rt).run().ledger
            out[question.id] = {"keys": [f"{row.stage} {row.round} {row.cache_key}" for row in ledger],
                                "shapes": [f"{row.stage} {row.round} {shapes[row.cache_key]}" for row in ledger]}
    return out


def _blank_floats(value):
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, dict):
        return {k: _blank_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_blank_floats(v) for v in value]
    return value


def _shape(payload: dict) -> str:
    """The payload's hash with the floats of its inputs blanked; ``=`` where they hold none (then the key itself is
    compared)."""
    from hifirag_core.hashing import canonical_json, stable_hash

    inputs = json.loads(canonical_json(payload["inputs"]))
    blanked = _blank_floats(inputs)
    if blanked == inputs:
        return "="
    return stable_hash({**payload, "inputs": blanked}, 32)


def _data_root(folder: Path) -> Path:
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    root = folder / "data"
    corpus = corpus_at(root, "docs")
    build_from_folder(corpus.root, corpus.blobs, write_site(folder / "site"), BASE_URL)
    return root


def test_a_question_without_follows_keeps_every_cache_key_it_had(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    computed = pipeline_keys(_data_root(tmp_path))
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert {q: c["shapes"] for q, c in computed.items()} == golden["shapes"]
    exact = 0
    for q, c in computed.items():
        for key, shape, want in zip(c["keys"], c["shapes"], golden["keys"][q], strict=True):
            if shape.endswith(" ="):  # inputs without a float: the key itself
                assert key == want
                exact += 1
    assert sum(len(c["keys"]) for c in computed.values()) >= 4 * 10  # every stage of every question was compared
    assert exact == 4 * 5  # query plan, search, URL filter, sections, refine: their keys compared exactly


if __name__ == "__main__":  # python -m tests.unit.pipeline.test_follow_up_keys: write the golden file from the code as it is
    import os
    import subprocess
    import tempfile

    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        computed = pipeline_keys(_data_root(Path(tmp)))
        os.chdir(here)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    GOLDEN.write_text(json.dumps({"commit": commit, "keys": {q: c["keys"] for q, c in computed.items()},
                                  "shapes": {q: c["shapes"] for q, c in computed.items()}}, indent=1) + "\n",
                      encoding="utf-8")
    print(f"wrote {GOLDEN} ({sum(len(c['keys']) for c in computed.values())} keys, at {commit})", file=sys.stderr)
