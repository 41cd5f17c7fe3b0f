"""Without the local model server the llama_server tests fail, unless HIFIRAG_SKIP_LOCAL_MODEL=1 says to skip.

Each case runs pytest on tests/system/test_local_model_injection.py in a new process whose ``llama_cpp`` cannot
be imported (a module of that name that raises ImportError comes first on the path), the way a venv
where llama-cpp-python failed to build looks to the tests. No server is started in any case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import PROJECT_ROOT
from tests.support.llama_server import OPT_OUT_VARIABLE, opt_out_reason

ROOT = PROJECT_ROOT


def _pytest_without_llama_cpp(tmp_path: Path, opt_out: str | None) -> subprocess.CompletedProcess[str]:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "llama_cpp.py").write_text('raise ImportError("llama_cpp could not be built")\n')
    env = {k: v for k, v in os.environ.items() if k != OPT_OUT_VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join([str(broken), str(ROOT)])
    if opt_out is not None:
        env[OPT_OUT_VARIABLE] = opt_out
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/system/test_local_model_injection.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a pytest process: a few seconds
def test_without_the_opt_out_a_missing_server_fails_the_run(tmp_path: Path) -> None:
    run = _pytest_without_llama_cpp(tmp_path, None)
    assert run.returncode == 1, run.stdout
    assert "skipped" not in run.stdout and "1 error" in run.stdout
    assert "apt-get install build-essential cmake" in run.stdout and f"{OPT_OUT_VARIABLE}=1" in run.stdout


@pytest.mark.slow
def test_the_opt_out_skips_and_is_the_summarys_first_line(tmp_path: Path) -> None:
    run = _pytest_without_llama_cpp(tmp_path, "1")
    assert run.returncode == 0, run.stdout
    lines = run.stdout.splitlines()
    progress = next(i for i, line in enumerate(lines) if line.rstrip().endswith("[100%]"))
    assert lines[progress + 1] == (f"{OPT_OUT_VARIABLE}=1: the local model server was not built and its tests "
                                   "do not run (1 llama_server test skipped)")
    assert lines[-1].startswith("1 skipped")


@pytest.mark.parametrize(("value", "opted_out"), [("1", True), (" 1 ", True), ("0", False), ("", False),
                                                  ("yes", False)])
def test_only_the_value_1_opts_out(monkeypatch: pytest.MonkeyPatch, value: str, opted_out: bool) -> None:
    monkeypatch.setenv(OPT_OUT_VARIABLE, value)
    assert (opt_out_reason() is not None) == opted_out
