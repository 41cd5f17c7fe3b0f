"""What a second identical run costs: wall time and paid calls, as a ratio to the first run.

The same fakes as ``bench_backends.py`` (Gemini, Programmable Search and Scrapingdog with realistic
latency, serving the local documentation corpus without its FAQ pages) stay up for both runs.
The flow runs twice in a child process each, on the same data root and the same questions: the
first starts cold, the second should find every stage in the stage cache. Printed side by side:
each run's wall time (the flow body, and the whole flow call, which includes starting Prefect's
temporary server), the calls that reached the fakes, and the paid calls the warehouse records.
Target: the second run under 10% of the first's wall time, with zero paid calls.

    PYTHONPATH=. .venv/bin/python bench/bench_reuse.py --questions 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_backends import (  # noqa: E402
    FAQ,
    OUT,
    CorpusWeb,
    Setup,
    answer_after_latency,
    corpus_base,
)
from hifirag_core.config import PipelineConfig  # noqa: E402
from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS  # noqa: E402


def served(fakes) -> dict[str, int]:
    return {"gemini": fakes.gemini.count(), "google": fakes.google.count(),
            "scrapingdog": fakes.scrapingdog.count(lambda r: r.path.rstrip("/") == "/scrape")}


def run_once(spec: Path) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_backends.py"), "--child", str(spec)],
                          capture_output=True, text=True, cwd=ROOT, env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"the flow failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--filter-latency", type=float, default=0.8)
    parser.add_argument("--writer-latency", type=float, default=6.0)
    args = parser.parse_args()
    if not FAQ.exists():
        raise SystemExit(f"needs the shared data ({FAQ}); set HIFIRAG_SHARED_DATA")
    from hifirag_core.store.warehouse import Warehouse
    from tests.support.fakes.services import fake_services

    web = CorpusWeb(corpus_base())
    root = OUT.parent / "reuse"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "corpus").mkdir()
    (root / "corpus" / "docs").symlink_to(corpus_base() / "corpus" / "docs")
    (root / "blobs").symlink_to(corpus_base() / "blobs")
    defaults = PipelineConfig()
    setup = Setup(questions=args.questions, concurrency=defaults.limits.concurrency,
                  filter_latency=args.filter_latency, writer_latency=args.writer_latency, search_latency=0.5,
                  scrape_latency=1.0, writer_rpm=150, filter_rpm=1000, root=str(root))
    with fake_services(search=web.search, page=web.page,
                       llm_latency={"filter": setup.filter_latency, "writer": setup.writer_latency},
                       search_latency=setup.search_latency, scrape_latency=setup.scrape_latency) as fakes, \
            fakes.environment():
        for fake in (fakes.gemini, fakes.google, fakes.scrapingdog):
            answer_after_latency(fake)
        setup.overrides = [*fakes.config_overrides_pairs(llm="gemini", search="google", fetch="scrapingdog"),
                           f"corpus.exclude={json.dumps(list(FAQ_PAGE_PATTERNS))}"]
        spec = root / "setup.json"
        spec.write_text(json.dumps(asdict(setup)))
        results = []
        for _ in range(2):
            before = served(fakes)
            child = run_once(spec)
            after = served(fakes)
            results.append((child, {k: after[k] - before[k] for k in after}))
    w = Warehouse(root)
    (run_id,) = w.query("SELECT DISTINCT run_id FROM runs").rows[0]
    print(f"\nThe same {args.questions} FAQ questions twice through the real clients against fakes "
          f"(filter {args.filter_latency} s, writer {args.writer_latency} s, search 0.5 s, scrape 1 s); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; run {run_id}")
    print(f"  {'':14}{'flow body s':>12}{'whole call s':>14}{'stage computations':>20}{'paid LLM calls':>16}"
          f"{'calls reaching the fakes':>28}")
    for label, (child, calls) in zip(("first run", "second run"), results, strict=True):
        s = child["summary"]
        print(f"  {label:14}{s['wall_seconds']:12.1f}{child['call_s']:14.1f}{s['stage_computations']:20d}"
              f"{s['llm_calls_paid']:16d}{json.dumps(calls):>28}")
    (first, _), (second, second_calls) = results
    body = second["summary"]["wall_seconds"] / first["summary"]["wall_seconds"]
    whole = second["call_s"] / first["call_s"]
    print(f"  second / first: {body:.1%} of the flow body time, {whole:.1%} of the whole call "
          f"(target under 10%); {second['summary']['llm_calls_paid']} paid LLM calls and "
          f"{sum(second_calls.values())} calls reaching any fake (target 0)")


if __name__ == "__main__":
    main()
