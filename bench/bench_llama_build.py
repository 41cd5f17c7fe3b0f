"""Tokens per second of two llama-cpp-python builds side by side: the Makefile's portable one against a native one.

Each wheel is unpacked into a folder of its own and loaded in a subprocess of this venv's Python with that
folder first on ``sys.path`` (the subprocess checks which ``llama_cpp`` it imported). The builds take turns,
round after round, so the machine's load falls on both alike; each round loads the model, evaluates one
prompt (prompt tokens/s) and generates greedily (generated tokens/s). The table shows the median of the
rounds and the AMX / AVX-512 instructions objdump finds in each build's libraries (tests/support/llama_build.py).

Build the native wheel once (about 7 minutes on two idle cores; the Makefile's is in the user's cache). On a
machine that advertises AMX without granting it a native build dies in its first round (SIGSEGV): add
``-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF`` to measure native without AMX there.

    CMAKE_ARGS=-DGGML_NATIVE=ON pip wheel --no-cache-dir --no-deps -w /tmp/llama-native llama-cpp-python==0.3.36
    .venv/bin/python bench/bench_llama_build.py --portable ~/.cache/hifirag/llama-cpp-python-wheels/0.3.36-*/*.whl \\
        --native /tmp/llama-native/*.whl
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.llama_build import forbidden_instructions  # noqa: E402
from tests.support.llama_server import GEMMA, SMOLLM2  # noqa: E402

# One round in the subprocess: argv = unpacked folder, model path, threads, prompt tokens, tokens to generate.
ROUND = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import llama_cpp
assert llama_cpp.__file__.startswith(sys.argv[1]), llama_cpp.__file__
model, threads, n_prompt, n_gen = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, n_batch=512,
                      verbose=False)
text = " ".join(f"Section {i} of the manual explains how option {i} changes the server's behaviour." for i in range(200))
tokens = llm.tokenize(text.encode())[:n_prompt]
began = time.perf_counter()
llm.eval(tokens)
prompt_s = time.perf_counter() - began
began = time.perf_counter()
for _ in range(n_gen):
    llm.eval([llm.sample(temp=0.0)])
gen_s = time.perf_counter() - began
print(json.dumps({"prompt_tps": len(tokens) / prompt_s, "gen_tps": n_gen / gen_s, "prompt_tokens": len(tokens)}))
"""


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(into)
    return into


def one_round(folder: Path, model: Path, threads: int, n_prompt: int, n_gen: int) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", ROUND, str(folder), str(model), str(threads), str(n_prompt), str(n_gen)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if run.returncode != 0:
        raise SystemExit(f"a round failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--portable", type=Path, required=True, help="the Makefile's wheel")
    parser.add_argument("--native", type=Path, required=True, help="a wheel built with -DGGML_NATIVE=ON")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--models", default="smollm2,gemma", help="smollm2, gemma or both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hifirag-bench-llama-build-") as work:  # the unpacked wheels
        builds = {
            name: unpack(wheel, Path(work) / name)
            for name, wheel in (("portable", args.portable), ("native", args.native))
        }
        compare(builds, args)


def compare(builds: dict[str, Path], args: argparse.Namespace) -> None:
    """Print the instruction scan of each build and the table of tokens per second."""
    models = {"smollm2": SMOLLM2, "gemma": GEMMA}
    print(f"CPU: {cpu_flags()}")
    for name, folder in builds.items():
        found: dict[str, int] = {}
        for library in sorted((folder / "llama_cpp" / "lib").glob("*.so*")):
            for kind, n in forbidden_instructions(library).items():
                found[kind] = found.get(kind, 0) + n
        print(f"{name}: {args.__dict__[name]}; AMX/AVX-512 instruction lines: {found or 'none'}")
    print(
        f"\n{args.rounds} rounds, builds alternating; {args.threads} threads; median tokens/s "
        f"(prompt of {args.prompt_tokens} tokens, {args.gen_tokens} generated greedily)\n"
    )
    print("| model | build | prompt tokens/s | generated tokens/s | portable / native (prompt, generated) |")
    print("|---|---|---|---|---|")
    for key in [m.strip() for m in args.models.split(",") if m.strip()]:
        path = models[key].path()
        figures: dict[str, list[dict]] = {name: [] for name in builds}
        for _ in range(args.rounds):
            for name, folder in builds.items():
                figures[name].append(
                    one_round(folder, path, args.threads, args.prompt_tokens, args.gen_tokens)
                )
        med = {
            name: (
                statistics.median(r["prompt_tps"] for r in rows),
                statistics.median(r["gen_tps"] for r in rows),
            )
            for name, rows in figures.items()
        }
        for name in builds:
            ratio = (
                f"{med['portable'][0] / med['native'][0]:.2f}, {med['portable'][1] / med['native'][1]:.2f}"
                if name == "portable"
                else ""
            )
            print(f"| {models[key].alias} | {name} | {med[name][0]:.0f} | {med[name][1]:.1f} | {ratio} |")


def cpu_flags() -> str:
    """The CPU's model name and its AVX-512 / AMX flags, from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    name = next(
        (line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?"
    )
    flags = next(
        (line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []
    )
    wide = sorted({f for f in flags if f.startswith(("avx512", "amx"))})
    return f"{name}; AVX-512/AMX flags: {' '.join(wide) or 'none'}; avx2: {'avx2' in flags}"


if __name__ == "__main__":
    main()
