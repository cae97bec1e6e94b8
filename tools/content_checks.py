"""Content a side effect delivers must carry the substance, not narrate the act (DESIGN §2.9;
issue 18 point 5). Generic: which argument is the content comes from tool metadata
(``ToolSpec.content_arg``; MCP ``_meta["hermes/content_arg"]``), what an earlier step produced
for sharing from ``ToolSpec.share_field`` — never from tool names.

Two rules, checked before a side-effect call runs (:func:`content_refusals`):

* **No narration only.** A content whose every sentence narrates an act ("I have posted the
  report to the group", "I will send…", "The report has been shared.", 我已经发布…, 投稿しました,
  "He enviado…", "J'ai publié…", "Ich habe … gepostet") and carries no figure or path tells its
  readers nothing: refused with what to write instead. A text the user gave word for word is
  never refused.
* **Shared results carry the result.** When an earlier step of the goal produced something to
  share (its result's ``share_field``: ``{"text", "must_include", "figures"}``) and the call
  sends content to a destination (:meth:`ToolSpec.destination_params` non-empty: other
  people), the content must hold every ``must_include`` item (a path counts by its file name)
  and at least two of the ``figures`` (or all, when fewer; a rounding counts). A tool whose
  content comes back to the user (a reminder's text, no destination) only gets the first rule.

The refusal lists what to include and offers the ready ``text``; for content shared with others it
also carries that text as a structured suggestion (:func:`content_suggestions`), so the graph
has the call made again with it (DESIGN §5.6).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tools.spec import ToolSpec

#: ``_meta`` keys of an MCP tool for :attr:`ToolSpec.content_arg` / :attr:`ToolSpec.share_field`.
META_CONTENT_ARG = "hermes/content_arg"
META_SHARE_FIELD = "hermes/share_field"
#: Figures a shared result's content must state at least (fewer when the result has fewer).
MIN_FIGURES = 2

_ACT = (
    r"post|send|sent|shar|publish|upload|schedul|creat|generat|set\b|setting|remind|notif|forward|deliver"
    r"|submit|prepar|writ|wrote|add|compil|summari[sz]|put|drop"
)
_NARRATION = re.compile(
    # English: I/we [have|will|'ve|'ll|am going to|just|now ...] <act>; passive "has been <act>ed"
    rf"(?:^|\b)(?:i|we)(?:'ve|'ll|'m|\s+(?:have|has|had|will|shall|am|are|just|now|also|already|successfully"
    rf"|then|going\s+to|would\s+like\s+to|want\s+to|can))*\s+(?:now\s+|just\s+|also\s+)?(?:{_ACT})"
    rf"|\b(?:has|have)\s+(?:now\s+|just\s+|also\s+)?been\s+(?:{_ACT})"
    rf"|^(?:here\s+is|here's|this\s+is)\s+(?:the|a|my|your)\b"
    # Chinese / Japanese
    r"|我们?(?:已经|已|将|会|刚刚|刚|现在|正在|要|这就)?(?:把|将)?.{0,30}?(?:发布|发送|发到|发给|分享|上传|创建|生成|设置|安排|提醒|通知|写)"
    r"|已(?:经)?(?:被)?(?:发布|发送|发到|分享|上传|生成|创建|设置)"
    r"|(?:投稿|送信|共有|作成|設定|通知|アップロード)(?:しました|します|いたしました|しておきました|済み)"
    # Spanish / French / German
    r"|\b(?:he|hemos|voy\s+a|vamos\s+a|acabo\s+de)\s+(?:publica|envia|enviad|comparti|crea|genera|programa)"
    r"|\b(?:j'ai|j’ai|nous\s+avons|je\s+vais|nous\s+allons|je\s+viens\s+d[e'])\s*(?:publi|envoy|partag|cré|génér|programm|mis)"
    r"|\b(?:ich\s+habe|wir\s+haben|ich\s+werde|wir\s+werden)\b.{0,60}?"
    r"(?:gepostet|gesendet|geschickt|geteilt|veröffentlicht|erstellt|posten|senden|teilen|veröffentlichen|erstellen)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,\u202f\u00a0']*(?:\.\d+)?")
_PATH = re.compile(r"[\w.-]+\.(?:md|csv|pdf|html|json|txt|xlsx|png)\b|https?://\S+|(?:^|\s)/\S+")


def _numbers(text: str) -> list[tuple[float, int]]:
    """``(value, decimals)`` of each number written in ``text`` (thousands separators read)."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = re.sub(r"[,\u202f\u00a0']", "", m[0])
        try:
            value = float(raw)
        except ValueError:
            continue
        out.append((value, len(raw.split(".", 1)[1]) if "." in raw else 0))
    return out


def _states(text: str, figure: float) -> bool:
    """``text`` states ``figure``, or a rounding of it (to the decimals it is written with)."""
    return any(abs(value - figure) <= 0.5 * 10**-decimals + 1e-9 for value, decimals in _numbers(text))


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


def narration_only(text: str) -> bool:
    """Every sentence of ``text`` narrates an act and none holds a figure or a path."""
    sentences = [s.strip() for s in _SENTENCE.split(text) if s and s.strip(" .!?。！？…-*_#")]
    if not sentences:
        return False
    return all(_NARRATION.search(s) and not _numbers(s) and not _PATH.search(s) for s in sentences)


def missing_substance(text: str, share: dict[str, Any]) -> list[str]:
    """What ``text`` lacks of a shared result ``share`` (``{"must_include": [str], "figures":
    [number]}``): each missing item, and the figures when fewer than MIN_FIGURES are stated."""
    missing = []
    plain = _plain(text)
    for entry in share.get("must_include") or []:
        item = str(entry)
        name = Path(item).name if "/" in item else item
        if _plain(item) not in plain and _plain(name) not in plain:
            missing.append(item)
    figures = [f for f in share.get("figures") or [] if isinstance(f, (int, float)) and not isinstance(f, bool)]
    wanted = min(MIN_FIGURES, len(figures))
    if sum(1 for f in figures if _states(text, float(f))) < wanted:
        missing.append(f"at least {wanted} of its figures ({', '.join(_shown(f) for f in figures[:6])})")
    return missing


def _shown(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else f"{value:,}"


def read_share(payload_path: Path, field: str) -> dict[str, Any] | None:
    """The ``field`` of a successful result's full payload on disk (a dict with ``text``), or None."""
    try:
        payload = json.loads(Path(payload_path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    share = payload.get(field) if isinstance(payload, dict) else None
    return share if isinstance(share, dict) and isinstance(share.get("text"), str) else None


def content_refusals(
    calls: Iterable[Mapping[str, Any]],
    *,
    spec_of: Callable[[str], ToolSpec | None],
    prior: Iterable[tuple[str, Path]],
    request: Iterable[str],
) -> dict[str, str]:
    """``{call id: error}`` of the calls whose content breaks a rule of the module doc.
    ``prior``: ``(tool name, payload path)`` of the goal's earlier successful results;
    ``request``: the user's words (a content they contain is theirs, never refused)."""
    shares = []
    for name, path in prior:
        spec = spec_of(name)
        if spec is not None and spec.share_field and (share := read_share(path, spec.share_field)):
            shares.append(share)
    words = " ".join(_plain(w) for w in request)
    refused: dict[str, str] = {}
    for call in calls:
        spec = spec_of(call["name"])
        if spec is None or not spec.side_effect or not spec.content_arg:
            continue
        args = call.get("args")
        text = args.get(spec.content_arg) if isinstance(args, dict) else None
        if not isinstance(text, str) or not text.strip() or _plain(text) in words:
            continue
        arg = spec.content_arg
        to_others = bool(spec.destination_params())
        lacking = [(s, missing) for s in shares if (missing := missing_substance(text, s))] if to_others else []
        if narration_only(text) or (shares and to_others and len(lacking) == len(shares)):
            refused[str(call["id"])] = _refusal(spec.name, arg, text, lacking or [(s, []) for s in shares], to_others)
    return refused


# words of a request that ask for an act without saying what it carries ("Set up a reminder
# for me.", "Send a message to the team.")
_NO_CONTENT = frozenset(
    "a an the to for me my us our you your it this that please can could would will should and or "
    "set setup up create make add new send sent post put share schedule remind reminder reminders message "
    "messages note notice team group channel chat everyone someone them all".split()
)


def unspecified_content(spec: ToolSpec | None, args: Any, request: Iterable[str], shares: int = 0) -> str | None:
    """The content argument of a side-effect call that the request gives nothing for, or None.
    Nothing is given when the user's words (``request``), less the act and its destination
    (the tool's own name and description, the call's destination values, words such as "send",
    "message", "team") hold no word of their own, and no earlier step produced a result to share
    (``shares``). Measured (Qwen2.5-Coder-1.5B): "Set up a reminder for me." → a reminder of
    made-up text; "Send a message to the team." → "Hello, everyone! I hope you're doing well."
    Such content is the user's to give: the caller asks for it (DESIGN §2.9)."""
    if spec is None or not spec.side_effect or not spec.content_arg or shares or not isinstance(args, dict):
        return None
    told = " ".join(
        [spec.name.replace("_", " "), spec.description, *(str(args.get(p) or "") for p in spec.destination_params())]
    )
    own = set(re.findall(r"\w+", told.casefold()))
    words = [w for text in request for w in re.findall(r"\w+", text.casefold())]
    said = [w for w in words if w not in _NO_CONTENT and w not in own and not w.isdigit()]
    return None if said else spec.content_arg


def content_suggestions(
    calls: Iterable[Mapping[str, Any]],
    refused: Mapping[str, str],
    *,
    spec_of: Callable[[str], ToolSpec | None],
    prior: Iterable[tuple[str, Path]],
) -> dict[str, dict[str, Any]]:
    """``{call id: suggestion}`` for the refused calls (``refused``, from
    :func:`content_refusals`) that share with others a result an earlier step produced: the same
    arguments with the content replaced by that result's ready ``text``, as the structured
    suggestion of DESIGN §5.6 (``{"args", "reason", "question", "allowed_by"}``). ``allowed_by``
    accepts every request: the user asked to share that result, and this is its substance.
    Measured (Qwen2.5-Coder-1.5B, the tickets flagship): told "Ready to send as text: …" in the
    error alone, the model sent the same narration three times and the run stopped."""
    shares = []
    for name, path in prior:
        spec = spec_of(name)
        if spec is not None and spec.share_field and (share := read_share(path, spec.share_field)):
            shares.append(share)
    out: dict[str, dict[str, Any]] = {}
    for call in calls:
        spec = spec_of(call["name"])
        args = call.get("args")
        if str(call["id"]) not in refused or not shares or spec is None or not spec.content_arg:
            continue
        if not spec.destination_params() or not isinstance(args, dict):
            continue
        ready = shares[-1]["text"]
        out[str(call["id"])] = {
            "args": {**args, spec.content_arg: ready},
            "reason": f"{spec.name}'s {spec.content_arg} must carry the result it shares",
            "question": f"Send the result itself instead: {ready[:200]!r}?",
            "allowed_by": [r"\S"],
        }
    return out


def _refusal(tool: str, arg: str, text: str, lacking: list[tuple[dict[str, Any], list[str]]], to_others: bool) -> str:
    quoted = text.strip()[:80] + ("…" if len(text.strip()) > 80 else "")
    if not to_others:
        return (
            f"not run: {tool}'s {arg} {quoted!r} narrates what was done; it is what the user reads later, so "
            f"state what to do then (e.g. 'Summarise the month's figures into a report and post it'), "
            "not what you did. Call it again with that text."
        )
    what = "only narrates the action" if narration_only(text) else "does not carry the result it shares"
    out = f"not run: {tool}'s {arg} {quoted!r} {what}; its readers learn nothing from it."
    if lacking:
        share, missing = lacking[-1]
        need = missing or [*(share.get("must_include") or []), f"at least {MIN_FIGURES} of its figures"]
        out += f" Send the result itself: include {'; '.join(need)}. Ready to send as {arg}: {share['text']!r}"
    else:
        out += " Send the substance itself (the figures, the period, where the full result is)."
    return out


__all__ = [
    "META_CONTENT_ARG",
    "META_SHARE_FIELD",
    "MIN_FIGURES",
    "content_refusals",
    "content_suggestions",
    "missing_substance",
    "narration_only",
    "read_share",
    "unspecified_content",
]
