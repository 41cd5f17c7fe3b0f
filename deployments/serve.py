"""Serve HiFi-RAG's deployments from this machine (a long-running process, like a worker).

    prefect server start                                  # in another terminal (UI on :4200)
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    .venv/bin/python deployments/serve.py                 # registers the deployments and runs them

Deployments:
  * ``answer``: answer a question file (parameters editable in the UI);
  * ``reprocess``: derive a run from an earlier one, recomputing from a stage (typed parameters);
  * ``credibility-experiment``: the source-aware reranking experiment;
  * ``nightly-eval-faq`` and ``nightly-eval-faq-known-item``: the evaluation flow every night on the FAQ
    protocols (a) and (b), final against rag_filters, with the regression gate (a regression ends
    the flow run Failed, which Prefect automations can notify on);
  * ``eval``: the same flow on demand, every parameter editable in the UI;
  * ``fresh-testset``: build a fresh-knowledge test set after a cutoff day (Gemini with Google Search
    when the worker has GEMINI_API_KEY, else the labelled offline stand-in).

The data root is ``$HIFIRAG_DATA_ROOT`` (default warehouse/data); the stage cache lives under it.
``deployments/prefect.yaml`` declares the same deployments for ``prefect deploy`` with a process work pool.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.environment import configure  # noqa: E402
from hifirag_core.resources import data_root, shared_data_dir  # noqa: E402

NIGHTLY_CRON = "0 2 * * *"  # 02:00 every night, in the server's time zone (UTC unless set)


def nightly_parameters(dataset: str) -> dict:
    """What the nightly evaluations run: the final system and the filters-only row, every question."""
    return {"dataset": dataset, "variants": ["final", "rag_filters"]}


def deployments() -> list:
    """The deployments to serve, built after the environment is configured."""
    from flows.answer import answer_questions
    from flows.credibility import credibility_experiment
    from flows.reprocess import reprocess

    shared_faq = str(shared_data_dir() / "docs_faq" / "faq_qa.jsonl")
    out = [
        answer_questions.to_deployment(name="answer", parameters={"questions": shared_faq, "sample": 20,
                                                                   "profile": "offline"},
                                       description="Answer a JSONL question file with the HiFi-RAG pipeline."),
        reprocess.to_deployment(name="reprocess", description="A new run derived from an earlier one, "
                                "recomputing from the chosen stage for the chosen questions."),
        credibility_experiment.to_deployment(name="credibility-experiment",
                                             description="The source-aware reranking experiment on MedQuAD."),
    ]
    from flows.eval_flow import evaluate

    for name, dataset in (("nightly-eval-faq", "faq-a"), ("nightly-eval-faq-known-item", "faq-b")):
        out.append(evaluate.to_deployment(name=name, cron=NIGHTLY_CRON, parameters=nightly_parameters(dataset),
                                          description=f"Nightly evaluation on {dataset} with the regression gate."))
    out.append(evaluate.to_deployment(name="eval", parameters={"dataset": "faq-a", "variants": ["final"], "sample": 40,
                                                                  "profile": "offline"},
                                      description="Evaluate variants on demand (mmu, faq-a, faq-b or a JSONL path)."))
    from flows.testset import build_fresh_testset

    out.append(build_fresh_testset.to_deployment(
        name="fresh-testset", parameters={"after": "2025-02-01", "n": 100, "style": "mmu:10"},
        description="Build a fresh-knowledge test set (prompt A.6 with search grounding), checked and dated."))
    return out


def main() -> None:
    from flows.environment import exit_on_sigterm, server_starting

    configure(data_root())
    exit_on_sigterm()
    with server_starting():  # without PREFECT_API_URL: a temporary server that ends with this script
        from prefect import serve

        served = deployments()
    serve(*served)


if __name__ == "__main__":
    main()
