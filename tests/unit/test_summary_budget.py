"""Stage 3 of the result pipeline (a model summary of long unstructured text) has its own time
and token budget; past it the rule summary — a truncated excerpt — stands and says so."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from graph.context import Context
from graph.model import register_model
from nodes.compress_results import model_summary
from tools.results import compress

LONG_TEXT = "The quarterly figures were discussed at length. " * 400


class SlowSummariser(BaseChatModel):
    """Answers after ``delay_s``; records the ``max_tokens`` each call was given."""

    delay_s: float = 0.0
    seen_max_tokens: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "slow-summariser"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.seen_max_tokens.append(kw.get("max_tokens"))
        await asyncio.sleep(self.delay_s)
        return ChatResult(generations=[ChatGeneration(message=AIMessage("Figures were discussed."))])


def context_with(model: SlowSummariser, tmp_path, **settings: Any) -> Context:
    name = f"summariser-{uuid.uuid4().hex[:6]}"
    register_model(name, lambda _ctx: model)
    return Context(model=name, data_dir=str(tmp_path), **settings)


async def test_a_summary_within_its_budget_is_used_with_its_token_cap(tmp_path):
    model = SlowSummariser(seen_max_tokens=[])
    summary, note = await model_summary(context_with(model, tmp_path, summary_max_tokens=64), "report", LONG_TEXT)
    assert summary == "Figures were discussed." and note is None
    assert model.seen_max_tokens == [64]


async def test_a_summary_past_its_time_budget_falls_back_to_the_excerpt_with_a_note(tmp_path):
    model = SlowSummariser(delay_s=5.0, seen_max_tokens=[])
    context = context_with(model, tmp_path, summary_timeout_s=0.2)
    summary, note = await model_summary(context, "report", LONG_TEXT)
    assert summary is None and "took over 0.2 s" in note and "truncated excerpt" in note
    envelope = compress("fetch_page", LONG_TEXT, summary=summary, summary_note=note)
    assert envelope["summary"].startswith("fetch_page: The quarterly figures") and "…" in envelope["summary"]
    assert note in envelope["notes"]
