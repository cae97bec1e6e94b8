"""The agent graph of Hermes Agent: state, config, wiring, model, sessions (DESIGN "The graph").

    state.py      the workbench state          context.py   runtime config (Studio-editable)
    builder.py    the only wiring              model.py     endpoint + embedded llama.cpp
    progress.py   goal-progress rules          failures.py  failure classes and recoveries
    branches.py   rollback / fork / switch     mirror.py    plain-text dual write
    recovery.py   rebuild from the mirror      resources.py toolbox and memory per process
    cli.py        the ``hermes`` command
"""
