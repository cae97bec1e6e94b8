"""Tool calling and MCP for Hermes Agent (DESIGN §2, §3). Knows nothing of the graph.

spec.py            ToolSpec, lint, timeouts 10 s / 30 s
schema_normalization.py  normalize_schema: one schema every provider accepts (K6)
registry.py        ToolRegistry (K5 duplicates refused), ToolOutcome; call() never raises (K3/K4/K7/K8)
errors.py          ToolDefinitionError, DuplicateToolError, ToolTimeout, ToolFailed, ToolTransportError
idempotency.py     SQLite ledger: a repeated request_id returns the recorded result (seed §2.2)
schema_versions.py tool schema versions and change rules (seed §6.3)
results.py         the three-stage result pipeline and the envelope schema (seed §2.3, K2)
selection.py       rank tools by relevance to a request (BM25 over name and description)
procs.py           process-tree control with psutil (SIGTERM, grace, SIGKILL)
executors/         one Executor interface: subprocess (default), container (bubblewrap/docker/podman), remote
remote_server.py   reference remote function server for the remote executor
builtin/           builtin tools: the user's database (describe/query), reports, reminders, read_result
mcp/               config (mcpServers), client (persistent session per server), servers/team_chat
toolbox.py         Toolbox.open(data_dir, mcp_config, timeout_s, executor=...) → registry of builtin + MCP tools
"""
