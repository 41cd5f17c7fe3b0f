"""Prefect reads its settings once, when first imported: the command line must configure the process first.

``hifirag run`` and ``hifirag eval`` check the runner choice before they configure the process
(``flows.cli.common.setup``); when that check imported Prefect, the settings set afterwards were never read, and
the temporary server's start-up allowance fell back to Prefect's 20 s instead of the project's 180 s: on a busy
machine ``hifirag run`` then failed with "Prefect's temporary server did not answer in 20 s".
"""

from __future__ import annotations

import subprocess
import sys

from tests import PROJECT_ROOT

SCRIPT = """
import os, sys
from flows.cli.common import runner_params, setup
runner_params("threads", None, 2)
runner_params("dask", None, 2)
assert "prefect" not in sys.modules, "checking the runner choice imported Prefect"
os.environ.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", None)
setup(None)
from flows.environment import DEFAULTS, TemporaryServer
print(TemporaryServer().timeout_s, DEFAULTS["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
"""


def test_checking_the_runner_leaves_prefect_unimported_so_the_projects_settings_hold(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT),
                                            "HIFIRAG_DATA_ROOT": str(tmp_path / "data"),
                                            "PREFECT_HOME": str(tmp_path / "prefect")})
    assert done.returncode == 0, done.stderr
    seen, wanted = done.stdout.split()
    assert float(seen) == float(wanted) == 180.0
