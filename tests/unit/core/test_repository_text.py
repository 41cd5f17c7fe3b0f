"""Text true to the repository (issue 38): what users and readers see names no file the repository lacks, and
a docstring that names a default names the real one."""

from __future__ import annotations

import re
import subprocess

from tests import PROJECT_ROOT

TEXT = (".py", ".md", ".sh", ".toml", ".yaml", ".html", ".js", ".service", ".example", ".sql")


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout
    return out.split()


def test_every_markdown_file_the_text_names_is_in_the_repository():
    names = {path.rsplit("/", 1)[-1] for path in _tracked()}
    missing = {}
    for path in _tracked():
        file = PROJECT_ROOT / path
        if not path.endswith(TEXT) or not file.is_file():
            continue
        for name in re.findall(r"\b[A-Z][A-Z_]+\.md\b", file.read_text(encoding="utf-8", errors="replace")):
            if name not in names:
                missing.setdefault(name, []).append(path)
    assert not missing, missing


def test_the_answerability_docstring_names_the_default_variant():
    from hifirag_core.config import AnswerabilityConfig
    from hifirag_core.pipeline.variants import DEFAULT_RUN_VARIANT

    doc = " ".join(AnswerabilityConfig.__doc__.split())
    assert f"``{DEFAULT_RUN_VARIANT}``, the default of ``hifirag run`` and the service" in doc


def test_no_text_names_a_file_beside_the_repository_but_the_shared_data_sets():
    """Beside a checkout only the shared data sets are looked for (``../shared/data``, or
    ``$HIFIRAG_SHARED_DATA``); the papers and the design notes next to them are not the user's."""
    named = {}
    for path in _tracked():
        file = PROJECT_ROOT / path
        if not path.endswith(TEXT) or not file.is_file() or path == "tests/unit/core/test_repository_text.py":
            continue
        for folder in re.findall(r"(?:\.\./)+shared/([\w.-]+)", file.read_text(encoding="utf-8", errors="replace")):
            if folder != "data":
                named.setdefault(folder, []).append(path)
    assert not named, named
