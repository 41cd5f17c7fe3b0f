"""Stage results cached by an earlier release still load: nothing an upgrade moves makes a run pay again.

``tests/support/stage_cache/`` holds one question's ten persisted stage results exactly as Prefect wrote them
on main of 2026-12-04 (45495a0, before the pipeline's stages were split into a package): the offline
``make demo`` run, question ``python-django-doc:faq/admin.html#how-do-i-automatically-set-a-field-s-value-to-
the-user-who-last-edited-the-object-in-the-admin``. Only the metadata's ``storage_key`` was made relative.
Their pickles name the modules of the classes they hold (``hifirag_core.pipeline.output.StageOutput``, the
record classes of ``hifirag_core.records``, ``hifirag_core.types.Conversation``); a class that moves without a
name left behind fails here, where it would otherwise silently recompute, and pay for, every cached stage.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import cloudpickle
import pytest
from prefect.results import ResultRecord

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.specs import SPECS
from hifirag_core.records import AnswerRecord, DraftRecord
from hifirag_core.types import Conversation
from tests import SUPPORT

CACHE = SUPPORT / "stage_cache"
FILES = sorted(CACHE.glob("*.json"))


def test_the_fixture_holds_every_stage_of_the_final_variant():
    assert sorted(f.name.split("-", 1)[0] for f in FILES) == sorted(
        name for name, s in SPECS.items() if not s.research)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split("-", 1)[0])
def test_a_result_cached_before_the_split_loads_as_a_stage_output(path: Path):
    stage = path.name.split("-", 1)[0]
    output = ResultRecord.deserialize(path.read_bytes()).result
    assert isinstance(output, StageOutput) and output.stage == stage and output.status == "ok"
    assert output.records and all(isinstance(r, SPECS[stage].records) for r in output.records)
    if stage == "draft":
        assert isinstance(output.value, Conversation) and output.value.last_reply
    if stage == "answer":
        (answer,) = output.records
        assert isinstance(answer, AnswerRecord) and answer.cited_urls and answer.text


def test_a_moved_class_fails_the_load(monkeypatch):
    """The check can fail: a pickle naming a module that no longer exists does not load."""
    data = cloudpickle.dumps(DraftRecord(text="x"))
    renamed = data.replace(b"hifirag_core.records", b"hifirag_core.recordz")
    monkeypatch.delitem(sys.modules, "hifirag_core.recordz", raising=False)
    assert pickle.loads(data) == DraftRecord(text="x")
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(renamed)


def test_results_cached_before_the_regrouping_still_load(monkeypatch):
    """The older shim (``tasks.stage_tasks``): pickles of before 2026-12 name ``hifirag_core.stages``."""
    import tasks.stage_tasks  # noqa: F401 - installs the old module names

    monkeypatch.setattr(StageOutput, "__module__", "hifirag_core.stages")  # pickled as the old release named it
    old = pickle.dumps(StageOutput(stage="draft", records=[DraftRecord(text="x")]))
    monkeypatch.undo()
    assert b"hifirag_core.stages" in old and b"hifirag_core.pipeline.output" not in old
    assert pickle.loads(old).records == [DraftRecord(text="x")]
