"""Benchmark: the first model call of a new ``hermes run`` process, with and without the KV cache
the previous process saved (issue 19; ``graph/embedded/server.py``).

A pair = two ``hermes run`` processes with the same task, the same generated demo database and
empty memory, each in a new data directory — so both send the same first prompt (system turn,
tool list, request):

    cold   nothing saved: llama.cpp evaluates the whole prompt
    warm   the data directory starts with the ``kv-cache/`` the cold run saved when it stopped

The first call's time is what the embedded llama.cpp server logged for its first task
(``<data_dir>/embedded-llm.log``: "prompt eval time" + "eval time" of task 0), so process
start-up and the rest of the run do not count. Runs stop after one tool round
(``--max-tool-rounds 1``). The load average is recorded beside every run (the machine is
shared; the ratio within a pair is the figure to read).

    python -m evals.bench_first_call [--pairs 5] [--model embedded]

Prints a table and writes ``evals/out/first_call.json``.
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
OUT = Path(__file__).parent / "out" / "first_call.json"
TASK = "Summarise last month's sales into an analysis report, post it to the project group, and remind me every month."
_PROMPT = re.compile(r"task (\d+) \| prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"task (\d+) \|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def first_call(log: Path) -> dict[str, float]:
    """The first task's timings in a llama.cpp server log: seconds of prompt evaluation and of
    generation, and the prompt tokens it had to evaluate. Raises ``ValueError`` when the log
    has none (the run made no model call)."""
    text = log.read_text(errors="replace")
    prompt, generation = _PROMPT.search(text), _EVAL.search(text)
    if prompt is None or generation is None:
        raise ValueError(f"no model call timings in {log}")
    return {
        "prompt_s": float(prompt.group(2)) / 1000,
        "prompt_tokens": int(prompt.group(3)),
        "generate_s": float(generation.group(2)) / 1000,
        "first_call_s": (float(prompt.group(2)) + float(generation.group(2))) / 1000,
    }


def hermes_run(data_dir: Path, database: Path, model: str) -> dict[str, float]:
    """One ``hermes run`` of :data:`TASK` in ``data_dir``; its first call's timings and the load."""
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data_dir),
        "HERMES_DATABASE": str(database),
        "HERMES_MODEL": model,
        "LANGSMITH_TRACING": "false",
    }
    load = os.getloadavg()[0]
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "graph.cli", "run", TASK, "--max-tool-rounds", "1", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=3600,
        check=False,
    )
    return {**first_call(data_dir / "embedded-llm.log"), "run_s": time.monotonic() - started, "load": load}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hermes-first-call-") as tmp:
        work = Path(tmp)
        database = work / "sales.db"
        subprocess.run([sys.executable, "-m", "tools.builtin.demo_db", str(database)], cwd=ROOT, check=True)
        for pair in range(args.pairs):
            cold_dir, warm_dir = work / f"cold-{pair}", work / f"warm-{pair}"
            cold = hermes_run(cold_dir, database, args.model)
            saved = cold_dir / "kv-cache"
            if not any(saved.glob("*.bin")):
                print(f"pair {pair}: the cold run saved no KV cache", file=sys.stderr)
                return 1
            shutil.copytree(saved, warm_dir / "kv-cache")
            warm = hermes_run(warm_dir, database, args.model)
            rows.append(
                {"pair": pair, "cold": cold, "warm": warm, "speedup": cold["first_call_s"] / warm["first_call_s"]}
            )
            print(
                f"pair {pair}: cold {cold['first_call_s']:.1f} s ({cold['prompt_tokens']} prompt tokens, load "
                f"{cold['load']:.1f}) / warm {warm['first_call_s']:.1f} s ({warm['prompt_tokens']} tokens, load "
                f"{warm['load']:.1f}) = {rows[-1]['speedup']:.1f}x",
                flush=True,
            )
    speedups = [r["speedup"] for r in rows]
    summary = {
        "model": args.model,
        "task": TASK,
        "pairs": rows,
        "speedup_min": min(speedups),
        "speedup_median": statistics.median(speedups),
        "speedup_max": max(speedups),
        "cold_s": [r["cold"]["first_call_s"] for r in rows],
        "warm_s": [r["warm"]["first_call_s"] for r in rows],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=2))
    print(
        f"first call, {len(rows)} pairs: cold median {statistics.median(summary['cold_s']):.1f} s, warm median "
        f"{statistics.median(summary['warm_s']):.1f} s; speedup min/median/max "
        f"{summary['speedup_min']:.1f}/{summary['speedup_median']:.1f}/{summary['speedup_max']:.1f}x → {OUT}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
