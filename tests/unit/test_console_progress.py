"""The CLI shows a slow model call while it runs: the node's start (LangGraph "tasks" stream),
the tokens its model streamed ("messages" stream) and the elapsed time, then the finished line
with both (graph.cli.render.ConsoleObserver; graph.runner feeds it)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from graph.cli import render
from graph.cli.render import ConsoleObserver, _Elapsed


def test_a_finished_node_line_carries_its_time_and_streamed_tokens():
    observer = ConsoleObserver()
    with render.console.capture() as captured:
        observer.on_node_start("call_model")
        for _ in range(42):
            observer.on_tokens("call_model", 1)
        observer.on_tokens("some_other_node", 5)  # not running: ignored
        observer.on_update("call_model", {"messages": [AIMessage("The report is ready.")]})
    line = captured.get()
    assert "▸ call_model" in line and "42 tokens" in line and " s, " in line


def test_the_live_line_names_each_running_node_with_its_seconds_and_tokens():
    observer = ConsoleObserver()
    observer._running = {"call_model": 0.0}  # started long ago (monotonic 0)
    observer._tokens = {"call_model": 7}
    text = _Elapsed(observer._status_text).__rich__()
    assert "⋯ call_model" in text and "7 tokens" in text and " s" in text


async def test_the_runner_reports_node_starts_and_streamed_tokens(scripted, monkeypatch):
    """Through the real graph: tasks and messages streams reach the observer (the scripted fake
    does not stream, so its call reports a start and no tokens; a streaming model's chunks are
    counted by graph.runner)."""
    from graph.runner import execute_turn

    events: list[tuple[str, str]] = []

    class Recorder:
        def on_update(self, node, update):
            events.append(("update", node))

        def on_node_start(self, node):
            events.append(("start", node))

        def on_tokens(self, node, count):
            events.append(("tokens", node))

        def on_recovery(self, report):
            pass

        def on_warning(self, text):
            pass

        async def ask(self, question):
            return None

    ctx = scripted([AIMessage("Hello there.")])
    await execute_turn("hello", ctx, "t-progress", observer=Recorder())
    starts = [n for kind, n in events if kind == "start"]
    assert "call_model" in starts and starts.index("assemble_context") < starts.index("call_model")
    assert events.index(("start", "call_model")) < events.index(("update", "call_model"))


async def test_a_streaming_model_s_chunks_are_counted_for_its_node(tmp_path):
    import uuid

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    from graph.context import Context
    from graph.model import register_model
    from graph.runner import execute_turn

    name = f"streaming-{uuid.uuid4().hex[:6]}"
    register_model(name, lambda _ctx: GenericFakeChatModel(messages=iter([AIMessage("one two three four five")])))
    counts: dict[str, int] = {}

    class Counter:
        def on_update(self, node, update): ...
        def on_recovery(self, report): ...
        def on_warning(self, text): ...
        async def ask(self, question):
            return None

        def on_tokens(self, node, count):
            counts[node] = counts.get(node, 0) + count

    from graph import resources
    from tests.conftest import FakeToolbox

    context = Context(model=name, data_dir=str(tmp_path))
    resources.set_toolbox(context, FakeToolbox())
    await execute_turn("hello", context, "t-stream", observer=Counter())
    assert counts.get("call_model", 0) >= 5  # the fake streams word by word
