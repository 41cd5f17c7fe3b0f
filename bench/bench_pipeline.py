"""Offline throughput and Prefect's overhead, measured side by side in one run.

Answers the same N FAQ questions (FAQ pages excluded from the corpus) twice, each in a fresh
subprocess with a cold stage cache and a cold vector cache, so both pay the same model load and
the same embeddings:

* ``loop``: the stage functions of ``hifirag_core.stages`` called in a plain Python loop, one
  question after another, with records written to the warehouse as the flow writes them;
* ``flow``: the Prefect flow (one task per stage, questions in parallel, caching and result
  persistence on), with its temporary API server.

It prints questions per minute for each and the ratio of the flow's wall time to the loop's.
The flow's time is reported twice: the whole process (which includes starting Prefect's
temporary server) and the flow body (from the run's own record), because a deployment talks to a
server that is already running.

    .venv/bin/python bench/bench_pipeline.py --questions 50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.corpus.sources import FAQ_PAGE_PATTERNS, shared_data_dir  # noqa: E402

OUT = ROOT / "bench" / "out" / "pipeline"
FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
OVERRIDES = [f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}"]


def _fresh_root(name: str, base: Path) -> Path:
    """A data root that shares the built corpus but has empty caches and an empty warehouse."""
    root = OUT / name
    shutil.rmtree(root, ignore_errors=True)
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "docs").symlink_to(base / "corpus" / "docs")
    (root / "blobs").symlink_to(base / "blobs")
    return root


def run_loop(root: Path, n: int) -> dict:
    """The stage functions in a plain loop (no Prefect)."""
    from hifirag_core.pipeline import run_question, write_output
    from hifirag_core.runs import plan_run, run_context, start_run
    from hifirag_core.runtime import build_runtime
    from hifirag_core.warehouse import Warehouse

    started = time.perf_counter()
    plan = plan_run(FAQ, sample=n, overrides=OVERRIDES, root=root, run_id="bench-loop")
    warehouse = Warehouse(root)
    start_run(warehouse, plan)
    rt = build_runtime(run_context(plan))
    answered = 0
    for q in plan.questions.questions:
        outputs = run_question(q, rt)
        for out in outputs.values():
            write_output(warehouse, plan.run_id, q.id, out)
        answered += outputs["answer"].status == "ok"
    warehouse.compact_run(plan.run_id)
    return {"seconds": time.perf_counter() - started, "answered": answered}


def run_flow(root: Path, n: int) -> dict:
    """The Prefect flow, as `hifirag run` runs it."""
    from flows.environment import configure, stage_cache_at

    os.environ["PREFECT_HOME"] = str(root / "prefect-home")
    configure(root)
    started = time.perf_counter()
    from flows.answer import answer_questions

    with stage_cache_at(root):
        summary = answer_questions(questions=str(FAQ), sample=n, overrides=OVERRIDES, data_root=str(root),
                                   run_id="bench-flow")
    return {"seconds": time.perf_counter() - started, "body_seconds": summary["wall_seconds"],
            "answered": summary["n_answered"], "stage_computations": summary["stage_computations"]}


def _child(mode: str, root: Path, n: int) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--root", str(root), "--questions", str(n)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--child", choices=["loop", "flow"])
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        result = run_loop(args.root, args.questions) if args.child == "loop" else run_flow(args.root, args.questions)
        print(json.dumps(result))
        return
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")

    from bench.bench_backends import corpus_base  # the corpus built once for every bench

    base = corpus_base()
    n = args.questions
    loop = _child("loop", _fresh_root("loop", base), n)
    flow = _child("flow", _fresh_root("flow", base), n)
    print(f"\nOffline pipeline on {n} FAQ questions (cold caches, {os.cpu_count()} cores)")
    print(f"  plain loop : {loop['seconds']:7.1f} s  {60 * n / loop['seconds']:6.1f} questions/min  "
          f"({loop['answered']} answered)")
    print(f"  prefect    : {flow['seconds']:7.1f} s  {60 * n / flow['seconds']:6.1f} questions/min  "
          f"({flow['answered']} answered, {flow['stage_computations']} stage tasks computed)")
    print(f"  flow body  : {flow['body_seconds']:7.1f} s  (without starting Prefect's temporary server)")
    print(f"  overhead   : {flow['seconds'] / loop['seconds']:.2f}x whole process, "
          f"{flow['body_seconds'] / loop['seconds']:.2f}x flow body (target: under 1.3x)")


if __name__ == "__main__":
    main()
