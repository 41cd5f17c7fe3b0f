"""The paired two-part table: two runs over the same two-part questions, "every gold section kept and
cited" per question, with McNemar's cells and the paired percentile bootstrap interval of the difference.

Run after ``hifirag eval --dataset two-part-report --variants final_abstain,final_deep``:

    .venv/bin/python tools/two_part_paired.py BASELINE_RUN SYSTEM_RUN

A question counts when both gold sections were kept by section ranking (in any round) and the answer
cites both pages (``hifirag_core.evaluation.two_part``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hifirag_core.evaluation.two_part import gold_sections_found, paired_table
from hifirag_core.resources import data_root
from hifirag_core.store.warehouse import Warehouse


def _variant(warehouse: Warehouse, run_id: str) -> str:
    """The run's variant, with its ``--set`` overrides (an ablation of one variant reads apart from it)."""
    rows = warehouse.query("SELECT variant, overrides_json FROM runs WHERE run_id = ?", [run_id]).rows
    if not rows:
        raise SystemExit(f"no run {run_id!r} in {warehouse.root}")
    variant, overrides = rows[0]
    extra = [o for o in json.loads(overrides or "[]") if not o.startswith("corpus.")]
    return f"{variant} ({', '.join(extra)})" if extra else str(variant)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline_run")
    parser.add_argument("system_run")
    parser.add_argument("--data-root", type=Path, help="the data root [default: $HIFIRAG_DATA_ROOT, else the project's]")
    args = parser.parse_args()
    warehouse = Warehouse(data_root(args.data_root))
    names = (_variant(warehouse, args.baseline_run), _variant(warehouse, args.system_run))
    table = paired_table(gold_sections_found(warehouse, args.baseline_run),
                         gold_sections_found(warehouse, args.system_run), names)
    print(f"runs: {args.baseline_run} (baseline), {args.system_run} (system)")
    print(table.markdown())


if __name__ == "__main__":
    main()
