"""The agent graph of Hermes Agent (docs/DESIGN.md §7 for the layers and their import rules).

Kernel — what nodes import; imports no node and nothing of the shell:
    state.py      the workbench state          context.py   runtime settings (Studio-editable)
    progress.py   goal-progress rules          intent.py    intent tags of user turns
    history.py    tool-call pairing            window.py    the layered context window
    failures.py   failure classes              mirror.py    plain-text dual write
    resources.py  toolbox, memory per process  model.py     chat model factory (+ embedded/)
    reminder_state.py  state of the reminders graph

Shell — wiring and the application around it:
    builder.py    the only wiring (agent)      scheduler_graph.py  the reminders graph
    checkpoints.py  the SQLite saver           recovery.py  rebuild from the mirror
    branches.py   rollback / fork / switch     runner.py    one turn, outside a server
    checkpoint_reader.py  checkpoints read without the graph
    thread_lock.py, turn_observer.py, delivery_marks.py  the runner's parts
    cli/          the ``hermes`` command
"""
