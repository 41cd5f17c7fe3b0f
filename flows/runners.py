"""Where a run's questions execute: a thread pool in the flow's process, or a Dask cluster.

``threads`` (the default) runs ``limits.concurrency`` questions at a time in the flow's process,
sharing one runtime. ``dask`` submits each question to a Dask cluster through prefect-dask: a
``LocalCluster`` of worker processes started for the run, or an existing scheduler
(``dask_address``, e.g. ``tcp://10.0.0.5:8786``) whose workers run on other machines. Every worker
resolves the run's context into its own runtime once, and writes nothing itself: the flow writes
each finished question through the warehouse's one writer, so both runners leave the same rows.

Workers talk to the Prefect API (task runs, the stage cache's records, the run's shared rate
limits and budget). A flow on the temporary local server would otherwise leave each worker
process starting a temporary server of its own on the same database, so the flow hands the
workers the URL of the server it is using.
"""

from __future__ import annotations

# Prefect is imported where it is used: the command line checks a runner choice (RunnerChoice) before it
# configures the process for Prefect, and Prefect reads its settings once, when first imported.
import contextlib
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from hifirag_core.config import usable_cores

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

Runner = Literal["threads", "dask"]
RUNNERS: tuple[str, ...] = ("threads", "dask")


@dataclass(frozen=True)
class RunnerChoice:
    """How a run's questions are executed; a flow parameter, never part of the run's identity."""

    kind: Runner = "threads"
    dask_address: str | None = None  # an existing scheduler; None starts a LocalCluster for the run
    dask_workers: int = 2  # processes of the LocalCluster
    dask_threads: int | None = None  # threads per worker; None: questions in flight / workers

    def __post_init__(self) -> None:
        if self.kind not in RUNNERS:
            raise ValueError(f"runner {self.kind!r}: choose one of {', '.join(RUNNERS)}")
        if self.dask_address and self.kind != "dask":
            raise ValueError("a Dask scheduler address needs the dask runner")
        if self.dask_workers < 1:
            raise ValueError("the Dask cluster needs at least one worker")

    @property
    def shares_limits(self) -> bool:
        """Several processes answer the run's questions: keep its rate limits and budget on the server."""
        return self.kind == "dask"


@contextlib.contextmanager
def api_visible_to_workers() -> Iterator[None]:
    """Run the block with ``PREFECT_API_URL`` set to the server this process uses (the temporary one too)."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield
        return
    with get_client(sync_client=True) as client:
        url = str(client.api_url)
    with temporary_settings(updates={PREFECT_API_URL: url}):
        yield


@contextlib.contextmanager
def local_cluster(choice: RunnerChoice, concurrency: int) -> Iterator[str]:
    """A LocalCluster for ``choice`` (or the given scheduler); yields the scheduler's address."""
    if choice.dask_address:
        yield choice.dask_address
        return
    import dask
    from distributed import LocalCluster

    threads = choice.dask_threads or max(1, math.ceil(concurrency / choice.dask_workers))
    # Dask sets OMP_NUM_THREADS=1 in its workers before they start: one torch thread per worker thread.
    # Each worker would count every core of the machine and load a MiniLM replica per core; the
    # workers share the cores, so each gets its share (an explicit HIFIRAG_ENCODERS wins).
    env = {"HIFIRAG_ENCODERS": os.environ.get("HIFIRAG_ENCODERS") or str(max(1, usable_cores() // choice.dask_workers))}
    # Each worker's statistical profiler walks every thread's stack 100 times a second, for a dashboard
    # this cluster does not serve; on two cores that is CPU the questions need.
    with dask.config.set({"distributed.worker.profile.enabled": False}), \
            LocalCluster(n_workers=choice.dask_workers, threads_per_worker=threads, processes=True,
                         dashboard_address=None, silence_logs=logging.WARNING, env=env) as cluster:
        yield cluster.scheduler_address


@contextlib.contextmanager
def shared_cluster(choice: RunnerChoice, concurrency: int) -> Iterator[RunnerChoice]:
    """For a flow that runs several runs (variants, an evaluation): one LocalCluster for all of them.

    Yields the choice to pass on: unchanged for threads or a given scheduler, else pointing at the
    cluster started here, whose workers keep their models loaded from one run to the next.
    """
    if choice.kind != "dask" or choice.dask_address:
        yield choice
        return
    with api_visible_to_workers(), local_cluster(choice, concurrency) as address:
        yield replace(choice, dask_address=address)


@contextlib.contextmanager
def question_runner(choice: RunnerChoice, concurrency: int) -> Iterator[TaskRunner]:
    """A started task runner that executes ``answer_question`` tasks for ``choice``."""
    if choice.kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        with ThreadPoolTaskRunner(max_workers=concurrency) as runner:
            yield runner
        return
    from prefect_dask import DaskTaskRunner

    with api_visible_to_workers(), local_cluster(choice, concurrency) as address, \
            DaskTaskRunner(address=address) as runner:
        yield runner
