"""The Prefect side of ``hifirag serve``: served questions run as the batch flow's ``answer_question`` task.

The service itself (slots, streams, the HTTP app) is ``hifirag_core.serving``; this module gives it an
answerer whose every stage is a cached Prefect task, with the stage cache under the data root.
"""

from __future__ import annotations

from pathlib import Path

from flows.answer import answer_question
from flows.environment import shared_api_url, stage_cache_at
from hifirag_core.pipeline.plan import RunPlan
from hifirag_core.pipeline.runner import QuestionResult
from hifirag_core.questions import Question
from hifirag_core.serving.service import Service, StageObserver
from hifirag_core.serving.settings import ServiceSettings
from tasks.stage_tasks import resolve


class PrefectAnswerer:
    """Questions through ``answer_question`` (threads of this process), each stage a cached Prefect task.

    With a Prefect API server that other processes reach too (``PREFECT_API_URL``), the service's rate
    limits and budget are counted on it (``tasks.shared_limits.PrefectLedger``), together with every batch run
    and other service using that server; with its own temporary server, in this process.
    """

    def __init__(self, data_root: Path):
        self.data_root = data_root
        self.shared_limits = shared_api_url() is not None

    def warm_up(self, plan: RunPlan) -> None:
        from prefect import get_client

        resolve(self._context(plan)).embedder.load()
        with get_client(sync_client=True) as client:
            problem = client.api_healthcheck()
        if problem is not None:
            raise RuntimeError(f"the Prefect API does not answer ({type(problem).__name__}); "
                               "check PREFECT_API_URL or unset it for a temporary local server")

    def answer(self, question: Question, plan: RunPlan, observer: StageObserver) -> QuestionResult:
        with stage_cache_at(self.data_root):
            return answer_question(question=question, ctx=self._context(plan), observer=observer)

    def _context(self, plan: RunPlan):
        return plan.context(shared_limits=self.shared_limits)


def build_service(settings: ServiceSettings) -> Service:
    """The service with the Prefect answerer (``hifirag_core.serving.app.serve`` starts it)."""
    return Service(settings, PrefectAnswerer(settings.data_root))
