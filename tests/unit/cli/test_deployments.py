"""The deployments (served and declared for a work pool) name real flows with parameters they accept."""

from __future__ import annotations

import importlib
import inspect

import yaml

from deployments.serve import NIGHTLY_CRON, deployments
from tests import PROJECT_ROOT

ROOT = PROJECT_ROOT


def _flow(entrypoint: str):
    path, name = entrypoint.split(":")
    return getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)


def test_served_deployments_include_both_nightly_evaluations_with_valid_parameters():
    served = {d.name: d for d in deployments()}
    assert {"answer", "reprocess", "credibility-experiment", "nightly-eval-faq", "nightly-eval-faq-known-item",
            "eval"} <= set(served)
    for name, dataset in (("nightly-eval-faq", "faq-a"), ("nightly-eval-faq-known-item", "faq-b")):
        nightly = served[name]
        assert nightly.parameters == {"dataset": dataset, "variants": ["final", "rag_filters"]}
        assert [s.schedule.cron for s in nightly.schedules] == [NIGHTLY_CRON]
    # the UI form comes from the flow's typed signature
    assert served["eval"].enforce_parameter_schema
    schema = served["eval"]._parameter_openapi_schema.model_dump()["properties"]
    assert schema["variants"]["anyOf"][0]["type"] == "array" and "dataset" in schema


def test_the_work_pool_file_declares_the_same_deployments_with_parameters_the_flows_accept():
    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    declared = {d["name"]: d for d in spec["deployments"]}
    served = {d.name: d for d in deployments()}
    assert set(declared) == set(served)
    for name, d in declared.items():
        flow = _flow(d["entrypoint"])
        accepted = set(inspect.signature(flow.fn).parameters)
        assert set(d.get("parameters", {})) <= accepted, name
        if name.startswith("nightly-eval"):
            assert d["parameters"] == served[name].parameters
            assert [s["cron"] for s in d["schedules"]] == [NIGHTLY_CRON]
