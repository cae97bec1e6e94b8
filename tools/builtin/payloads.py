"""``read_result``: page through a tool result that was cut before it entered the prompt
(seed §2.3, case K2). The full payload stays on disk under ``data_dir/payloads``; the bounded
envelope the model saw carries its ``handle`` (a path relative to ``data_dir``). Runs inside
the executor's worker process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TEXT_PAGE_CHARS = 2000
MAX_LIMIT = 50


def _largest_list(value: Any) -> tuple[str | None, list[Any] | None]:
    if isinstance(value, list):
        return None, value
    if isinstance(value, dict):
        best: tuple[str | None, list[Any] | None] = (None, None)
        for key, item in value.items():
            if isinstance(item, list) and (best[1] is None or len(item) > len(best[1])):
                best = (key, item)
        return best
    return None, None


def read_result(handle: str, offset: int = 0, limit: int = 20, *, data_dir: Path) -> dict[str, Any]:
    """Items ``offset`` to ``offset + limit`` of the result's largest list (rows, items), with
    its ``total``; for a text result, page ``offset`` of ``TEXT_PAGE_CHARS`` characters.
    Raises ValueError for a handle outside ``data_dir/payloads`` or a missing payload."""
    root = (Path(data_dir) / "payloads").resolve()
    path = (Path(data_dir) / handle).resolve()
    if root not in path.parents:
        raise ValueError(f"handle {handle!r} is not a result handle (expected payloads/...)")
    if not path.is_file():
        raise ValueError(f"no stored result at {handle!r} (it may have been cleaned up)")
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        raise ValueError(f"offset must be >= 0 and limit 1-{MAX_LIMIT}")
    data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    if isinstance(data, str):
        pages = max(1, -(-len(data) // TEXT_PAGE_CHARS))
        return {
            "handle": handle,
            "page": offset,
            "pages": pages,
            "total_chars": len(data),
            "text": data[offset * TEXT_PAGE_CHARS : (offset + 1) * TEXT_PAGE_CHARS],
        }
    key, items = _largest_list(data)
    if items is None:
        return {"handle": handle, "data": data}
    out: dict[str, Any] = {
        "handle": handle,
        "offset": offset,
        "limit": limit,
        "total": len(items),
        "items": items[offset : offset + limit],
    }
    if key is not None:
        out["field"] = key
        out.update({k: v for k, v in data.items() if not isinstance(v, (list, dict))})
    return out
