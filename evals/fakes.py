"""Deterministic stand-ins shared by benchmarks: a chat model that calls one tool, then answers.

Benchmarks measure framework overhead, so the model must cost the same in every arm.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class OneToolThenAnswer(BaseChatModel):
    """Calls ``tool_name`` when the last message is not a tool result; answers otherwise."""

    tool_name: str = "lookup"
    counter: int = 0

    @property
    def _llm_type(self) -> str:
        return "one-tool-then-answer"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OneToolThenAnswer:
        return self

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.counter += 1
        if messages and isinstance(messages[-1], ToolMessage):
            reply = AIMessage(
                content="The value is " + str(messages[-1].content)[:40],
                usage_metadata={"input_tokens": 50, "output_tokens": 8, "total_tokens": 58},
            )
        else:
            reply = AIMessage(
                content="",
                tool_calls=[
                    {
                        "type": "tool_call",
                        "name": self.tool_name,
                        "args": {"key": f"k{self.counter}"},
                        "id": f"call_{self.counter}",
                    }
                ],
                usage_metadata={"input_tokens": 50, "output_tokens": 12, "total_tokens": 62},
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])
