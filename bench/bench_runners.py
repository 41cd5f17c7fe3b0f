"""Thread runner against a Dask cluster on the same offline questions, side by side, cold caches.

    .venv/bin/python bench/bench_runners.py --questions 40 [--workers 2] [--threads-per-worker 2] [--rounds 2]

Each runner runs in its own process on its own data root (sharing only the built corpus), so both
start with empty stage caches, an empty vector cache and an empty warehouse. The Dask side counts its
cluster's start-up (processes, imports, each worker loading MiniLM) in its time. It prints, per runner:
the flow's wall time, questions per minute, the peak memory of every process (the flow's, each Dask
worker's), and the ratio of the two times. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_pipeline import FAQ, OVERRIDES, _fresh_root  # noqa: E402


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(kind: str, root: Path, n: int, workers: int, threads: int | None) -> dict:
    """One runner's flow on ``n`` questions; in its own process (``--child``)."""
    from flows.environment import configure, stage_cache_at

    os.environ["PREFECT_HOME"] = str(root / "prefect-home")
    configure(root)
    from flows.answer import answer_questions

    params = dict(questions=str(FAQ), sample=n, overrides=OVERRIDES, data_root=str(root), run_id=f"bench-{kind}")
    started = time.perf_counter()
    with stage_cache_at(root):
        if kind == "threads":
            summary = answer_questions(**params, runner="threads")
            workers_mb: list[float] = []
            workers_cpu: list[float] = []
        else:
            from distributed import Client

            from flows.runners import RunnerChoice, shared_cluster
            from hifirag_core.config import build_config, parse_overrides

            # the cluster an evaluation starts (its workers split the cores between their MiniLM replicas and
            # talk to the flow's API server), made here rather than inside the flow so its workers can be
            # asked their peak memory afterwards
            choice = RunnerChoice("dask", dask_workers=workers, dask_threads=threads)
            cluster_started = time.perf_counter()
            with shared_cluster(choice, build_config(overrides=parse_overrides(OVERRIDES)).limits.concurrency) as started_choice:
                address = started_choice.dask_address
                started = cluster_started
                summary = answer_questions(**params, runner="dask", dask_address=address)
                with Client(address) as client:
                    usage = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF))
                workers_mb = [round(u.ru_maxrss / 1024, 1) for u in usage.values()]
                workers_cpu = [round(u.ru_utime + u.ru_stime, 1) for u in usage.values()]
    seconds = time.perf_counter() - started
    return {"kind": kind, "seconds": round(seconds, 2), "answered": summary["n_answered"],
            "computed": summary["stage_computations"], "flow_mb": round(_peak_mb(), 1), "workers_mb": workers_mb,
            "flow_cpu": round(_cpu_seconds(), 1), "workers_cpu": workers_cpu}


def _child(kind: str, root: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--root", str(root), "--questions", str(args.questions),
           "--workers", str(args.workers)]
    if args.threads_per_worker:
        cmd += ["--threads-per-worker", str(args.threads_per_worker)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of the child and every process under it (API server, Dask nannies and workers) once they have exited
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "cpu": round(cpu, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--threads-per-worker", type=int, help="default: 4 questions in flight / workers")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure each runner this many times, alternating which goes first")
    parser.add_argument("--child", choices=["threads", "dask"])
    parser.add_argument("--root", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.child, args.root, args.questions, args.workers, args.threads_per_worker)))
        return
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")
    from bench.bench_backends import corpus_base

    base = corpus_base()
    n = args.questions
    print(f"\nOffline pipeline, {n} FAQ questions, cold caches, {os.cpu_count()} cores")
    ratios = []
    for round_ in range(args.rounds):
        # every other round starts with Dask, so a load that drifts during a round favours neither
        order = ("threads", "dask") if round_ % 2 == 0 else ("dask", "threads")
        results = {}
        for kind in order:
            load = os.getloadavg()[0]
            results[kind] = _child(kind, _fresh_root(f"runners-{kind}", base), args)
            results[kind]["load"] = (load, os.getloadavg()[0])
        for kind in ("threads", "dask"):
            r = results[kind]
            memory = f"flow {r['flow_mb']:.0f} MB" + (
                f", workers {', '.join(f'{m:.0f}' for m in r['workers_mb'])} MB" if r["workers_mb"] else "")
            cpu = f"CPU {r['cpu']:.0f} s: flow {r['flow_cpu']:.0f}" + "".join(
                f" + worker {c:.0f}" for c in r["workers_cpu"]) + " + API server and the rest"
            print(f"  round {round_ + 1} {kind:8s}: {r['seconds']:7.1f} s  {60 * n / r['seconds']:6.1f} questions/min  "
                  f"{cpu} ({r['answered']} answered, {r['computed']} stages computed; peak {memory}; "
                  f"load {r['load'][0]:.1f} -> {r['load'][1]:.1f})")
        ratios.append(results["dask"]["seconds"] / results["threads"]["seconds"])
        print(f"  round {round_ + 1} dask / threads: {ratios[-1]:.2f}x the time")
    if len(ratios) > 1:
        print(f"  dask / threads over {len(ratios)} rounds: {sum(ratios) / len(ratios):.2f}x the time "
              f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    print("  target: at most 1.15x")

if __name__ == "__main__":
    main()
