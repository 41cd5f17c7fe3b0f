"""The stage cache as the warehouse's repair reads it: a stage's output by its cache key.

The stage tasks persist their results (``tasks.stage_tasks``) under ``cache/prefect-results`` in the data root
(``flows.environment.results_path``), one file per cache key, in Prefect's result record format; this
reads one back without a Prefect server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flows.environment import results_path
from hifirag_core.pipeline.output import StageOutput


def cached_outputs(data_root: Path) -> Callable[[str], StageOutput | None]:
    """A stage's persisted output by its cache key, or None when the cache has none (or it does not read)."""
    from prefect.results import ResultRecord

    import tasks.stage_tasks  # noqa: F401  (results cached before a module moved load through its aliases)

    folder = results_path(data_root)

    def load(cache_key: str) -> StageOutput | None:
        path = folder / cache_key
        if "/" in cache_key or not path.is_file():
            return None
        try:
            value = ResultRecord.deserialize(path.read_bytes()).result
        except Exception:  # noqa: BLE001  (a damaged or foreign result is one the cache does not hold)
            return None
        return value if isinstance(value, StageOutput) else None

    return load
