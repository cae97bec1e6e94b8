"""``EndpointChat``: the chat model of an OpenAI-compatible endpoint (``graph.model.load_chat_model``
builds it when ``context.model`` is not embedded). Its own module so that importing
``graph.model`` (the graph and the CLI do) does not import langchain-openai and openai (~2 s):
they load with the first endpoint model built."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI

from graph.model import normalise_tool_call_chunks


def _normalised(generation: ChatGenerationChunk, seen: dict[Any, tuple[str | None, int]]) -> ChatGenerationChunk:
    message = generation.message
    if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
        fixed = normalise_tool_call_chunks(seen, message.tool_call_chunks)
        generation = ChatGenerationChunk(
            message=message.model_copy(update={"tool_call_chunks": fixed}), generation_info=generation.generation_info
        )
    return generation


class EndpointChat(ChatOpenAI):
    """``ChatOpenAI`` for an OpenAI-compatible endpoint whose streamed tool-call chunks go
    through :func:`normalise_tool_call_chunks` (so calls merge by id, whatever the provider
    does with ``index``). Otherwise exactly ``ChatOpenAI`` (what ``init_chat_model`` with
    provider ``openai`` builds)."""

    def _stream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        # run_manager stays here: BaseChatModel reports the normalised chunks to callbacks
        seen: dict[Any, tuple[str | None, int]] = {}
        for generation in super()._stream(messages, stop=stop, **kwargs):
            yield _normalised(generation, seen)

    async def _astream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        seen: dict[Any, tuple[str | None, int]] = {}
        async for generation in super()._astream(messages, stop=stop, **kwargs):
            yield _normalised(generation, seen)
