"""Tool calling and MCP for Hermes Agent (DESIGN §2, §3). Knows nothing of the graph.

    spec.py        ToolSpec, lint, normalize_schema (K6), timeouts 10 s / 30 s
    registry.py    ToolRegistry (K5 duplicates refused), ToolOutcome; call() never raises (K3/K4/K7/K8)
    errors.py      ToolDefinitionError, DuplicateToolError, ToolTimeout, ToolFailed, ToolTransportError
    procs.py       process-tree control with psutil (SIGTERM, grace, SIGKILL)
    executors/     Executor protocol; SubprocessExecutor + worker (own process group, scrubbed env)
    builtin/       flagship task tools: sales DB, query_database, generate_report, reminders
    mcp/           config (mcpServers), client (persistent session per server), servers/team_chat
    toolbox.py     Toolbox.open(data_dir, mcp_config, timeout_s) → registry of builtin + MCP tools
"""
