"""The package works installed, outside a checkout: a wheel in a new virtual environment, run from a
temporary folder, reads its prompts and SQL from the package and keeps its data in the per-user folder.

The wheel is built from a copy of the repository's files (so the checkout gets no build folders) and
installed with ``--no-deps``; the new environment reaches the project's dependencies through a path file
that names the development environment's site-packages, so the test needs no network, and nothing of
the checkout is on its path (the editable install's own path hook is not read from there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.shared_data]


def _repository_files(root: Path) -> list[str]:
    """The files of the working tree that git keeps or would keep (new files too; nothing ignored)."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                          capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    for name in _repository_files(PROJECT_ROOT):
        src, dst = PROJECT_ROOT / name, source / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(dist), str(source)], check=True, cwd=work)
    (wheel,) = dist.glob("hifirag-*.whl")
    env_dir = work / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies, from the development environment (a plain path: its .pth files are not read)
    Path(site, "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet",
                    str(wheel)], check=True, cwd=work)
    outside = work / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "HIFIRAG_DATA_ROOT", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(XDG_DATA_HOME=str(work / "user-data"), HIFIRAG_SHARED_DATA=str(PROJECT_ROOT.parent / "shared" / "data"),
               PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    return {"bin": env_dir / "bin", "cwd": outside, "env": env, "user_data": work / "user-data" / "hifirag",
            "wheel": wheel}


def _hifirag(installed: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(installed["bin"] / "hifirag"), *args], cwd=installed["cwd"], env=installed["env"],
                          capture_output=True, text=True, timeout=timeout)


def test_the_wheel_ships_the_prompts_and_the_sql(installed):
    import zipfile

    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    assert "hifirag_core/assets/prompts/draft.txt" in names
    assert "hifirag_core/assets/prompts/refine_examples.toml" in names
    assert "hifirag_core/assets/views/00_tables.sql" in names
    assert "hifirag_core/credibility/source_rules.toml" in names
    assert not any(n.startswith(("tests/", "bench/", "tools/")) for n in names)


def _package_data(root: Path) -> set[str]:
    """Every file beside the code that the packages may open: the repository's non-Python files under
    hifirag_core, flows and tasks, the linked prompt and SQL folders followed, as a wheel names them."""
    files = set(_repository_files(root))
    out = set()
    for name in files:
        if not name.startswith(("hifirag_core/", "flows/", "tasks/")) or name.endswith(".py"):
            continue
        path = root / name
        if path.is_dir():  # a link to a folder: its repository files, under the link's name
            target = path.resolve().relative_to(root.resolve()).as_posix()
            out |= {name + f[len(target):] for f in files if f.startswith(target + "/") and (root / f).is_file()}
        else:
            out.add(name)
    return out


def test_the_wheel_holds_every_data_file_the_packages_read(installed):
    import zipfile

    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    expected = _package_data(PROJECT_ROOT)
    assert "hifirag_core/evaluation/transfer_set.json" in expected and "hifirag_core/assets/views/00_tables.sql" in expected
    assert expected - names == set()
    # and the installed package reads them where its code looks: the transfer set of `hifirag eval --dataset transfer-*`
    code = ("from hifirag_core.evaluation.transfer_set import SPEC_PATH; import json; "
            "print(len(json.loads(SPEC_PATH.read_text())))")
    read = subprocess.run([str(installed["bin"] / "python"), "-c", code], cwd=installed["cwd"], env=installed["env"],
                          capture_output=True, text=True)
    assert read.returncode == 0 and int(read.stdout) > 0, read.stderr[-2000:]


def test_the_installed_command_answers_offline_from_outside_the_checkout(installed):
    code = ("import hifirag_core, flows; "
            "print(hifirag_core.__file__); print(flows.__file__)")
    where = subprocess.run([str(installed["bin"] / "python"), "-c", code], cwd=installed["cwd"],
                           env=installed["env"], capture_output=True, text=True, check=True).stdout.split()
    assert all(str(PROJECT_ROOT) not in path for path in where), where  # the installed copy, not the checkout

    shown = _hifirag(installed, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "demo" in shown.stdout and "doctor" in shown.stdout

    before = _hifirag(installed, "doctor")
    assert before.returncode == 1  # nothing built yet: it says what is missing and how to fix it
    assert "corpus build" in before.stdout

    questions = PROJECT_ROOT.parent / "shared" / "data" / "docs_faq" / "faq_qa.jsonl"
    ran = _hifirag(installed, "run", str(questions), "--limit", "2", "--variant", "final")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    assert "n answered" in ran.stdout and "│ 2 " in ran.stdout.split("n answered", 1)[1][:40]
    assert (installed["user_data"] / "hifirag.duckdb").exists()  # the per-user data folder
    assert (installed["user_data"] / "prefect").is_dir()  # Prefect's home beside it

    after = _hifirag(installed, "doctor")
    assert after.returncode == 0, after.stdout
