"""The import rules of docs/DESIGN.md §7.2 that import-linter's contracts do not state: no
import cycle between files, every module of ``graph/`` placed in a layer of the layers
contract (so a new module cannot slip past the rules), and no module over :data:`MAX_LINES`
lines. The contracts themselves run as ``lint-imports`` in scripts/test.sh; here they are also
checked in-process."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("graph", "nodes", "tools", "memory", "base")
#: docs/DESIGN.md §7.2 rule 6: a module longer than this holds more than one concern.
MAX_LINES = 500


@pytest.fixture(scope="module")
def imports() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)


def layer_contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["type"] == "layers")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_between_files(imports):
    assert cycles(imports) == []


def test_the_cycle_search_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert cycles(graph) == [["a.x", "a.y"]]


def test_every_graph_module_is_in_a_layer(imports):
    layered = {m.strip() for layer in layer_contract()["layers"] for m in layer.replace("|", ":").split(":")}
    unplaced = []
    for module in sorted(imports.modules):
        if module == "graph" or not module.startswith("graph."):
            continue
        parts = module.split(".")
        if not any(".".join(parts[:n]) in layered for n in range(2, len(parts) + 1)):
            unplaced.append(module)
    assert unplaced == [], f"add these modules to a layer of [tool.importlinter] (docs/DESIGN.md §7.1): {unplaced}"


def test_the_import_contracts_are_kept():
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()  # what the lint-imports command does first
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)


def test_no_module_is_over_max_lines():
    """Product code and the evals (their generated outputs aside): split a longer module by
    concern, with names that say what each part holds."""
    files = [f for package in (*PACKAGES, "evals") for f in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 100  # the scan works
    long = {}
    for file in files:
        rel = file.relative_to(ROOT).as_posix()
        if not rel.startswith(("evals/out/", "evals/reports/")):
            lines = len(file.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                long[rel] = lines
    assert long == {}, f"over {MAX_LINES} lines (split by concern): {long}"
