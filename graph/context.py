"""Typed runtime configuration (LangGraph ``context_schema``), editable in LangGraph Studio.

Every field falls back to an environment variable ``HERMES_<FIELD>`` (upper case) when the caller
does not pass it, so the CLI, ``langgraph dev`` and tests share one source of settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields


@dataclass(kw_only=True)
class Context:
    """Runtime settings of the agent graph. Units are in the field descriptions."""

    model: str = field(
        default="embedded",
        metadata={
            "description": "Chat model name. 'embedded' starts the bundled llama.cpp server with "
            "SmolLM2-135M-Instruct on 127.0.0.1; any other value is sent as the model name to "
            "`base_url` (an OpenAI-compatible endpoint)."
        },
    )
    base_url: str = field(
        default="",
        metadata={"description": "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. "
                  "Empty with model='embedded' means the embedded server."},
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata={"description": "Name of the environment variable holding the endpoint's API key "
                  "(the key itself is never stored in state or config)."},
    )
    temperature: float = field(default=0.0, metadata={"description": "Sampling temperature."})
    max_output_tokens: int = field(
        default=384, metadata={"description": "Upper bound on tokens the model generates per call."}
    )
    token_budget: int = field(
        default=3000,
        metadata={"description": "Prompt token budget for assemble_context (approximate count, "
                  "no tokenizer download)."},
    )
    max_tool_rounds: int = field(
        default=8,
        metadata={"description": "Cap on tool rounds per goal; evaluate_progress stops the loop "
                  "with an explicit reason when it is reached."},
    )
    max_repeated_calls: int = field(
        default=2,
        metadata={"description": "How many times the same tool call (name and arguments) may be "
                  "made for one goal before the loop stops."},
    )
    max_tools: int = field(
        default=0,
        metadata={"description": "Offer at most this many tools per model call, the most relevant "
                  "to the goal and progress note (BM25 over name and description). 0 = all tools, "
                  "except for the embedded model, which gets 2 (measured: the 135M model picks "
                  "far better among 2 tools than among 6; see evals/probe_tool_calls.py)."},
    )
    tool_timeout_s: float = field(
        default=10.0, metadata={"description": "Default timeout of an ordinary tool, seconds."}
    )
    summarise_unstructured: bool = field(
        default=True,
        metadata={"description": "Summarise long unstructured tool output (e.g. a web page) with a "
                  "model call aimed at the goal (result pipeline stage 3); structured results "
                  "always get a rule summary."},
    )
    ask_user_for_missing: bool = field(
        default=True,
        metadata={"description": "When a tool call lacks required arguments, ask the user with a "
                  "LangGraph interrupt (resume with Command(resume=value)) instead of sending the "
                  "error back to the model."},
    )
    data_dir: str = field(
        default=".hermes",
        metadata={"description": "Directory for the sales database, reports, reminders, team "
                  "chat, memory and checkpoints."},
    )
    mcp_config: str = field(
        default="",
        metadata={"description": "Path to an `mcpServers` JSON file. Empty: the bundled "
                  "team-chat server only."},
    )
    database: str = field(
        default="",
        metadata={"description": "Database the data tools read: a SQLite file path or an "
                  "SQLAlchemy-style URL sqlite:///path (env HERMES_DATABASE). Empty: no database; "
                  "the data tools say how to set one."},
    )
    user_id: str = field(default="default", metadata={"description": "Memory namespace owner."})

    def __post_init__(self) -> None:
        # Fall back to HERMES_<FIELD> when a field still holds its default (react-agent pattern).
        for f in fields(self):
            if not f.init:
                continue
            env = os.environ.get(f"HERMES_{f.name.upper()}")
            if env is None or getattr(self, f.name) != f.default:
                continue
            current = f.default
            try:
                if isinstance(current, bool):
                    value: object = env.lower() in {"1", "true", "yes"}
                elif isinstance(current, int):
                    value = int(env)
                elif isinstance(current, float):
                    value = float(env)
                else:
                    value = env
            except ValueError:
                kind = type(current).__name__
                raise ValueError(f"HERMES_{f.name.upper()}={env!r} is not a valid {kind}; "
                                 f"unset it or give a {kind} (default {current!r})") from None
            setattr(self, f.name, value)
