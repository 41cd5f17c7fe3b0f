"""SmolLM2-135M-Instruct on every model stage against the offline default, and a mixed profile.

Three profiles answer the same questions over the same docs corpus (one data root):

* ``offline``: the embedded default (keyword query plans, BM25/embedding filters, extractive writer);
* ``smollm2``: both model roles on a llama.cpp server with SmolLM2-135M-Instruct (tests/support/llama_server.py),
  temperature 0, grammar-constrained JSON, one question at a time;
* ``mixed``: SmolLM2 filters (query plan, URL filter, section ranking, citations), the offline writer writes.

Two question sets: 20 FAQ questions with the FAQ pages left out of the corpus (protocol a: the gold answer's
page is absent, so only ROUGE-L against the gold answer is scored) and 20 two-part questions over the whole
corpus (both gold sections: kept by section ranking, and cited). Nothing is tuned here.

Per profile and stage it prints: model calls, replies that parse (calls with a reply, less the decisions that
did not parse), fallbacks taken, replies cut at the token limit (status ``truncated``), tokens in and out per
question, and seconds per question; per profile: ROUGE-L F1 (mean) and every gold section kept / cited.

    .venv/bin/python bench/bench_local_model.py                     # 20 + 20 questions; an hour or more on 2 cores
    .venv/bin/python bench/bench_local_model.py --limit 5 --sets faq

Needs the ``local-model`` build (make test) and the shared data. The stages run in a plain loop, without
Prefect and without the stage cache (every run computes every stage); the rows go to the warehouse under run
ids ``bench-local-model-<set>-<profile>-<limit>``, each rewritten by the next invocation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.metrics.text_metrics import rouge_l  # noqa: E402
from hifirag_core.pipeline.specs import STAGE_NAMES  # noqa: E402
from hifirag_core.store.warehouse import Warehouse  # noqa: E402
from tests.support.llama_server import SMOLLM2, llama_server, pipeline_overrides, unavailable_reason  # noqa: E402

PROFILES = ("offline", "smollm2", "mixed")
# (table, what one decision is) for the stages whose decisions carry a method (``...fallback...`` when taken)
DECISIONS = (
    ("query_plans", "question_id"),
    ("url_decisions", "question_id"),
    ("section_decisions", "question_id || '|' || url"),
    ("drafts", "question_id"),
    ("citations", "question_id"),
)
FILTER_TOKENS, WRITER_TOKENS = 128, 256


def profile_overrides(profile: str, base_url: str) -> list[str]:
    """The pipeline settings of a profile (the server's, as the tests set them up, with larger reply ceilings and
    the default number of search queries)."""
    if profile == "offline":
        return []
    model = [
        o for o in pipeline_overrides(base_url, model=SMOLLM2) if not o.startswith("query_plan.max_queries")
    ]
    model += [f"models.filter_max_tokens={FILTER_TOKENS}", f"models.writer_max_tokens={WRITER_TOKENS}"]
    return model + (["backends.writer_llm=offline"] if profile == "mixed" else [])


def question_sets(data_root: Path, names: list[str]) -> dict[str, tuple[Path, list[str]]]:
    """name -> (question file, the protocol's overrides)."""
    from hifirag_core.evaluation.datasets import resolve_dataset

    found = {}
    for name, spec in (("faq", "faq-a"), ("two-part", "two-part")):
        if name in names:
            ds = resolve_dataset(spec, root=data_root)
            if not ds.path.exists():
                raise SystemExit(f"skipped: no {ds.path} (the shared data)")
            found[name] = (ds.path, list(ds.overrides))
    return found


def run_set(path: Path, overrides: list[str], limit: int, root: Path, run_id: str) -> tuple[str, float]:
    """Every stage of every question through the question runner in this process (no Prefect: on a loaded
    machine its temporary server is slow to start), written to the warehouse as a run writes it: stage rows,
    model calls, the stage ledger."""
    from hifirag_core.pipeline.persistence import write_result
    from hifirag_core.pipeline.plan import plan_run
    from hifirag_core.pipeline.runner import QuestionRunner
    from hifirag_core.pipeline.runs import start_run
    from hifirag_core.pipeline.wiring import build_runtime

    plan = plan_run(path, limit=limit, overrides=overrides, root=root, run_id=run_id)
    warehouse = Warehouse(root)
    start_run(warehouse, plan)
    rt = build_runtime(plan.context())
    began = time.monotonic()
    for q in plan.questions.questions:
        write_result(warehouse, plan.run_id, QuestionRunner(q, rt).run())
    warehouse.compact_run(plan.run_id)
    return plan.run_id, time.monotonic() - began


def per_stage(w: Warehouse, run_id: str) -> dict[str, dict[str, float]]:
    """stage -> calls, replies, parse errors, fallbacks, truncated, tokens in/out, seconds (sums over questions)."""
    out: dict[str, dict[str, float]] = {}
    for stage, calls, replies, truncated, tin, tout in w.query(
        """SELECT stage, count(*), count(*) FILTER (WHERE status IN ('ok', 'truncated')),
                      count(*) FILTER (WHERE status = 'truncated'), coalesce(sum(tokens_in), 0),
                      coalesce(sum(tokens_out), 0)
               FROM llm_calls WHERE run_id = ? GROUP BY stage""",
        [run_id],
    ).rows:
        out.setdefault(stage, {}).update(
            calls=calls, replies=replies, truncated=truncated, tin=tin, tout=tout
        )
    for table, key in DECISIONS:
        for stage, decisions, fallbacks, parse_errors in w.query(
            f"""SELECT stage, count(DISTINCT {key}),
                           count(DISTINCT {key}) FILTER (WHERE method LIKE '%fallback%'),
                           count(DISTINCT {key}) FILTER (WHERE status = 'parse_error')
                    FROM {table} WHERE run_id = ? GROUP BY stage""",
            [run_id],
        ).rows:
            out.setdefault(stage, {}).update(
                decisions=decisions, fallbacks=fallbacks, parse_errors=parse_errors
            )
    for stage, seconds in w.query(
        "SELECT stage, sum(seconds) FROM stage_runs WHERE run_id = ? GROUP BY stage", [run_id]
    ).rows:
        out.setdefault(stage, {})["seconds"] = float(seconds or 0.0)
    return out


def quality(w: Warehouse, run_id: str) -> dict[str, float | str]:
    """ROUGE-L F1 against the gold answers (mean; a question without an answer scores 0), and for two-part
    questions every gold section kept by section ranking / kept and cited."""
    from hifirag_core.evaluation.two_part import gold_sections_found

    rows = w.query(
        """SELECT q.question_id, q.reference, a.cited_text, a.status FROM questions q
                      LEFT JOIN answers a USING (run_id, question_id) WHERE q.run_id = ?""",
        [run_id],
    ).rows
    scores = [
        rouge_l(text or "", ref)[2] if status == "ok" and text else 0.0
        for _, ref, text, status in rows
        if ref
    ]
    found = gold_sections_found(w, run_id)
    result: dict[str, float | str] = {
        "questions": len(rows),
        "answered": sum(1 for r in rows if r[3] == "ok"),
        "rouge_l": sum(scores) / len(scores) if scores else float("nan"),
    }
    if found:
        result["all_kept"] = f"{sum(all(k for k, _ in f) for f in found.values())}/{len(found)}"
        result["all_cited"] = f"{sum(all(k and c for k, c in f) for f in found.values())}/{len(found)}"
    return result


def print_tables(results: dict[tuple[str, str], tuple[dict, dict, dict, float]]) -> None:
    for set_name in dict.fromkeys(s for s, _ in results):
        print(f"\n## {set_name}")
        print(
            "| profile | questions | answered | ROUGE-L F1 | every gold section kept | ... and cited | wall s/question |"
        )
        print("|---|---|---|---|---|---|---|")
        for (s, profile), (_, _, q, wall) in results.items():
            if s == set_name:
                n = max(1, int(q["questions"]))
                print(
                    f"| {profile} | {q['questions']} | {q['answered']} | {q['rouge_l']:.3f} | "
                    f"{q.get('all_kept', 'n/a')} | {q.get('all_cited', 'n/a')} | {wall / n:.1f} |"
                )
        print(
            "\n| profile | stage | calls | replies that parse | fallbacks / decisions | cut at the token limit "
            "| tokens in / q | tokens out / q | s / question |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for (s, profile), (_, stages, q, _) in results.items():
            if s != set_name:
                continue
            n = max(1, int(q["questions"]))
            for stage in STAGE_NAMES:
                st = stages.get(stage)
                if not st:
                    continue
                parsed = (
                    int(st.get("replies", 0)) - int(st.get("parse_errors", 0)) if st.get("calls") else "-"
                )
                print(
                    f"| {profile} | {stage} | {int(st.get('calls', 0))} | {parsed} | "
                    f"{int(st.get('fallbacks', 0))} / {int(st.get('decisions', 0))} | {int(st.get('truncated', 0))} | "
                    f"{st.get('tin', 0) / n:.0f} | {st.get('tout', 0) / n:.0f} | {st.get('seconds', 0.0) / n:.2f} |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="questions per set [20]")
    parser.add_argument("--sets", default="faq,two-part", help="faq, two-part or both [both]")
    parser.add_argument("--profiles", default=",".join(PROFILES), help=f"of {', '.join(PROFILES)} [all]")
    parser.add_argument(
        "--data-root", type=Path, help="[default: the project's data root, whose corpus is reused]"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    needs_server = any(p != "offline" for p in profiles)
    if needs_server and (reason := unavailable_reason()):
        print(f"skipped: {reason}")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, force=True)
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    from hifirag_core.resources import data_root as default_root

    data_root = default_root(args.data_root)
    from hifirag_core.config import build_config
    from hifirag_core.corpus.build import ensure_corpus

    ensure_corpus(build_config(), data_root)
    sets = question_sets(data_root, [s.strip() for s in args.sets.split(",")])
    results: dict[tuple[str, str], tuple[dict, dict, dict, float]] = {}
    server = (
        llama_server(data_root / "bench-local-model" / "server.log", model=SMOLLM2) if needs_server else None
    )
    with server or contextlib.nullcontext("") as base_url:
        for set_name, (path, protocol) in sets.items():
            for profile in profiles:
                run_id, wall = run_set(
                    path,
                    [*protocol, *profile_overrides(profile, base_url)],
                    args.limit,
                    data_root,
                    f"bench-local-model-{set_name}-{profile}-{args.limit}",
                )
                w = Warehouse(data_root)
                results[(set_name, profile)] = (
                    {"run_id": run_id},
                    per_stage(w, run_id),
                    quality(w, run_id),
                    wall,
                )
                print(f"{set_name} / {profile}: run {run_id}, {wall:.0f} s", flush=True)
    print_tables(results)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    f"{s}/{p}": {"run_id": r[0]["run_id"], "stages": r[1], "quality": r[2], "wall_s": r[3]}
                    for (s, p), r in results.items()
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
