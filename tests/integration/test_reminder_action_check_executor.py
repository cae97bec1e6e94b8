"""A reminder's tool action is checked at schedule time through the real toolbox: the
subprocess executor's worker (Landlock-confined to the data dir) reads the registry's schema
store, so the model gets a clear error result at once for an unknown tool or arguments that do
not fit it — not a failed firing a month later — and nothing is stored."""

from __future__ import annotations

import pytest

from tools.builtin.reminders import list_reminders
from tools.toolbox import Toolbox

pytestmark = pytest.mark.slow


async def test_schedule_time_check_through_the_real_executor(tmp_path):
    tb = await Toolbox.open(tmp_path, timeout_s=20)
    try:
        assert "post_message" in tb.registry.names()
        refused = {
            "unknown": (
                {"kind": "tool", "tool": "send_email", "args": {"to": "x"}},
                "'send_email' is not a registered tool",
            ),
            "misfit": (
                {"kind": "tool", "tool": "post_message", "args": {"chanel": "project", "text": "hi"}},
                "do not fit the parameters of 'post_message'",
            ),
        }
        for name, (action, phrase) in refused.items():
            out = await tb.registry.call("schedule_reminder", {"text": f"remind {name}", "action": action}, f"r-{name}")
            assert out.status == "error" and out.error_kind == "tool_error", out
            assert phrase in out.error and "post_message" in out.error, out.error
        assert list_reminders(data_dir=tmp_path)["count"] == 0
        good = {"kind": "tool", "tool": "post_message", "args": {"channel": "project", "text": "hi"}}
        ok = await tb.registry.call("schedule_reminder", {"text": "post hi", "action": good}, "r-good")
        assert ok.status == "ok", ok.error
        assert ok.content["action"] == good
    finally:
        await tb.aclose()
