"""Offline throughput per stage, and Prefect's overhead, measured side by side in one run.

Answers the same N FAQ questions (FAQ pages excluded from the corpus), each measurement in a fresh
subprocess with a cold stage cache and a cold vector cache, so every side pays the same model load
and the same embeddings:

* ``loop``: the stages of ``hifirag_core.pipeline.specs.PIPELINE`` called in a plain Python loop, one
  question after another, with records written to the warehouse as the flow writes them; each
  stage's wall and CPU seconds (the process's, so the model's worker threads count) are recorded;
* ``flow``: the Prefect flow (one task per stage, questions in parallel, caching and result
  persistence on), with its temporary API server; per stage, the compute seconds of ``stage_runs``.

The flow and the demo start from a copy of one Prefect home whose database exists, as set-up leaves
it (``hifirag prepare``; creating and migrating the database takes about 9 s, once per machine). Each
side's loop and flow read a corpus built by its own code (a baseline may store it in an older format).

With ``--baseline DIR`` (a checkout of another commit, e.g. ``git worktree add ../base main``) the
same children also run that checkout's code (``PYTHONPATH`` and working directory set to it), in
the order baseline loop, our loop, baseline flow, our flow, so both sides see the same machine load.
It prints, per stage, seconds per question and the share of the total for each side, then
questions per minute, CPU seconds, peak memory (RSS) and the ratios. Wall times on a shared
machine are noisy: compare within one run, and read the CPU columns beside them. The header names
the host's CPU and its vector width, and times a fixed Python loop before and after the runs.

    .venv/bin/python bench/bench_pipeline.py --questions 20 --baseline ../hifirag-main
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A child runs the code of the checkout it is given (the baseline's, or ours).
CODE = Path(os.environ.get("BENCH_CODE_ROOT", str(ROOT)))
sys.path.insert(0, str(CODE))

from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402

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


def _empty_root(name: str) -> Path:
    root = OUT / name
    shutil.rmtree(root, ignore_errors=True)
    return root


def _cpu() -> float:
    return time.process_time()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def run_loop(root: Path, n: int) -> dict:
    """The stages through the question runner in this process (no Prefect), timed per stage."""
    from hifirag_core.pipeline.persistence import write_output
    from hifirag_core.pipeline.plan import plan_run
    from hifirag_core.pipeline.runner import Executed, QuestionRunner, in_process
    from hifirag_core.pipeline.runs import start_run
    from hifirag_core.pipeline.specs import PIPELINE
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.store.warehouse import Warehouse

    started, cpu_started = time.perf_counter(), _cpu()
    plan = plan_run(FAQ, sample=n, overrides=OVERRIDES, root=root, run_id="bench-loop")
    warehouse = Warehouse(root)
    start_run(warehouse, plan)
    rt = build_runtime(plan.context())
    wall = {s.name: 0.0 for s in PIPELINE}
    cpu = dict(wall)
    answered = 0
    for q in plan.questions.questions:
        plain = in_process(q, rt)

        def clocked(stage, params, key, round, plain=plain) -> Executed:  # the plain loop, with a clock around each stage
            t, c = time.perf_counter(), _cpu()
            try:
                return plain(stage, params, key, round)
            finally:
                wall[stage.name] += time.perf_counter() - t
                cpu[stage.name] += _cpu() - c

        result = QuestionRunner(q, rt, clocked).run()
        for out in result.outputs:
            write_output(warehouse, plan.run_id, q.id, out)
        answered += result.answer is not None and result.answer.status == "ok"
    warehouse.compact_run(plan.run_id)
    return {"seconds": time.perf_counter() - started, "cpu": _cpu() - cpu_started, "answered": answered,
            "stage_wall": wall, "stage_cpu": cpu, "peak_mb": _peak_mb()}


def run_flow(root: Path, n: int) -> dict:
    """The Prefect flow, as `hifirag run` runs it (its temporary server starting while the flow is imported)."""
    from flows.environment import configure, stage_cache_at

    os.environ["PREFECT_HOME"] = str(root / "prefect-home")
    configure(root)
    started, cpu_started = time.perf_counter(), _cpu()
    with _server_starting():
        from flows.answer import answer_questions
        from hifirag_core.store.warehouse import Warehouse

    with stage_cache_at(root):
        summary = answer_questions(questions=str(FAQ), sample=n, overrides=OVERRIDES, data_root=str(root),
                                   run_id="bench-flow")
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu_started
    rows = Warehouse(root).query(
        "SELECT stage, sum(coalesce(compute_seconds, seconds)) FROM stage_runs WHERE run_id = 'bench-flow' "
        "AND NOT cached GROUP BY stage").rows
    return {"seconds": seconds, "cpu": cpu, "body_seconds": summary["wall_seconds"],
            "answered": summary["n_answered"], "stage_computations": summary["stage_computations"],
            "stage_wall": {stage: float(s) for stage, s in rows}, "peak_mb": _peak_mb()}


def _server_starting():
    """``flows.environment.server_starting`` where the code has it (a baseline may predate it)."""
    import contextlib

    import flows.environment

    return getattr(flows.environment, "server_starting", contextlib.nullcontext)()


def run_prefect_home(root: Path, n: int) -> dict:
    """A Prefect home whose database exists, as set-up (`hifirag prepare`) leaves it: the database is
    created and migrated by starting a temporary server once (about 9 s), which a run after set-up
    does not pay. Each flow and demo starts from a copy of it."""
    os.environ["PREFECT_HOME"] = str(root)
    from flows.environment import configure, make_server_database

    configure(root)
    started = time.perf_counter()
    make_server_database()
    return {"seconds": time.perf_counter() - started}


def run_corpus(root: Path, n: int) -> dict:
    """The documentation corpus under ``root``, built by this child's code unless it is current: a
    baseline may store its corpus in an older format, so each side reads one its own code built."""
    from hifirag_core.corpus.build import build_default
    from hifirag_core.corpus.store import corpus_at

    corpus = corpus_at(root, "docs")
    started = time.perf_counter()
    if not corpus.is_current():
        build_default(corpus.root, corpus.blobs)
    return {"seconds": time.perf_counter() - started}


def run_demo(root: Path, n: int) -> dict:
    """`hifirag demo` from a data root without a corpus: the corpus build, the flow and the printout."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    env = {**os.environ, "PREFECT_HOME": str(root / "prefect-home")}  # its own temporary server and database
    done = subprocess.run([sys.executable, "-m", "flows.cli", "demo", "--questions", str(n), "--data-root", str(root)],
                          capture_output=True, text=True, cwd=CODE, env=env)
    if done.returncode != 0:
        raise SystemExit(f"demo failed:\n{done.stderr[-3000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    built = (root / "corpus" / "docs" / "manifest.json").exists()
    return {"seconds": time.perf_counter() - started, "cpu": 0.0, "answered": done.stdout.count("ROUGE-L F1 vs gold"),
            "peak_mb": usage.ru_maxrss / 1024, "corpus_built": built, "stage_wall": {}}


def _child(mode: str, root: Path, n: int, code: Path) -> dict:
    env = {**os.environ, "BENCH_CODE_ROOT": str(code), "PYTHONPATH": str(code)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--root", str(root), "--questions", str(n)],
                          capture_output=True, text=True, cwd=code, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{mode} ({code}) failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # cumulative: the caller takes differences
    result["children_cpu"] = usage.ru_utime + usage.ru_stime
    result["process_seconds"] = time.perf_counter() - started
    return result


def _host() -> str:
    """The CPU model and its widest vector extension. MiniLM's forward passes, most of the offline loop,
    took 2.3-2.5x the CPU per question on an AVX2-only host as on an AVX-512 one, and the torch-based
    code before them 1.5x (README, "Where the offline time goes"): a ratio between the two depends on
    the host it was measured on."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in lines)}  # every core alike
    model = fields.get("model name", "unknown CPU")
    flags = set(fields.get("flags", "").split())
    vectors = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    return f"{model} ({vectors})"


def _python_speed() -> float:
    """Seconds of a fixed pure-Python loop: how fast the machine is right now, to compare runs made hours apart."""
    started = time.perf_counter()
    sum(i * i for i in range(20_000_000))
    return time.perf_counter() - started


def _stage_table(title: str, n: int, sides: dict[str, dict], key: str) -> None:
    """Per stage: seconds per question and share of the summed stage time, for each side."""
    names = list(next(iter(sides.values()))[key])
    for side in sides.values():
        names += [s for s in side[key] if s not in names]
    totals = {label: sum(side[key].values()) or 1.0 for label, side in sides.items()}
    head = "".join(f"{label + ' s/q':>14s} {'share':>6s}" for label in sides)
    ratio = len(sides) == 2
    print(f"\n{title}\n  {'stage':14s}{head}" + (f"  {'speed-up':>8s}" if ratio else ""))
    for name in names + ["total"]:
        cells, values = [], []
        for label, side in sides.items():
            v = totals[label] if name == "total" else side[key].get(name, 0.0)
            values.append(v)
            cells.append(f"{v / n:14.2f} {100 * v / totals[label]:5.1f}%")
        speed = f"  {values[0] / values[1]:7.1f}x" if ratio and values[1] > 0 else ""
        print(f"  {name:14s}" + "".join(cells) + speed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with (its root folder)")
    parser.add_argument("--modes", default="loop,flow", help="loop, flow, demo (comma-separated); demo runs "
                        "`hifirag demo` from an empty data root, so it builds the corpus too")
    parser.add_argument("--child", choices=["loop", "flow", "demo", "corpus", "prefect-home"])
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        run = {"loop": run_loop, "flow": run_flow, "demo": run_demo, "corpus": run_corpus,
               "prefect-home": run_prefect_home}[args.child]
        print(json.dumps(run(args.root, args.questions)))
        return
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")

    n = args.questions
    speed_before = _python_speed()
    codes = {"ours": ROOT} if args.baseline is None else {"base": args.baseline.resolve(), "ours": ROOT}
    modes = [m for m in ("loop", "flow", "demo") if m in args.modes.split(",")]
    bases = {}
    if {"loop", "flow"} & set(modes):  # the corpus each side's loop and flow read, built by its own code
        for label, code in codes.items():
            bases[label] = OUT / f"corpus-{label}"
            built = _child("corpus", bases[label], n, code)["seconds"]
            if built > 1:
                print(f"corpus ({label}) built in {built:.1f} s", flush=True)
    home = OUT / "prefect-home"
    if {"flow", "demo"} & set(modes) and not (home / "prefect.db").exists():
        shutil.rmtree(home, ignore_errors=True)
        print(f"Prefect's database made (as set-up makes it) in {_child('prefect-home', home, n, ROOT)['seconds']:.1f} s",
              flush=True)
    results: dict[str, dict[str, dict]] = {m: {} for m in modes}
    last_cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + resource.getrusage(
        resource.RUSAGE_CHILDREN).ru_stime
    for mode in modes:
        for label, code in codes.items():
            root = _fresh_root(f"{mode}-{label}", bases[label]) if mode != "demo" else _empty_root(f"{mode}-{label}")
            if mode != "loop":
                shutil.copytree(home, root / "prefect-home")
            r = _child(mode, root, n, code)
            r["children_cpu"], last_cpu = r["children_cpu"] - last_cpu, r["children_cpu"]
            results[mode][label] = r
    print(f"\nOffline pipeline on {n} FAQ questions (cold caches, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the end)")
    print(f"Host: {_host()}; a fixed Python loop took {speed_before:.2f} s before the runs and "
          f"{_python_speed():.2f} s after (lower is faster)")
    if "loop" in results:
        _stage_table("Plain loop, wall seconds per question per stage:", n, results["loop"], "stage_wall")
        _stage_table("Plain loop, CPU seconds per question per stage (all threads of the process):", n,
                     results["loop"], "stage_cpu")
    if "flow" in results:
        _stage_table("Prefect flow, compute seconds per question per stage (questions overlap, so stages "
                     "include waiting for the cores):", n, results["flow"], "stage_wall")
    print("\nTotals")
    for mode in modes:
        for label, r in results[mode].items():
            extra = (f", flow body {r['body_seconds']:.1f} s, {r['stage_computations']} stage tasks computed"
                     if mode == "flow" else ", corpus built" if r.get("corpus_built") else "")
            print(f"  {mode:4s} {label:4s}: {r['seconds']:7.1f} s  {60 * n / r['seconds']:6.1f} questions/min  "
                  f"CPU {r['cpu']:6.1f} s in-process, {r['children_cpu']:6.1f} s with children  "
                  f"peak {r['peak_mb']:5.0f} MB  ({r['answered']} answered{extra})")
    if len(codes) == 2:
        for mode in modes:
            b, o = results[mode]["base"], results[mode]["ours"]
            if mode == "demo":
                print(f"  demo: ours takes {o['seconds']:.1f} s against {b['seconds']:.1f} s "
                      f"({b['seconds'] / o['seconds']:.2f}x faster; CPU {b['children_cpu'] / o['children_cpu']:.2f}x "
                      "less; target: at most 45 s)")
                continue
            print(f"  {mode}: ours answers {b['seconds'] / o['seconds']:.2f}x the questions/min of the baseline "
                  f"(CPU {b['children_cpu'] / o['children_cpu']:.2f}x less)")
    if "loop" in modes and "flow" in modes:
        for label in codes:
            loop, flow = results["loop"][label], results["flow"][label]
            print(f"  Prefect overhead ({label}): {flow['seconds'] / loop['seconds']:.2f}x whole process, "
                  f"{flow['body_seconds'] / loop['seconds']:.2f}x flow body, "
                  f"{flow['children_cpu'] / loop['children_cpu']:.2f}x CPU with children (target: at most 1.1x; "
                  "the flow runs questions in parallel, the loop one by one, so CPU is the like-for-like ratio)")


if __name__ == "__main__":
    main()
