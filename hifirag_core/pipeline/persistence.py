"""A finished question's rows into the warehouse: every stage's records, the calls behind them, the ledger."""

from __future__ import annotations

from hifirag_core.pipeline.output import CALL_TABLES, StageOutput, question_calls
from hifirag_core.pipeline.runner import QuestionResult
from hifirag_core.pipeline.specs import ROUND, spec
from hifirag_core.store.warehouse import Warehouse


def write_output(warehouse: Warehouse, run_id: str, question_id: str, output: StageOutput) -> None:
    """One stage's rows for one question, each record type into its own table (an empty write still
    replaces what an earlier attempt wrote)."""
    for cls in spec(output.stage).records:
        rows = [r for r in output.records if isinstance(r, cls)]
        warehouse.write(cls.TABLE, rows, run_id=run_id, stage=output.stage, question_id=question_id,
                        round=output.round)


def write_result(warehouse: Warehouse, run_id: str, result: QuestionResult) -> None:
    """Persist every stage's rows and the model and search calls behind them (marked reused when the stage
    was), and nothing of a round the question did not reach this time."""
    qid = result.question.id
    for output in result.outputs:
        write_output(warehouse, run_id, qid, output)
    for table in CALL_TABLES:
        calls = question_calls(table, zip(result.outputs, result.cached, strict=True))
        warehouse.write(table, calls, run_id=run_id, stage=None, question_id=qid)
    warehouse.write("stage_runs", result.ledger, run_id=run_id, stage=None, question_id=qid)
    # an earlier attempt under this run id that looked again more times leaves no later round behind
    warehouse.drop_rounds_after(run_id, qid, max((o.round for o in result.outputs), default=0),
                                [s.name for s in ROUND])
