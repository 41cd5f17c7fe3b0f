"""What a llama.cpp build may execute: the AMX and AVX-512 instructions in its shared libraries (objdump).

A portable x86-64 build (the Makefile's) holds neither: AMX tile instructions (``ldtilecfg``, ``tileloadd``,
``tdpb*``, ...) fault on a VM that advertises AMX without granting it, and any instruction on a ``zmm``
register is AVX-512, which many x86-64 CPUs lack (SIGILL).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

AMX = re.compile(r"\t(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+|tcmmr\w+)\b")
ZMM = re.compile(r"%zmm\d+")


def llama_libraries() -> list[Path]:
    """The shared libraries of the installed llama-cpp-python (``llama_cpp/lib``)."""
    import llama_cpp

    return sorted(p for p in (Path(llama_cpp.__file__).parent / "lib").glob("*.so*") if p.is_file())


def forbidden_instructions(library: Path) -> Counter[str]:
    """Instruction lines per kind (``amx:<mnemonic>``, ``avx512:zmm``) in the library's disassembly."""
    if shutil.which("objdump") is None:
        raise RuntimeError("objdump is missing (binutils)")
    found: Counter[str] = Counter()
    with subprocess.Popen(
        ["objdump", "-d", "--no-show-raw-insn", str(library)], stdout=subprocess.PIPE, text=True
    ) as dump:
        for line in dump.stdout or ():
            if match := AMX.search(line):
                found[f"amx:{match[1]}"] += 1
            elif ZMM.search(line):
                found["avx512:zmm"] += 1
    return found
