"""The cost of the answer-type signal: spaCy's recogniser on kept sentences, and what the answerability check pays.

Sentences come from the shared data (the docs FAQ answers and MedQuAD answers), the text the check reads:

    .venv/bin/python bench/bench_entities.py [--sentences 2000]

Prints the load time, sentences and tokens per second with the recogniser alone (what
``hifirag_core/evidence/entities.py`` loads) and with the whole small pipeline, side by side in one run,
and the time of a second pass over the same sentences (the per-sentence cache). Asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def sentences(n: int) -> list[str]:
    from hifirag_core.resources import shared_data_dir
    from hifirag_core.text import split_sentences

    shared = shared_data_dir()
    out: list[str] = []
    with (shared / "docs_faq" / "faq_qa.jsonl").open(encoding="utf-8") as f:
        for line in f:
            out += split_sentences(json.loads(line)["answer"])
    with gzip.open(shared / "health" / "medquad_docs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            for pair in json.loads(line)["qa"]:
                out += split_sentences(pair["answer"])[:3]
            if len(out) >= 2 * n:
                break
    half = n // 2
    return list(dict.fromkeys(out[:half] + out[-(n - half):]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=2000)
    args = parser.parse_args()
    import spacy

    from hifirag_core.evidence import entities

    texts = sentences(args.sentences)
    print(f"{len(texts)} sentences, spaCy {spacy.__version__}, {entities.MODEL_PACKAGE}")
    started = time.perf_counter()
    entities.labels(texts[:1])
    print(f"recogniser alone: load {time.perf_counter() - started:.1f} s (with the first sentence)")
    started = time.perf_counter()
    entities.labels(texts)
    took = time.perf_counter() - started
    tokens = sum(len(t.split()) for t in texts)
    print(f"recogniser alone: {len(texts) / took:.0f} sentences/s, {tokens / took:.0f} words/s")
    started = time.perf_counter()
    entities.labels(texts)
    print(f"again (cached): {len(texts) / (time.perf_counter() - started):.0f} sentences/s")
    started = time.perf_counter()
    nlp = spacy.load(entities.model_path())
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=64):
        pass
    took_full = time.perf_counter() - started
    print(f"whole pipeline ({', '.join(nlp.pipe_names)}): load {loaded:.1f} s, {len(texts) / took_full:.0f} "
          f"sentences/s; the recogniser alone is {took_full / took:.1f}x as fast")


if __name__ == "__main__":
    main()
