"""The fresh test-set builder as a flow: pairs about knowledge published after a cutoff, checked.

    plan ─► (propose pairs ─► date their sources ─► check them) until n are kept or calls run out
         ─► write the JSONL and its provenance ─► the build's row and model calls in the warehouse

The steps live in ``hifirag_core.testset``; this file only orders them.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from hifirag_core.hashing import stable_hash
from hifirag_core.records import RunRecord, utcnow
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.store.warehouse import Warehouse, check_run_id
from hifirag_core.testset.build import FreshSet, Verdict
from hifirag_core.testset.pair_sources import Batch, DatedSource
from hifirag_core.testset.testset_plan import (
    FreshSetPlan,
    end_build,
    open_build,
    plan_fresh_set,
    save,
    start_build,
)

STAGE = "testset"


# The steps take the (serializable) plan; the builder with its clients and its batches so far stays in
# the flow's process, opened by the flow and found by the plan.


@task(name="propose_pairs", task_run_name="propose-{call_no}", cache_policy=NO_CACHE, persist_result=False)
def propose_pairs(plan: FreshSetPlan, call_no: int) -> Batch:
    """One call to the generator (prompt A.6 with search, or the offline stand-in)."""
    return open_build(plan).propose()


@task(name="date_sources", task_run_name="date-sources-{batch.call_no}", cache_policy=NO_CACHE,
      persist_result=False)
def date_sources(plan: FreshSetPlan, batch: Batch) -> dict[str, DatedSource]:
    """Fetch each new source of the batch and read its publication date."""
    return open_build(plan).date_sources(batch)


@task(name="check_pairs", task_run_name="check-{batch.call_no}", cache_policy=NO_CACHE, persist_result=False)
def check_pairs(plan: FreshSetPlan, batch: Batch, dated: dict[str, DatedSource]) -> list[Verdict]:
    """Freshness, near-duplicates, then the no-search baseline, in that order."""
    return open_build(plan).check(batch, dated)


@task(name="write_fresh_set", cache_policy=NO_CACHE, persist_result=False)
def write_set(plan: FreshSetPlan, result: FreshSet) -> tuple[Path, Path]:
    """The MMU-RAGent JSONL and its provenance file."""
    return save(plan, result)


def record_build(plan: FreshSetPlan, result: FreshSet, started) -> str:
    """A ``runs`` row for the build (``hifirag runs`` lists it) and its model calls in ``llm_calls``."""
    key = stable_hash([plan.config.model_dump(mode="json"), plan.source, str(plan.out.resolve())], 8)
    run_id = check_run_id(f"testset-{''.join(c if c.isalnum() else '-' for c in plan.out.stem)}-{key}"[:128])
    warehouse = Warehouse(plan.data_root)
    warehouse.write("llm_calls", result.calls, run_id=run_id, stage=None)
    counts = result.counts()
    warehouse.write("runs", [RunRecord(
        run_id=run_id, status="finished" if result.status == "complete" else "partial", variant="testset-fresh",
        dataset=f"fresh:{plan.out.stem}", config_json=plan.config.model_dump_json(),
        config_hash=key, started_at=started, finished_at=utcnow(), n_questions=counts["proposed"],
        n_answered=counts["kept"], n_failed=counts["proposed"] - counts["kept"],
        llm_calls_paid=sum(1 for c in result.calls if c.backend != "offline"),
        note=result.label or f"fresh test set after {plan.config.after.isoformat()} from {result.source_name}",
    )], run_id=run_id, stage="run")
    warehouse.compact_run(run_id)
    warehouse.refresh_duckdb_file()
    return run_id


def counts_markdown(result: FreshSet, out: Path) -> str:
    """The build's counts as a Markdown table (the flow's artifact, the CLI's summary)."""
    c = result.counts()
    rows = [("calls to the generator", c["calls"]), ("pairs proposed", c["proposed"]),
            ("dropped: no source dated after the cutoff", c["not_fresh"]),
            ("dropped: near-duplicate", c["near_duplicate"]),
            ("dropped: answered without search", c["answered_without_search"]),
            ("not checked (enough pairs kept)", c["not_checked"]),
            ("kept", c["kept"]), ("kept without a baseline answer to check", c["baseline_unchecked"])]
    head = [f"## Fresh test set `{out.name}` ({result.status})", ""]
    if result.label:
        head += [f"**{result.label}**", ""]
    return "\n".join(head + ["| | pairs |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]) + "\n"


@flow(name="fresh-testset", log_prints=False)
def build_fresh_testset(after: str, n: int, out: str | None = None, style: str = "mmu:10", seed: int = 0,
                        source: str = "auto", settings: list[str] | None = None, overrides: list[str] | None = None,
                        data_root: str | None = None) -> dict:
    """Build a set of ``n`` question-answer pairs about knowledge published after ``after`` (YYYY-MM-DD).

    ``out`` defaults to ``<data root>/testsets/fresh-<after>-n<n>-seed<seed>.jsonl``. ``source`` is
    ``gemini`` (Gemini with Google Search grounding), ``offline`` (the labelled stand-in over the
    local corpus) or ``auto``; ``settings`` are ``FreshSetConfig`` fields
    (``near_duplicate_threshold=0.9``), ``overrides`` pipeline settings (``models.writer=...``).
    """
    log = get_run_logger()
    started = utcnow()
    root = resolve_data_root(data_root)
    target = Path(out) if out else root / "testsets" / f"fresh-{after}-n{n}-seed{seed}.jsonl"
    plan = plan_fresh_set({"after": after, "n": n, "style": style, "seed": seed, "source": source},
                          out=target, data_root=root, settings=settings or [], overrides=overrides or [])
    builder = start_build(plan)
    log.info(f"Fresh set after {plan.config.after}: {n} pairs from {builder.source.name}, "
             f"style {plan.style.description}")
    try:
        while builder.needs_more():
            batch = propose_pairs(plan, len(builder.batches) + 1)
            verdicts = check_pairs(plan, batch, date_sources(plan, batch))
            log.info(f"call {batch.call_no}: {len(batch.candidates)} proposed, {sum(v.kept for v in verdicts)} "
                     f"kept ({builder.kept}/{n} in all)" + (f"; {batch.status}: {batch.error}" if batch.error else ""))
        result = builder.result()
    finally:
        end_build(plan)
    pairs_path, provenance_path = write_set(plan, result)
    run_id = record_build(plan, result, started)
    summary = counts_markdown(result, pairs_path)
    create_markdown_artifact(markdown=summary, key="fresh-testset", description=f"Fresh test set {pairs_path}")
    return {"status": result.status, "out": str(pairs_path), "provenance": str(provenance_path), "run_id": run_id,
            "source": plan.source, "generator": result.source_name, "label": result.label,
            "counts": result.counts(), "markdown": summary,
            "request": json.loads(plan.config.model_dump_json())}
