"""The pipeline on a real llama.cpp server (Gemma 3 270M): tokens sent and seconds per stage, with and without caps.

Both model roles run on one llama-cpp-python server (``tests/support/llama_server.py``). The same questions
run twice on one data root: with ``limits.caps=on`` (the pipeline's own caps applied to the models,
as every run was before they became the offline default's only) and with ``limits.caps=auto`` (the
models keep what they keep; the writer's evidence is bounded by the model's window). Stages the two
share come from the cache the second time; their tokens and seconds are the computing run's, so both
columns describe a full run. Prints, per stage: model calls, tokens in and out, and seconds per
question, for each setting, and the ratio of tokens in.

    /work/main/.venv/bin/python bench/bench_local_server.py                  # the test site's 3 questions
    /work/main/.venv/bin/python bench/bench_local_server.py --questions q.jsonl --corpus ./site --base-url https://...

Minutes on two cores (every schema-constrained token costs a grammar check over a 262k vocabulary).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.pipeline.specs import STAGE_NAMES  # noqa: E402
from hifirag_core.store.warehouse import Warehouse  # noqa: E402
from tests.support.llama_server import llama_server, pipeline_overrides, unavailable_reason  # noqa: E402
from tests.support.sitegen import BASE_URL, write_examples, write_questions, write_site  # noqa: E402


def per_stage(w: Warehouse, run_id: str) -> dict[str, tuple[int, int, int, float]]:
    """stage -> (model calls, tokens in, tokens out, compute seconds per question), paid or reused alike."""
    rows = w.query(
        """SELECT r.stage, coalesce(sum(c.calls), 0), coalesce(sum(c.tin), 0), coalesce(sum(c.tout), 0),
                  avg(r.compute_seconds)
           FROM stage_runs r LEFT JOIN (
               SELECT question_id, stage, count(*) AS calls, sum(tokens_in) AS tin, sum(tokens_out) AS tout
               FROM llm_calls WHERE run_id = ? GROUP BY ALL) c USING (question_id, stage)
           WHERE r.run_id = ? GROUP BY r.stage""", [run_id, run_id]).rows
    return {stage: (int(n), int(tin), int(tout), float(sec or 0.0)) for stage, n, tin, tout, sec in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, help="JSONL questions [default: the test site's three]")
    parser.add_argument("--corpus", type=Path, help="a folder of HTML pages [default: the test site]")
    parser.add_argument("--base-url", default=BASE_URL, help="the URL the corpus folder is published under")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        return
    work = Path(tempfile.mkdtemp(prefix="hifirag-bench-llama-"))
    os.environ["PREFECT_HOME"] = str(work / "prefect-home")
    from flows.environment import configure, stage_cache_at

    data_root = work / "data"
    configure(data_root)
    from flows.answer import answer_questions
    from hifirag_core.corpus.build import build_from_folder
    from hifirag_core.corpus.store import corpus_at

    corpus = corpus_at(data_root, "docs")
    build_from_folder(corpus.root, corpus.blobs, args.corpus or write_site(work / "site"), args.base_url)
    questions = args.questions or write_questions(work / "questions.jsonl")
    examples = write_examples(work / "examples.jsonl")
    results = {}
    with llama_server(work / "server.log") as base_url:
        for caps in ("on", "auto"):
            with stage_cache_at(data_root):
                summary = answer_questions(questions=str(questions), data_root=str(data_root),
                                           overrides=[f"generation.examples={examples}",
                                                      *pipeline_overrides(base_url, caps=caps)])
            results[caps] = (summary, per_stage(Warehouse(data_root), summary["run_id"]))
    print(f"\n{'':13}{'limits.caps=on (before)':>38}{'limits.caps=auto (after)':>38}{'':>10}")
    print(f"{'stage':<13}" + f"{'calls':>7}{'tokens in':>11}{'out':>7}{'s/question':>13}" * 2 + f"{'in ratio':>10}")
    for stage in STAGE_NAMES:
        before, after = results["on"][1].get(stage), results["auto"][1].get(stage)
        if before is None or after is None:
            continue
        ratio = f"{after[1] / before[1]:.2f}" if before[1] else "-"
        print(f"{stage:<13}" + "".join(f"{n:>7}{tin:>11}{tout:>7}{sec:>13.1f}" for n, tin, tout, sec in (before, after))
              + f"{ratio:>10}")
    for caps, (summary, stages) in results.items():
        seconds = sum(s[3] for s in stages.values())
        print(f"limits.caps={caps}: {summary['n_answered']}/{summary['n_questions']} answered, "
              f"{seconds:.0f} s of stage work per question, {sum(s[1] for s in stages.values())} tokens in, "
              f"{summary['llm_calls_paid']} paid calls in this run")


if __name__ == "__main__":
    main()
