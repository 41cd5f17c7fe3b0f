"""The commands that start flows give Prefect the project's process settings before anything imports it.

Prefect reads its settings once, when it is imported. ``hifirag run``, ``reprocess`` and ``eval`` checked their
runner options (which imports Prefect) before making those settings, so the temporary server's start-up
timeout was Prefect's own 20 s instead of the project's 180 s, and on a busy machine a run failed with
"Prefect's temporary server did not answer in 20 s" (seen at a load of 17 on two cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sitegen import write_questions

ROOT = Path(__file__).resolve().parents[1]

# The command as the user calls it, up to the flow's start: there it prints the settings Prefect holds.
COMMAND = """
import sys
import flows.cli.run as run
import hifirag_core.pipeline.plan as plan

def answer_plans(root, plans, where):
    from prefect.settings import get_current_settings
    settings = get_current_settings()
    print(settings.server.ephemeral.startup_timeout_seconds, settings.home)
    raise SystemExit(0)

run.answer_plans = answer_plans
plan.plan_reprocess = lambda *args, **kwargs: None  # no parent run needed to reach the flow
sys.argv = ["hifirag", *sys.argv[1:]]
from flows.cli import main
main()
"""


@pytest.mark.parametrize("command", ["run", "reprocess"])
def test_a_command_that_starts_a_flow_gives_prefect_the_projects_settings(tmp_path, command):
    from flows.environment import DEFAULTS

    questions = write_questions(tmp_path / "questions.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect-home"), "HIFIRAG_DATA_ROOT": str(tmp_path / "data"),
            "PYTHONPATH": str(ROOT)}
    args = [str(questions), "--run-id", "r1"] if command == "run" else ["r1", "--from", "answer"]
    done = subprocess.run([sys.executable, "-c", COMMAND, command, *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    timeout, home = done.stdout.split()
    assert float(timeout) == float(DEFAULTS["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
    assert Path(home) == tmp_path / "prefect-home"
