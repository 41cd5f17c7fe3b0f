"""The cache policy every stage task shares: the key comes from ``hifirag_core.stages.cache_key``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.context import TaskRunContext

from hifirag_core.stages import cache_key

# How every stage task stores its result: persisted (the stage cache), and read back from disk rather
# than kept in memory. Prefect's in-memory result cache is one LRU (1,000 entries) shared by the
# threads of a flow; once a run passes 1,000 stage results, concurrent evictions raise KeyError on a
# cache hit (seen on a 217-question rerun at 4 questions at a time: one question lost its answer).
STORED_RESULT: dict[str, Any] = {"persist_result": True, "cache_result_in_memory": False}

# Network stages back off before retrying; a stage that fails after these becomes a status row.
IO_RETRIES = 2
IO_RETRY_DELAYS = [2, 10]


def stage_cache_key(stage: str) -> Callable[[TaskRunContext, dict[str, Any]], str]:
    """A ``cache_key_fn`` for ``stage``: its inputs (every parameter but the runtime) and the runtime's slice."""

    def key(_context: TaskRunContext, parameters: dict[str, Any]) -> str:
        inputs = {name: value for name, value in parameters.items() if name != "rt"}
        return cache_key(stage, inputs, parameters["rt"])

    return key
