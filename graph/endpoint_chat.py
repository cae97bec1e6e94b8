"""``EndpointChat``: the chat model of an OpenAI-compatible endpoint (``graph.model.load_chat_model``
builds it when ``context.model`` is not embedded). Its own module so that importing
``graph.model`` (the graph and the CLI do) does not import langchain-openai and openai (~2 s):
they load with the first endpoint model built."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.tool import ToolCallChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI


def normalise_tool_call_chunks(
    seen: dict[Any, tuple[str | None, int]], chunks: list[ToolCallChunk]
) -> list[ToolCallChunk]:
    """``chunks`` (one streamed message chunk's ``tool_call_chunks``) with indexes that merge
    into one call per call id. ``seen`` maps a provider's index to ``(call id, our index)`` and
    is kept across the chunks of one stream. A chunk whose id differs from the id seen at its
    index starts a new call (a new index, after all used so far); a chunk without id, or with
    the same id, continues the last call at its index. Some OpenAI-compatible providers reuse
    index 0 for every call, others omit ids after the first chunk (or throughout)."""
    out: list[ToolCallChunk] = []
    for chunk in chunks:
        index, cid = chunk.get("index"), chunk.get("id")
        known = seen.get(index)
        if known is None or (cid and known[0] and cid != known[0]):
            ours = max((i for _, i in seen.values()), default=-1) + 1
            seen[index] = (cid, ours)
        else:
            ours = known[1]
            if cid and not known[0]:
                seen[index] = (cid, ours)
        out.append({**chunk, "index": ours})
    return out


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
