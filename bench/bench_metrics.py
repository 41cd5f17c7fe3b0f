"""Seconds to score 300 answers with each evaluation metric on this machine (prints; asserts nothing).

The 300 pairs: the MMU-RAGent validation references (``../shared/data/mmu_ragent/t2t_val.jsonl``;
the two null references are skipped and the list is cycled to 300) scored against "answers" that
are the FAQ set's gold answers, cycled: real English of realistic length, unrelated content, which
is all a timing needs. With ``--run-id`` the answers of that run are scored instead.

Each metric runs in its own subprocess, so model loading is measured (``load``) apart from scoring
(``score``), and no metric benefits from another's warm caches:

* ROUGE-L F1 (rouge-score, stemmer on);
* BERTScore F1 with MiniLM (6 layers), and with DeBERTa-xlarge-MNLI layer 40 when
  ``--deberta-path`` (or ``$HIFIRAG_DEBERTA_PATH``) names a local folder holding it;
* the echo floor (the question as the answer) costs the same as the metric it floors;
* citation precision and recall: MiniLM sentence vectors with a cold (temporary) vector cache,
  each answer's sentences citing a source whose text is the reference;
* the paired bootstrap interval (10,000 resamples) over 300 values.

    /work/main/.venv/bin/python bench/bench_metrics.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.resources import shared_data_dir  # noqa: E402

N = 300
MMU = shared_data_dir() / "mmu_ragent" / "t2t_val.jsonl"
FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"


def pairs(run_id: str | None, data_root: Path | None) -> tuple[list[str], list[str]]:
    """300 (answer, reference) pairs."""
    refs = [r["reference"] for r in map(json.loads, MMU.read_text().splitlines()) if r.get("reference")]
    if run_id:
        from hifirag_core.resources import data_root as resolve
        from hifirag_core.store.warehouse import Warehouse

        rows = Warehouse(resolve(data_root)).query(
            """SELECT coalesce(a.text, ''), q.reference FROM questions q LEFT JOIN answers a USING (run_id, question_id)
               WHERE q.run_id = ? AND q.reference IS NOT NULL ORDER BY q.line_no""", [run_id]).rows
        answers, refs = [r[0] for r in rows], [r[1] for r in rows]
    else:
        answers = [r["answer"] for r in map(json.loads, FAQ.read_text().splitlines())]
    return [answers[i % len(answers)] for i in range(N)], [refs[i % len(refs)] for i in range(N)]


def child(metric: str, answers: list[str], refs: list[str], deberta: str | None) -> dict:
    """Time one metric in this (fresh) process: model load, then scoring all pairs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    load = 0.0
    if metric == "rouge_l":
        from hifirag_core.metrics.text_metrics import rouge_l_f1

        t = time.perf_counter()
        rouge_l_f1(answers, refs)
    elif metric in ("bertscore_minilm", "bertscore_deberta"):
        from hifirag_core.metrics.semantic import bertscore_f1, load_scorer, select_bertscore

        spec = select_bertscore(deberta if metric == "bertscore_deberta" else None)
        t = time.perf_counter()
        load_scorer(spec, 32)
        load = time.perf_counter() - t
        t = time.perf_counter()
        bertscore_f1(answers, refs, spec)
    elif metric == "citations":
        import numpy as np

        from hifirag_core.evaluation.eval_config import CITATION_SUPPORT_THRESHOLD
        from hifirag_core.metrics.citations import citation_score, source_passages
        from hifirag_core.retrieval.embeddings import Embedder
        from hifirag_core.text import split_sentences

        with tempfile.TemporaryDirectory() as tmp:
            embedder = Embedder(Path(tmp) / "vectors.sqlite")
            t = time.perf_counter()
            embedder.encode(["warm up the model"])
            load = time.perf_counter() - t

            def sim(a: list[str], b: list[str]) -> np.ndarray:
                return embedder.encode(a) @ embedder.encode(b).T

            t = time.perf_counter()
            for answer, ref in zip(answers, refs, strict=True):
                marked = " ".join(f"{s} [1]" for s in split_sentences(answer))
                citation_score(marked, {1: source_passages(ref)}, sim, CITATION_SUPPORT_THRESHOLD)
    elif metric == "paired_bootstrap":
        from hifirag_core.metrics.bootstrap import paired_bootstrap_ci
        from hifirag_core.metrics.text_metrics import rouge_l_f1

        values = rouge_l_f1(answers, refs)
        t = time.perf_counter()
        paired_bootstrap_ci(values, values[::-1])
    else:
        raise SystemExit(f"unknown metric {metric}")
    return {"metric": metric, "load_s": load, "score_s": time.perf_counter() - t}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-id", help="score this run's answers instead of the fixed pairs")
    parser.add_argument("--data-root", type=Path)
    parser.add_argument("--deberta-path", default=os.environ.get("HIFIRAG_DEBERTA_PATH"))
    parser.add_argument("--child")
    args = parser.parse_args()
    if not MMU.exists() or not FAQ.exists():
        print(f"needs the shared data ({MMU}, {FAQ}); set HIFIRAG_SHARED_DATA")
        return
    answers, refs = pairs(args.run_id, args.data_root)
    if args.child:
        print(json.dumps(child(args.child, answers, refs, args.deberta_path)))
        return
    metrics = ["rouge_l", "bertscore_minilm", "citations", "paired_bootstrap"]
    deberta_ok = bool(args.deberta_path) and Path(args.deberta_path).is_dir()
    if deberta_ok:
        metrics.insert(2, "bertscore_deberta")
    load = os.getloadavg()
    print(f"{N} answers (mean {sum(len(a.split()) for a in answers) / N:.0f} words) against references "
          f"(mean {sum(len(r.split()) for r in refs) / N:.0f} words); {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at start")
    print(f"{'metric':<22}{'model load s':>14}{'score 300 s':>14}{'answers/s':>12}")
    for metric in metrics:
        cmd = [sys.executable, __file__, "--child", metric]
        if args.run_id:
            cmd += ["--run-id", args.run_id] + (["--data-root", str(args.data_root)] if args.data_root else [])
        if args.deberta_path:
            cmd += ["--deberta-path", args.deberta_path]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            print(f"{metric:<22} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '?'}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        rate = N / r["score_s"] if r["score_s"] else float("inf")
        print(f"{metric:<22}{r['load_s']:>14.2f}{r['score_s']:>14.2f}{rate:>12.1f}")
    if not deberta_ok:
        print("bertscore_deberta     not measured: no local microsoft/deberta-xlarge-mnli folder "
              "(--deberta-path or $HIFIRAG_DEBERTA_PATH); nothing is downloaded")
    print("The echo floor of a metric costs what the metric costs (one more pass over the questions).")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")


if __name__ == "__main__":
    main()
