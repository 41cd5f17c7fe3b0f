"""The service's deployments (the systemd unit, production.sh) start `hifirag serve` with options it has."""

from __future__ import annotations

import re

from typer.main import get_command

from flows.cli import app
from hifirag_core.secrets import SECRETS
from hifirag_core.serving.access import TOKEN_ENV, is_loopback
from tests import PROJECT_ROOT

DEPLOYMENTS = PROJECT_ROOT / "deployments"


def _serve_options() -> set[str]:
    serve = get_command(app).commands["serve"]
    return {opt for param in serve.params for opt in param.opts if opt.startswith("--")}


def test_the_systemd_unit_and_production_sh_pass_only_options_serve_has():
    unit = (DEPLOYMENTS / "hifirag-service.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(.*)$", unit, flags=re.M)
    assert " serve " in exec_start
    script = (DEPLOYMENTS / "production.sh").read_text()
    (launch,) = re.findall(r'launch hifirag-service "\$BIN/hifirag" serve ([^)]*)\)', script, flags=re.S)
    for command in (exec_start, launch):
        used = set(re.findall(r"(--[a-z][a-z-]*)", command))
        assert used and used <= _serve_options(), used - _serve_options()
    # it stops after its deadline has let the questions in flight finish
    stop = int(re.search(r"^TimeoutStopSec=(\d+)$", unit, flags=re.M).group(1))
    assert stop > int(re.search(r"--deadline (\d+)", exec_start).group(1))


def test_the_environment_example_names_the_shared_data_root_and_holds_no_key():
    env = (DEPLOYMENTS / "hifirag-service.env.example").read_text()
    settings = dict(line.split("=", 1) for line in env.splitlines() if line and not line.startswith("#"))
    assert {"PREFECT_API_URL", "HIFIRAG_DATA_ROOT", "PREFECT_RESULTS_LOCAL_STORAGE_PATH", "HIFIRAG_PROFILE"} <= set(settings)
    assert settings["PREFECT_RESULTS_LOCAL_STORAGE_PATH"].startswith(settings["HIFIRAG_DATA_ROOT"])
    secret_names = {name for spec in SECRETS.values() for name in spec.env}
    assert not secret_names & set(settings)  # keys appear only as commented-out, empty names


def test_the_unit_listens_beyond_loopback_so_its_environment_example_names_the_token():
    unit = (DEPLOYMENTS / "hifirag-service.service").read_text()
    host = re.search(r"--host (\S+)", re.search(r"^ExecStart=(.*)$", unit, flags=re.M).group(1)).group(1)
    env = (DEPLOYMENTS / "hifirag-service.env.example").read_text()
    if not is_loopback(host):  # `hifirag serve` refuses to start without it
        assert re.search(rf"^# {TOKEN_ENV}=$", env, flags=re.M) and TOKEN_ENV in unit
