"""The house rules of the imports: the layer table's contracts, no cycles, no private names across packages.

The import graph is grimp's (the library under import-linter), with imports made only for type
checking included: a cycle that exists only for the type checker is still a knot a reader has to untie.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from tests import PROJECT_ROOT


def strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """The groups of nodes that import each other, directly or not (Tarjan), largest first; singletons left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 10_000))
    try:
        for node in sorted(edges):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(old_limit)
    return sorted(groups, key=len, reverse=True)


def import_edges(graph: grimp.ImportGraph, package: str, *, folders: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports; with ``folders``, each subpackage is one node
    (``hifirag_core.pipeline.specs`` counts as ``hifirag_core.pipeline``; a root module is its own node)."""
    packages = {m for m in graph.modules if m.startswith(package + ".") and graph.find_children(m)}

    def node(module: str) -> str:
        if not folders:
            return module
        parts = module.split(".")
        top = ".".join(parts[:2])
        return top if top in packages else module

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if not (module == package or module.startswith(package + ".")):
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(package + ".") and node(imported) != node(module):
                edges.setdefault(node(module), set()).add(node(imported))
    return edges


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("hifirag_core", "flows", "tasks", include_external_packages=True,
                             exclude_type_checking_imports=False, cache_dir=None)


def test_every_folder_of_code_is_a_package_the_graph_sees():
    """A folder without ``__init__.py`` is a namespace package, which the import graph leaves out: the checks
    below would pass blind to it."""
    folders = {p.parent for top in ("hifirag_core", "flows", "tasks") for p in (PROJECT_ROOT / top).rglob("*.py")}
    assert sorted(str(f.relative_to(PROJECT_ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


def test_the_graph_holds_every_module(graph):
    files = {".".join(p.relative_to(PROJECT_ROOT).with_suffix("").parts).removesuffix(".__init__")
             for p in (PROJECT_ROOT / "hifirag_core").rglob("*.py")}
    assert files <= graph.modules


def test_hifirag_core_has_no_import_cycle_between_modules(graph):
    assert strongly_connected(import_edges(graph, "hifirag_core")) == []


def test_hifirag_core_has_no_import_cycle_between_its_folders(graph):
    assert strongly_connected(import_edges(graph, "hifirag_core", folders=True)) == []


# --- the layer table (docs/architecture.md), as import-linter contracts in pyproject.toml -------------------


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess:
    """``lint-imports`` on the packages under ``root``, with the contracts of ``root``'s pyproject.toml."""
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", "--no-logo",
               *(arg for c in contracts for arg in ("--contract", c)), str(root / "pyproject.toml")]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})


def contract_ids() -> list[str]:
    return [c["id"] for c in tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
            ["contracts"]]


def test_every_layer_contract_is_kept():
    done = lint_imports(PROJECT_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(contract_ids())} kept, 0 broken." in done.stdout


# One import per contract that breaks it, planted in a copy of the packages.
PLANTED = {
    "top": ("tasks/__init__.py", "import flows.answer\n"),
    "no-prefect": ("hifirag_core/text.py", "import prefect\n"),
    "core-layers": ("hifirag_core/retrieval/fusion.py", "from hifirag_core.pipeline import output\n"),
}


def test_each_contract_has_a_planted_violation():
    assert sorted(PLANTED) == sorted(contract_ids())


@pytest.mark.parametrize("contract", sorted(PLANTED))
def test_a_planted_violation_breaks_its_contract(tmp_path, contract):
    """The contracts can fail: each one, on a copy of the code with one import that crosses its layers."""
    for top in ("hifirag_core", "flows", "tasks"):
        shutil.copytree(PROJECT_ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert lint_imports(tmp_path, contract).returncode == 0  # the copy keeps it, as the checkout does
    module, line = PLANTED[contract]
    with (tmp_path / module).open("a") as f:
        f.write(line)
    done = lint_imports(tmp_path, contract)
    assert done.returncode == 1 and "1 broken" in done.stdout, done.stdout + done.stderr


def test_the_cycle_check_finds_a_cycle_made_only_for_the_type_checker(tmp_path, monkeypatch):
    """The checks above can fail: a package whose two modules import each other, one of them only under
    TYPE_CHECKING, is a knot of two."""
    pkg = tmp_path / "knotted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from knotted.b import B\n\nclass A: ...\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from knotted.a import A\n\n"
                              "class B: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    knotted = grimp.build_graph("knotted", exclude_type_checking_imports=False, cache_dir=None)
    assert strongly_connected(import_edges(knotted, "knotted")) == [{"knotted.a", "knotted.b"}]


# --- private names ---------------------------------------------------------------------------------------


def private_imports_across_packages(root: Path, folders: tuple[str, ...]) -> list[str]:
    """``from pkg.mod import _name`` where the importing module does not live in ``pkg`` itself."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            here = module.rsplit(".", 1)[0]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                source_package = node.module.rsplit(".", 1)[0] if "." in node.module else node.module
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__") and source_package != here:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_no_private_name_is_imported_across_packages():
    assert private_imports_across_packages(PROJECT_ROOT, ("hifirag_core", "flows", "tasks", "bench", "tools")) == []


def test_the_private_name_check_finds_one(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "parse.py").write_text("def _lenient(): ...\n")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "use.py").write_text("from one.parse import _lenient\n")
    (tmp_path / "one" / "sibling.py").write_text("from one.parse import _lenient\n")  # same package: fine
    assert private_imports_across_packages(tmp_path, ("one", "two")) == ["two/use.py:1: one.parse._lenient"]
