"""Benchmark: the context window over a scripted long session — now the ``sessions`` suite.

Needle recall at **equal prompt tokens** (Hermes's ``assemble_context`` node with memories,
archive and migration notes vs ``trim_messages(strategy="last")`` cut to the same token count
vs append-all), literal and paraphrased questions. The earlier form of this benchmark called
``graph.window.select_window`` directly and compared the budget with the naive size ("8 % of
naive"), which any trimming at that budget also achieves; see ``evals/suites/sessions.py``.

    python -m evals.bench_context_window [--turns 200] [--out DIR]
    # the same as
    python -m evals sessions [--limit 200] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from evals.harness import EvalConfig, default_out, run_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cfg = EvalConfig(suite="sessions", limit=args.turns, seed=args.seed, out=args.out or default_out("sessions"))
    report = asyncio.run(run_suite(cfg))
    print(f"report: {report.out / 'report.md'}")
    for name, value in report.summary.items():
        print(f"  {name}: {value}")


if __name__ == "__main__":
    main()
