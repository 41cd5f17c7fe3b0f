"""The installed llama.cpp runs on every x86-64 machine it is built on: no AMX, no AVX-512 (tests/support/llama_build.py).

The scanner is checked first on a library compiled here with one AVX-512 and one AMX instruction, so a scanner
that found nothing could not pass the build's check. The build's check is marked ``llama_server``: it needs
the local model build.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.llama_build import forbidden_instructions, llama_libraries

pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 builds only: others keep defaults"),
    pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)"),
]

BOTH = r"""
#include <immintrin.h>
__attribute__((target("avx512f"))) void add16(float *a, const float *b) {
    _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
}
__attribute__((target("amx-tile"))) void configure(const void *cfg) { _tile_loadconfig(cfg); }
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the control library")
def test_the_scanner_finds_amx_and_avx512_in_a_library_that_has_them(tmp_path: Path) -> None:
    (tmp_path / "both.c").write_text(BOTH)
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(tmp_path / "libboth.so"), str(tmp_path / "both.c")],
        check=True,
        capture_output=True,
    )
    found = forbidden_instructions(tmp_path / "libboth.so")
    assert found["amx:ldtilecfg"] == 1 and found["avx512:zmm"] >= 1, found


@pytest.mark.llama_server
def test_the_installed_llama_cpp_has_no_amx_and_no_avx512() -> None:
    libraries = llama_libraries()
    assert any(p.name.startswith("libggml-cpu") for p in libraries), libraries
    found = {p.name: forbidden_instructions(p) for p in libraries}
    assert not any(found.values()), (
        f"{found}: this llama-cpp-python was not built with the Makefile's portable flags; "
        "rm .venv/.local-model-built-*; make test"
    )
