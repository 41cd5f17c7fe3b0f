"""``hifirag serve`` under sustained load: many clients for minutes, a short deadline, offline backends.

    .venv/bin/python bench/bench_service_load.py [--clients 32] [--minutes 5] [--deadline 8]

The service runs in its own process at its default concurrency (4 questions at a time) on a fresh
data root that shares only the built corpus (FAQ pages left out, as in the other benchmarks), with
``--deadline`` seconds per request, short enough that some requests are cut. ``--clients`` threads
each ask one question after another (``POST /run`` streams, every fourth one ``POST /evaluate``),
drawn in turn from the MMU-RAGent and FAQ questions so that few repeat; a refused request (503)
waits its ``Retry-After`` (at most 2 s) before the client asks its next question. Meanwhile one
more thread asks ``GET /health`` every half second.

It prints: requests sent, accepted (200), refused with 503 and any other status; of the accepted,
those that completed, were cut at the deadline, failed or ended otherwise; the ``served_requests``
rows of the service's day run by outcome, which must number exactly the accepted requests (printed
as a check, not asserted); ``/health`` latency p50/p95/max; and the service process's peak memory
(VmHWM of it and of the Prefect server it started). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_pipeline import FAQ, OVERRIDES, _fresh_root  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402

MMU = shared_data_dir() / "mmu_ragent" / "t2t_val.jsonl"
EXAMPLES = "generation.examples=docs_faq"


def questions() -> list[str]:
    """MMU-RAGent and FAQ questions interleaved, each once."""
    faq = [json.loads(line)["question"] for line in FAQ.read_text(encoding="utf-8").splitlines() if line.strip()]
    mmu = [json.loads(line)["query"] for line in MMU.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [q for pair in itertools.zip_longest(mmu, faq) for q in pair if q]


def ask_run(client, url: str, question: str) -> dict:
    """One streamed /run: its HTTP status and how the stream ended."""
    with client.stream("POST", f"{url}/run", json={"question": question}) as response:
        if response.status_code != 200:
            response.read()
            return {"status": response.status_code, "retry_after": response.headers.get("retry-after")}
        last = None
        for line in response.iter_lines():
            if line.startswith("data: "):
                last = json.loads(line[6:])
    steps = (last or {}).get("intermediate_steps") or ""
    if last is None or not last.get("complete"):
        ended = "broken"
    elif last.get("error"):
        ended = "cut" if "deadline" in str(last.get("error")) or "**Deadline**" in steps else "failed"
    else:
        ended = "cut" if "**Deadline**" in steps else "complete"
    return {"status": 200, "ended": ended}


def ask_evaluate(client, url: str, question: str, n: int) -> dict:
    response = client.post(f"{url}/evaluate", json={"query": question, "iid": f"load-{n}"})
    if response.status_code != 200:
        return {"status": response.status_code, "retry_after": response.headers.get("retry-after")}
    return {"status": 200, "ended": "answered"}


def peak_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--deadline", type=float, default=8.0, help="seconds per request (the service's --deadline)")
    args = parser.parse_args()
    if not (FAQ.exists() and MMU.exists()):
        raise SystemExit(f"needs the shared data ({FAQ}, {MMU}); set HIFIRAG_SHARED_DATA")
    import httpx

    from bench.bench_backends import corpus_base
    from hifirag_core.store.warehouse import Warehouse
    from tests.support.service_process import hifirag_service

    base = corpus_base()
    root = _fresh_root("service-load", base)
    pool = questions()
    order = itertools.count()
    lock = threading.Lock()
    results: list[dict] = []
    health: list[float] = []
    service_args = ["--deadline", str(args.deadline), "--heartbeat", "5",
                    *[f"--set={o}" for o in (*OVERRIDES, EXAMPLES)]]
    with hifirag_service(root, *service_args, log_path=root.parent / "service-load.log") as url:
        stop_at = time.monotonic() + args.minutes * 60

        def client() -> None:
            with httpx.Client(timeout=args.deadline + 120) as http:
                while time.monotonic() < stop_at:
                    n = next(order)
                    question = pool[n % len(pool)]
                    try:
                        outcome = (ask_evaluate(http, url, question, n) if n % 4 == 3
                                   else ask_run(http, url, question))
                    except httpx.HTTPError as exc:
                        outcome = {"status": -1, "error": type(exc).__name__}
                    with lock:
                        results.append(outcome)
                    if outcome["status"] == 503:
                        time.sleep(min(2.0, float(outcome.get("retry_after") or 1)))

        def poll_health() -> None:
            with httpx.Client(timeout=30) as http:
                while time.monotonic() < stop_at:
                    began = time.perf_counter()
                    http.get(f"{url}/health")
                    health.append(time.perf_counter() - began)
                    time.sleep(0.5)

        threads = [threading.Thread(target=client) for _ in range(args.clients)] + [threading.Thread(target=poll_health)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.monotonic() - started
        service_pid = _service_pid(root)
        memory = {"service": peak_mb(service_pid)} if service_pid else {}
        for child in children(service_pid) if service_pid else []:
            memory[f"child {child}"] = peak_mb(child)
        run_id = httpx.get(f"{url}/health", timeout=30).json()["run_id"]
    # the service has stopped (SIGTERM): every request it accepted has settled and written its row
    status = Counter(r["status"] for r in results)
    accepted = [r for r in results if r["status"] == 200]
    ended = Counter(r["ended"] for r in accepted)
    rows = Warehouse(root).query("SELECT outcome, count(*) FROM served_requests WHERE run_id = ? GROUP BY outcome "
                                 "ORDER BY outcome", [run_id]).rows
    served = sum(n for _, n in rows)
    print(f"\n{args.clients} clients for {seconds / 60:.1f} min against `hifirag serve` (offline, 4 at a time, "
          f"deadline {args.deadline:g} s), run {run_id}")
    print(f"  requests sent     {len(results)}")
    print(f"  accepted (200)    {len(accepted)}   refused (503) {status.get(503, 0)}   "
          f"other {sum(n for s, n in status.items() if s not in (200, 503))} {dict((s, n) for s, n in status.items() if s not in (200, 503))}")
    print("  of the accepted   " + "   ".join(f"{k} {v}" for k, v in sorted(ended.items())))
    print(f"  served_requests   {served} rows: " + ", ".join(f"{o} {n}" for o, n in rows)
          + f"   {'= the accepted count' if served == len(accepted) else f'!= {len(accepted)} accepted'}")
    print(f"  /health latency   p50 {pct(health, 50) * 1000:.0f} ms   p95 {pct(health, 95) * 1000:.0f} ms   "
          f"max {max(health) * 1000:.0f} ms   ({len(health)} probes)")
    print("  peak memory       " + ", ".join(f"{k} {v:.0f} MB" for k, v in memory.items()))
    print(f"  throughput        {60 * len(accepted) / seconds:.1f} accepted requests/min")


def _service_pid(root: Path) -> int | None:
    """The `hifirag serve` process for this data root (its command line names it)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in args and str(root).encode() in args:
            return int(cmdline.parent.name)
    return None


if __name__ == "__main__":
    main()
