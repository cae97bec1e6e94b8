"""BFCL (Berkeley Function Calling Leaderboard) single-turn categories through Hermes's real ``call_model`` node, scored by BFCL's AST checker.

Data and checker: PyPI ``bfcl-eval`` 2026.3.23 (Apache-2.0), installed ``--no-deps`` by
``scripts/setup.sh`` (its own dependencies pin numpy 1.26 and pull sentence-transformers).
The data files are read from the package (``bfcl_eval/data/BFCL_v4_<category>.json`` and
``possible_answer/``); the AST checker (``bfcl_eval.eval_checker.ast_eval.ast_checker``) is
BFCL's own, imported with one stub: its module ``bfcl_eval.constants.model_config`` imports
every provider SDK only to answer "does this model's handler turn '.' into '_' in function
names"; here the names are mapped back before checking, so the stub answers "no".

Categories (BFCL v4 file names): ``simple`` = ``simple_python``, ``multiple``, ``parallel``,
``parallel_multiple``, ``irrelevance``, ``live_simple``, ``live_multiple``,
``live_irrelevance``. Each case goes through the product's path, not a benchmark harness:

1. each BFCL function becomes a :class:`tools.spec.ToolSpec` — BFCL's types mapped to JSON
   Schema with BFCL's own table (``GORILLA_TO_OPENAPI``), then :func:`tools.schema_normalization.normalize_schema`,
   registered in a :class:`tools.registry.ToolRegistry` like a third-party MCP tool
   (``strict=False``; names made snake_case as the toolbox does for MCP tools, mapped back for
   scoring) — and the registry is the toolbox the node sees (``graph.resources.set_toolbox``);
2. the state holds what ``assemble_context`` produces for a new goal: the system prompt, the
   question's messages in the window, the goal's progress note;
3. the ``call_model`` node itself runs (compiled alone in a LangGraph graph, so it has the run
   config and context it has in the agent graph): model construction (``load_chat_model``), relevance
   ranking and the embedded models' tool cap (``max_tools``), ``bind_tools``, and on the
   embedded model the JSON-Schema grammar of ``JsonToolCallingChat``;
4. the reply's tool calls are scored by BFCL's ``ast_checker``; irrelevance categories pass
   when the reply has no tool call (BFCL's rule). An endpoint that answers a case with an
   error (e.g. llama.cpp's 500 on a tool call it cannot parse) scores that case 0 with the
   error in the row; an unreachable endpoint stops the run.

The embedded models' grammar allows one tool call per reply, so a parallel case cannot pass
in one reply there; for ``parallel*`` categories the suite also runs the case *through the
loop* the graph would run: each call gets a neutral tool result and ``call_model`` runs again
(at most ``LOOP_ROUNDS`` replies) until the model answers, and the calls so collected are
scored (column ``loop``). Each row records how many functions were offered, so a pass that
the relevance cut decided (no function offered to an irrelevance question) shows apart from
one the model decided.

    python -m evals tools [--model embedded:qwen2.5-coder-0.5b | NAME --base-url URL] [--limit N] [--sample]

``--limit N``: the first N cases of each category (BFCL order); ``--sample``: 3 cases per
category (``SAMPLE_PER_CATEGORY``), chosen with ``--seed`` (with ``--limit N``: N of those).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage

from evals.harness import EvalConfig, Report

#: The EvalConfig fields this suite reads (the harness refuses the other options).
OPTIONS = frozenset({"model", "base_url", "api_key_env", "limit", "sample", "seed"})

CATEGORIES: dict[str, str] = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_irrelevance": "live_irrelevance",
}
SAMPLE_PER_CATEGORY = 3
LOOP_ROUNDS = 5  # replies per case when a parallel case runs through the loop

#: Published BFCL figures for comparison. None are stored on this machine for models of the
#: embedded models' size class (the package ships no leaderboard; the pages we could read name
#: only overall scores of ≥3B models); an endpoint run states its model's figures by hand.
LEADERBOARD_NOTE = (
    "Leaderboard: `bfcl-eval` ships no leaderboard figures and none for models of the embedded models' "
    "size (0.1-1.5B) were available offline here; the public BFCL pages read offline list only overall "
    "scores of ≥3B models (e.g. Llama 3.2 3B Instruct 67.0 % on BFCL v2, self-reported, llm-stats via "
    "wikibench.ai). Compare an endpoint run with gorilla.cs.berkeley.edu/leaderboard.html for the same model."
)


class BfclUnavailable(RuntimeError):
    """``bfcl-eval`` is not installed (``pip install --no-deps bfcl-eval==2026.3.23``)."""


def bfcl_dir() -> Path:
    """The ``bfcl_eval`` package directory. Raises :class:`BfclUnavailable`."""
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclUnavailable(
            "bfcl-eval is not installed: run `bash scripts/setup.sh` (evals) or "
            "`.venv/bin/pip install --no-deps bfcl-eval==2026.3.23`"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def ast_checker() -> Any:
    """BFCL's ``ast_checker`` function, imported without its provider SDKs (see the module
    docstring: ``model_config`` is replaced by a stub saying no handler renames functions)."""
    bfcl_dir()
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = defaultdict(lambda: types.SimpleNamespace(underscore_to_dot=False))  # type: ignore[attr-defined]
        sys.modules[name] = stub
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker as checker  # type: ignore[import-untyped]

    return checker


def load_category(category: str) -> list[dict[str, Any]]:
    """The cases of one category, each with ``ground_truth`` attached (``[]`` for irrelevance)."""
    base = bfcl_dir() / "data"
    stem = f"BFCL_v4_{CATEGORIES[category]}.json"
    cases = [json.loads(line) for line in (base / stem).read_text().splitlines() if line.strip()]
    answers_path = base / "possible_answer" / stem
    if answers_path.exists():
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, answers_path.read_text().splitlines()) if a}
        for case in cases:
            case["ground_truth"] = answers.get(case["id"], [])
    return cases


def choose(cases: list[dict[str, Any]], cfg: EvalConfig) -> list[dict[str, Any]]:
    """``--sample``: SAMPLE_PER_CATEGORY cases drawn with the seed (fewer with ``--limit``);
    ``--limit N``: the first N."""
    if cfg.sample:
        n = min(SAMPLE_PER_CATEGORY, cfg.limit or SAMPLE_PER_CATEGORY, len(cases))
        return random.Random(cfg.seed).sample(cases, n)
    return cases[: cfg.limit] if cfg.limit else cases


# -- BFCL functions → ToolSpecs ---------------------------------------------------------------


def json_schema(param: Any) -> Any:
    """A BFCL parameter schema (types ``dict``, ``float``, ``tuple``, ``any``...) as JSON Schema,
    with BFCL's own type table; unknown types become strings (as BFCL's OpenAI handler does)."""
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI  # type: ignore[import-untyped]

    if isinstance(param, list):
        return [json_schema(p) for p in param]
    if not isinstance(param, dict):
        return param
    out: dict[str, Any] = {}
    for key, value in param.items():
        if key == "type":
            out["type"] = GORILLA_TO_OPENAPI.get(value, "string") if isinstance(value, str) else value
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {k: json_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = json_schema(value)
        elif key == "optional":
            continue  # BFCL metadata, not JSON Schema
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out:
        out["properties"] = {}
    if "enum" in out and out.get("type") in ("integer", "number", "boolean"):
        out["enum"] = [v for v in out["enum"] if not isinstance(v, str)] or out.pop("enum")
    return out


def tool_name(original: str, taken: set[str]) -> str:
    """A snake_case tool name for a BFCL function name (``math.factorial`` → ``math_factorial``),
    unique among ``taken`` — the toolbox's rule for MCP tool names."""
    from tools.toolbox import snake_name

    name = snake_name(original)
    if len(name) < 3:
        name = (name + "_fn")[:64]
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name[:60]}_{n}", n + 1
    taken.add(candidate)
    return candidate


def registry_for(functions: list[dict[str, Any]]) -> tuple[Any, dict[str, str], list[str]]:
    """A ToolRegistry holding ``functions`` (read-only tools, never run), the map tool name →
    BFCL name, and the functions that could not be registered (with the reason)."""
    from tools.registry import ToolRegistry
    from tools.schema_normalization import normalize_schema
    from tools.spec import ToolSpec

    registry = ToolRegistry()
    names: dict[str, str] = {}
    refused: list[str] = []
    taken: set[str] = set()

    async def never_run(args: dict[str, Any], request_id: str) -> Any:
        return {"status": "ok"}

    for fn in functions:
        name = tool_name(fn["name"], taken)
        try:
            params = normalize_schema(json_schema(fn.get("parameters") or {}))
            params.setdefault("required", [])
            spec = ToolSpec(
                name=name,
                description=(fn.get("description") or fn["name"]).strip(),
                parameters=params,
                source="mcp:bfcl",
            )
            registry.register(spec, never_run, strict=False)
            names[name] = fn["name"]
        except Exception as exc:  # noqa: BLE001 - a definition the product refuses: the case shows it
            refused.append(f"{fn['name']}: {type(exc).__name__}: {exc}")
    return registry, names, refused


class CaseToolbox:
    """The toolbox ``call_model`` sees for one case: just the case's registry."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.problems: dict[str, str] = {}

    async def aclose(self) -> None:
        return None


# -- one case through call_model --------------------------------------------------------------


def question_messages(case: dict[str, Any]) -> list[AnyMessage]:
    """The case's first-turn messages as LangChain messages with ids (the window needs ids)."""
    out: list[AnyMessage] = []
    for i, msg in enumerate(case["question"][0]):
        cls = SystemMessage if msg["role"] == "system" else HumanMessage
        out.append(cls(str(msg["content"]), id=f"q{i}"))
    if not any(isinstance(m, HumanMessage) for m in out):
        out.append(HumanMessage("", id="q-user"))
    return out


def call_model_graph() -> Any:
    """``START → call_model → END`` compiled as LangGraph runs the node (run config, context,
    reducers); its input is a whole workbench state."""
    from langgraph.graph import END, START, StateGraph

    from graph.context import Context
    from graph.state import State
    from nodes.call_model import call_model

    builder = StateGraph(State, context_schema=Context)
    builder.add_node("call_model", call_model)
    builder.add_edge(START, "call_model")
    builder.add_edge("call_model", END)
    return builder.compile()


async def run_case(case: dict[str, Any], category: str, context: Any, loop: bool) -> dict[str, Any]:
    """One case through ``call_model`` (and, with ``loop``, again after each call); the row."""
    from dataclasses import asdict

    from graph import resources
    from graph.progress import required_steps
    from graph.state import State
    from nodes.assemble_context import build_system_prompt

    registry, names, refused = registry_for(case["function"])
    resources.set_toolbox(context, CaseToolbox(registry))  # type: ignore[arg-type]
    messages = question_messages(case)
    goal = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
    steps = sorted(required_steps(goal, registry.specs()))
    state = State(
        messages=messages,
        goal=goal,
        goal_id=str(messages[-1].id),
        system_prompt=build_system_prompt([]),
        window=[[m.id, 0] for m in messages],
        progress_note=f"Steps of this task: {', '.join(steps)}." if steps else "",
        must_call_tool=bool(steps),
    )
    graph = call_model_graph()
    start = time.perf_counter()
    first_calls: list[dict[str, Any]] = []
    loop_calls: list[dict[str, Any]] = []
    offered_counts: list[int] = []
    tokens_in = tokens_out = 0
    invalid = 0
    history = list(messages)
    window = [[m.id, 0] for m in messages]
    for round_no in range(LOOP_ROUNDS if loop else 1):
        values = await graph.ainvoke(
            {k: v for k, v in asdict(state).items() if k != "messages"} | {"messages": state.messages},
            {"configurable": {"thread_id": f"bfcl-{case['id']}"}},
            context=context,
        )
        reply: AIMessage = values["messages"][-1]
        offered_counts.append(len(values["offered_tools"]))
        tokens_in += values["metrics"].get("tokens_in", 0)
        tokens_out += values["metrics"].get("tokens_out", 0)
        invalid += len(reply.invalid_tool_calls)
        calls = [{names.get(c["name"], c["name"]): c["args"]} for c in reply.tool_calls]
        if round_no == 0:
            first_calls = calls
        seen = {json.dumps(c, sort_keys=True) for c in loop_calls}
        fresh = [c for c in calls if json.dumps(c, sort_keys=True) not in seen]
        loop_calls += fresh
        if not reply.tool_calls or len(fresh) < len(calls):
            break  # an answer, or the same call again (the graph's repeat guard would stop it): not scored twice
        reply = reply.model_copy(update={"id": f"a{round_no}"})
        results = [
            ToolMessage(
                json.dumps({"status": "ok", "note": "recorded"}),
                tool_call_id=c["id"],
                name=c["name"],
                id=f"t{round_no}-{j}",
            )
            for j, c in enumerate(reply.tool_calls)
        ]
        history += [reply, *results]
        window += [[m.id, 0] for m in (reply, *results)]
        state = State(
            messages=history,
            goal=state.goal,
            goal_id=state.goal_id,
            system_prompt=state.system_prompt,
            window=window,
            progress_note=state.progress_note,
        )
    row: dict[str, Any] = {
        "id": case["id"],
        "category": category,
        "functions": len(case["function"]),
        "offered": offered_counts[0] if offered_counts else 0,
        "refused_definitions": refused,
        "calls": first_calls,
        "invalid_calls": invalid,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "latency_s": round(time.perf_counter() - start, 2),
    }
    row["score"], row["error"] = score(case, category, first_calls)
    if loop:
        row["loop_calls"] = loop_calls
        row["loop_score"], row["loop_error"] = score(case, category, loop_calls)
    return row


def score(case: dict[str, Any], category: str, calls: list[dict[str, Any]]) -> tuple[int, str]:
    """1/0 by BFCL's rules: irrelevance passes without a call; the others by ``ast_checker``."""
    if "irrelevance" in category:
        return (1, "") if not calls else (0, "called a function on an irrelevant request")
    if not calls:
        return 0, "no function call"
    from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]

    try:
        result = ast_checker()(case["function"], calls, case["ground_truth"], Language.PYTHON, category, "hermes")
    except Exception as exc:  # noqa: BLE001 - the checker's own failure on odd output counts as a miss
        return 0, f"checker error: {type(exc).__name__}: {exc}"
    return (1, "") if result.get("valid") else (0, "; ".join(map(str, result.get("error") or [])))[:300]


# -- the suite --------------------------------------------------------------------------------


async def run(cfg: EvalConfig, report: Report) -> None:
    """Run every category (see the module docstring) and write the report."""
    from graph import resources
    from graph.context import Context
    from graph.model import ModelUnavailableError, astop_embedded_server

    ast_checker()  # fail early when bfcl-eval is missing
    plan = {cat: choose(load_category(cat), cfg) for cat in CATEGORIES}
    total = sum(map(len, plan.values()))
    with tempfile.TemporaryDirectory(prefix="hermes-bfcl-") as tmp:
        context = Context(**cfg.context_overrides(), data_dir=tmp)
        try:
            with report.progress(total, "bfcl") as advance:
                for cat, cases in plan.items():
                    for case in cases:
                        try:
                            row = await run_case(case, cat, context, loop=cat.startswith("parallel"))
                        except ModelUnavailableError:
                            raise  # nothing answers: the run cannot go on (the message says what to do)
                        except Exception as exc:  # noqa: BLE001 - the endpoint refused this reply (e.g. a 500 on a bad call)
                            row = {
                                "id": case["id"],
                                "category": cat,
                                "functions": len(case["function"]),
                                "offered": 0,
                                "refused_definitions": [],
                                "calls": [],
                                "invalid_calls": 1,
                                "tokens_in": 0,
                                "tokens_out": 0,
                                "latency_s": 0.0,
                                "score": 0,
                                "error": f"endpoint error: {type(exc).__name__}: {exc}"[:300],
                            }
                            if cat.startswith("parallel"):
                                row |= {"loop_calls": [], "loop_score": 0, "loop_error": row["error"]}
                        report.add(row)
                        advance()
        finally:
            resources._toolboxes.clear()  # the case toolboxes hold no process
            await astop_embedded_server()
    summarise(report)


def summarise(report: Report) -> None:
    """Per-category accuracy table, metrics and the plot."""
    rows = report.rows
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    table = []
    for cat in CATEGORIES:
        rs = by_cat.get(cat, [])
        if not rs:
            continue
        acc = sum(r["score"] for r in rs) / len(rs)
        loop = [r["loop_score"] for r in rs if "loop_score" in r]
        none_offered = sum(1 for r in rs if r["offered"] == 0)
        table.append(
            [
                cat,
                len(rs),
                f"{acc:.1%}",
                f"{sum(loop) / len(loop):.1%}" if loop else "–",
                none_offered,
                sum(r["invalid_calls"] > 0 for r in rs),
                round(sum(r["tokens_in"] for r in rs) / len(rs)),
                round(sum(r["latency_s"] for r in rs) / len(rs), 1),
            ]
        )
        report.metric(f"bfcl_{cat}_accuracy", round(acc, 4))
        if loop:
            report.metric(f"bfcl_{cat}_loop_accuracy", round(sum(loop) / len(loop), 4))
    if rows:
        report.metric("bfcl_overall_accuracy", round(sum(r["score"] for r in rows) / len(rows), 4))
        report.metric("cases", len(rows))
    report.table(
        "BFCL accuracy per category (AST match, one reply)",
        [
            "category",
            "cases",
            "accuracy",
            "loop (parallel)",
            "no function offered",
            "invalid calls",
            "prompt tokens/case",
            "s/case",
        ],
        table,
    )
    report.text(
        "`accuracy`: BFCL's AST match of the first reply (BFCL's single-turn protocol). `loop`: the calls "
        "of up to 5 replies, each call answered with a neutral result, as the graph's loop would run a "
        "parallel request on a model that makes one call per reply. `no function offered`: cases where "
        "relevance ranking and the tool cap offered no function, so the model could only answer — on an "
        "irrelevance question that pass is the selection's, not the model's.\n\n" + LEADERBOARD_NOTE
    )
    failures = [r for r in rows if not r["score"]][:12]
    if failures:
        report.table(
            "First failures",
            ["id", "error", "calls"],
            [[r["id"], r["error"], json.dumps(r["calls"])[:160]] for r in failures],
        )
    with report.figure("accuracy", title="BFCL accuracy per category") as (_fig, ax):
        if ax is not None and table:
            cats = [t[0] for t in table]
            accs = [by_cat_acc(by_cat[c]) for c in cats]
            ax.barh(cats, accs, color="#4477aa")
            for i, v in enumerate(accs):
                ax.text(v + 0.01, i, f"{v:.0%} (n={len(by_cat[cats[i]])})", va="center", fontsize=8)
            ax.set_xlim(0, 1.15)
            ax.set_xlabel("AST accuracy (one reply)")
            ax.invert_yaxis()


def by_cat_acc(rows: list[dict[str, Any]]) -> float:
    return sum(r["score"] for r in rows) / len(rows) if rows else 0.0
