"""A built set on disk: MMU-RAGent JSONL (``query``, ``reference``, ``iid``) and a provenance file.

The provenance file (``<name>.provenance.json`` beside the JSONL) says how the set was made: the
generator (and, for the offline stand-in, that it is one), the request, the checks and their
thresholds, how many pairs each check dropped, every kept pair with its sources and their dates,
every dropped pair with its reason, and the model calls' tokens and cost. It holds no wall-clock
time or random id, so the same seed and the same model replies give byte-identical files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hifirag_core.testset.build import FreshSet

MMU_FIELDS = ("query", "reference", "iid")  # the order of the MMU-RAGent validation file


def provenance_path(out: Path) -> Path:
    """``fresh.jsonl`` -> ``fresh.provenance.json``."""
    return out.with_name(f"{out.stem}.provenance.json")


def pairs_jsonl(result: FreshSet) -> str:
    """The kept pairs as MMU-RAGent JSON Lines."""
    lines = [json.dumps({"query": v.candidate.query, "reference": v.candidate.reference, "iid": v.iid},
                        ensure_ascii=False) for v in result.kept]
    return "".join(line + "\n" for line in lines)


def provenance(result: FreshSet, *, generator: dict, checks: dict, pairs_file: str) -> dict:
    """The provenance document of a build."""
    cfg = result.config
    return {
        "kind": "hifirag fresh-knowledge test set",
        "label": result.label,
        "status": result.status,
        "pairs_file": pairs_file,
        "generator": {"name": result.source_name, **generator},
        "request": {"after": cfg.after.isoformat(), "n": cfg.n, "style": cfg.style, "seed": cfg.seed,
                    "as_of": cfg.today.isoformat() if cfg.today else None, "date_evidence": cfg.date_evidence,
                    "pairs_per_call": cfg.pairs_per_call, "max_calls": cfg.max_calls,
                    "style_examples": [e.example_id for e in result.examples]},
        "checks": checks,
        "counts": result.counts(),
        "pairs": [v.to_json() for v in result.verdicts if v.kept],
        "dropped": [v.to_json() for v in result.verdicts if v.rule is not None],
        "not_checked": [v.candidate.candidate_id for v in result.verdicts if not v.kept and v.rule is None],
        "batches": [{"call": b.call_no, "status": b.status, "error": b.error, "proposed": len(b.candidates),
                     "searches": b.searches, "skipped_objects": b.problems} for b in result.batches],
        "calls": [{"stage": c.stage, "backend": c.backend, "model": c.model, "prompt_name": c.prompt_name,
                   "status": c.status, "tokens_in": c.tokens_in, "tokens_out": c.tokens_out,
                   "tokens_thinking": c.tokens_thinking, "cost_usd": c.cost_usd} for c in result.calls],
    }


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def write_fresh_set(result: FreshSet, out: Path, *, generator: dict, checks: dict) -> tuple[Path, Path]:
    """Write the JSONL and its provenance file; returns both paths."""
    out = Path(out)
    side = provenance_path(out)
    doc = provenance(result, generator=generator, checks=checks, pairs_file=out.name)
    _write_atomic(out, pairs_jsonl(result))
    _write_atomic(side, json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n")
    return out, side


def validate_mmu_jsonl(path: Path) -> list[str]:
    """Problems that keep ``path`` from being an MMU-RAGent question file (empty when it is one)."""
    problems: list[str] = []
    seen: set[str] = set()
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        problems.append("the file holds no pairs")
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {n}: not JSON ({exc.msg})")
            continue
        if not isinstance(obj, dict) or set(obj) != set(MMU_FIELDS):
            problems.append(f"line {n}: expected exactly the fields {list(MMU_FIELDS)}")
            continue
        if not isinstance(obj["query"], str) or not obj["query"].strip():
            problems.append(f"line {n}: empty query")
        if not isinstance(obj["reference"], str) or not obj["reference"].strip():
            problems.append(f"line {n}: empty reference")
        iid = obj["iid"]
        if not isinstance(iid, str) or not iid.strip():
            problems.append(f"line {n}: empty iid")
        elif iid in seen:
            problems.append(f"line {n}: duplicate iid {iid!r}")
        else:
            seen.add(iid)
    return problems
