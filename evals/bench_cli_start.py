"""Benchmark: how long ``hermes --help`` takes, before and after the command line stopped
importing the runtime at start (issue 19, item 1), in the same run.

``before`` is the source tree of a git revision (default ``ca84d55``, the last commit whose
CLI imported the graph, the model client, the checkpointer and the memory service at start),
extracted with ``git archive`` into a temporary directory; ``after`` is this checkout. Both run
with this venv's interpreter (the tree first on ``PYTHONPATH``), interleaved run by run, as a
new process each: ``from graph.cli import app; app()`` with ``--help`` — what the ``hermes``
script does, with bytecode cached as a user's Python caches it (in a temporary
``PYTHONPYCACHEPREFIX``). The wall time of the whole process is measured; the 1-minute load average is
recorded beside every run (the machine is shared: read the ratio within the run). Also one
``python -X importtime -c "import graph.cli"`` per side (the import's own cumulative time).

    python -m evals.bench_cli_start [--runs 7] [--before REV]

Prints a table and writes ``evals/out/cli_start.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "out" / "cli_start.json"
HELP = "import sys; from graph.cli import app; sys.argv[0] = 'hermes'; app()"


def _env(tree: Path, pycache: Path) -> dict[str, str]:
    # bytecode cached as a user's Python does (these machines set PYTHONDONTWRITEBYTECODE,
    # which recompiles every module of the project on every start), outside the trees
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "80", "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def help_run(tree: Path, pycache: Path) -> dict[str, float]:
    """One ``hermes --help`` process on ``tree``: wall seconds and the load average before it."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", HELP, "--help"], cwd=tree, env=_env(tree, pycache), check=True, stdout=subprocess.DEVNULL
    )
    return {"s": time.perf_counter() - t0, "load": load}


def import_time(tree: Path, pycache: Path) -> float:
    """Seconds ``import graph.cli`` took by ``python -X importtime`` (cumulative, own line)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import graph.cli"],
        cwd=tree,
        env=_env(tree, pycache),
        check=True,
        capture_output=True,
        text=True,
    )
    match = re.search(r"^import time:\s*\d+ \|\s*(\d+) \| graph\.cli$", proc.stderr, re.MULTILINE)
    if match is None:
        raise ValueError("no graph.cli line in the importtime output")
    return int(match.group(1)) / 1e6


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    times = [r["s"] for r in runs]
    loads = [r["load"] for r in runs]
    return {
        "min_s": min(times),
        "median_s": statistics.median(times),
        "max_s": max(times),
        "load_min": min(loads),
        "load_max": max(loads),
        "runs": len(runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per side (≥ 5)")
    parser.add_argument("--before", default="ca84d55", help="git revision of the 'before' tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermes-before-") as tmp:
        before = Path(tmp)
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        pycache = before.parent / f"{before.name}-pycache"
        trees = {"before": before, "after": ROOT}
        for tree in trees.values():  # fill the bytecode caches of both trees
            help_run(tree, pycache)
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.runs):
            for side, tree in trees.items():
                runs[side].append(help_run(tree, pycache))
        imports = {side: import_time(tree, pycache) for side, tree in trees.items()}
        shutil.rmtree(pycache, ignore_errors=True)
    result: dict[str, Any] = {
        side: {**summary(r), "import_graph_cli_s": imports[side], "all": r} for side, r in runs.items()
    }
    result["ratio_of_medians"] = result["before"]["median_s"] / result["after"]["median_s"]
    result["before_rev"] = args.before
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print("side    min s  median s  max s  load (1 min)  import graph.cli s")
    for side in ("before", "after"):
        r = result[side]
        print(
            f"{side:6}  {r['min_s']:5.2f}  {r['median_s']:8.2f}  {r['max_s']:5.2f}  "
            f"{r['load_min']:.1f}–{r['load_max']:.1f}      {r['import_graph_cli_s']:.2f}"
        )
    print(f"before / after (medians): {result['ratio_of_medians']:.1f}×  ({args.runs} runs each, interleaved)")


if __name__ == "__main__":
    main()
