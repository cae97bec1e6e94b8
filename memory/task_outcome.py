"""The "task completed" write trigger (seed §4.2; DESIGN §4.4): whether a finished turn is a
task memory, judged on the evidence the runtime observed (``TurnEvidence``), never the model's
word alone — answer defects, claimed effects, grounding in the tool results, and the verdict
``assess_task``.

Everything here is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory.triggers import split_sentences

# --- the "task completed" trigger: evidence, not the model's word (DESIGN §4.4) ------------

#: Weight of each kind of evidence that a task completed; combined by noisy-OR
#: (``1 - Π(1 - w)``), so independent evidence adds up and no single weak sign reaches the
#: threshold. All are observations of the runtime recorded in the graph state.
EVIDENCE_WEIGHTS: dict[str, float] = {
    #: every tool step the request asked for has a successful result (``graph.progress``)
    "steps_done": 0.75,
    #: at least one tool returned a successful result for this goal
    "tool_results": 0.4,
    #: successful calls produced artifacts (paths, URLs, ids: each tool's ``artifact_field``)
    "artifacts": 0.3,
    #: the final answer quotes something only the tool results contained (a number, a word)
    "answer_grounded": 0.4,
}
#: A task that stopped early (``stop_reason``) with some tool step done: recorded as stopped,
#: at this confidence (what was done is observed; that the task is unfinished is too).
TASK_STOPPED_CONFIDENCE: float = 0.7


@dataclass(frozen=True)
class TurnEvidence:
    """What the runtime observed of a turn's outcome, filled by the ``write_memory`` node
    from the graph state (nothing here names a tool: names come from the tools' metadata).

    Fields (tuples of tool names unless said otherwise):
        required_steps     tools the request asked for (``graph.progress.required_steps``)
        steps_done         of those, the ones with a successful result for this goal
        tools_succeeded    every tool with a successful result for this goal
        side_effects_done  side-effect tools (``ToolSpec.side_effect``) that succeeded
        artifacts          what successful calls produced (``State.artifacts``: paths, URLs, ids)
        result_texts       the successful results' contents (for the grounding check)
        verified           the runtime's check of the answer against this goal's results
                           (DESIGN §5.5): True (grounded, every figure and "none" supported),
                           False (refuted or unsupported), None (not checked: no such check
                           ran — callers without a graph)
        rests_on_data      the check had a data read of the goal to go on (``ToolSpec.reads``)
        unverified         what the check found unsupported ("the figure 1,234 …"), in words
        unbacked_claims    sentences of the answer claiming an effect that no successful
                           side-effect call of the goal shows done
        refs               the evidence the answer rests on: ``tool#call id`` with the request id
                           and payload handle where known (shown by ``hermes memory list``)
        tool_versions      ``(tool, schema version)`` of the tools used, as the caller names
                           versions (a hash of the parameters): a memory of a tool that changed
                           since is recalled marked so (``memory.retrieval``)
    """

    required_steps: tuple[str, ...] = ()
    steps_done: tuple[str, ...] = ()
    tools_succeeded: tuple[str, ...] = ()
    side_effects_done: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    result_texts: tuple[str, ...] = ()
    verified: bool | None = None
    rests_on_data: bool = False
    unverified: tuple[str, ...] = ()
    unbacked_claims: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    tool_versions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_tools(cls, tools_used: Sequence[str] | None) -> TurnEvidence:
        """Evidence known from the names of the tools that succeeded only (no steps, no
        results): callers that have no graph state."""
        return cls(tools_succeeded=tuple(dict.fromkeys(tools_used or ())))


@dataclass
class TaskAssessment:
    """``assess_task``'s verdict. ``outcome``: "completed" | "stopped" | ``None`` (no task
    memory); ``confidence`` in [0, 1] from the evidence; ``evidence``: the reasons, in words;
    ``defects``: what is wrong with the answer ("" kinds, see ``answer_defects``);
    ``keep_answer``: the answer is worth quoting in the memory."""

    outcome: str | None
    confidence: float
    evidence: list[str] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)
    keep_answer: bool = False


_CONTROL_TOKENS = re.compile(
    r"<\|[\w-]+\|>|</?s>|\[/?INST\]|<think>|\{\s*\"(?:tool_call|response|name)\"\s*:", re.IGNORECASE
)
_INABILITY = re.compile(
    r"\bI\s+(?:can(?:no|')t|cannot)\s+(?:help|do|access|complete|find|perform|answer|provide)\b"
    r"|\bI(?:'m|\s+am)\s+(?:not\s+able|unable)\s+to\b|\bI\s+(?:do\s+not|don't)\s+(?:have\s+access|know)\b"
    r"|\bas\s+an\s+AI\b|\b(?:sorry|unfortunately|apologi[sz]e)\b"
    r"|无法|不能(?:完成|访问|回答|执行)|抱歉|对不起|不知道|できません|申し訳",
    re.IGNORECASE,
)
#: An answer that claims a side effect happened ("I posted it", "Report saved to ...", 已发送).
_EFFECT_VERBS = (
    r"(?:posted|sent|saved|created|scheduled|generated|written|exported|uploaded|emailed|shared|"
    r"published|booked|deleted|stored|filed|set\s+up)"
)
_CLAIMS_EFFECT = re.compile(
    r"\b(?:I(?:'ve|\s+have)?|we(?:'ve|\s+have)?|has\s+been|have\s+been|was|were|successfully|just)\s+(?:\w+\s+){0,2}?"
    + _EFFECT_VERBS
    + r"\b"
    r"|(?:^|[.!?]\s+)(?:the\s+|your\s+)?[^\W\d_]+(?:\s+[^\W\d_]+)?\s+" + _EFFECT_VERBS + r"\b"
    r"|已(?:经)?(?:[将把].{0,16}?)?(?:发送|保存|生成|创建|设置|发布|发到|提交|安排)|(?:发送|保存|生成|创建|发布)(?:了|成功)",
    re.IGNORECASE,
)
# other languages of the intent rules' neighbours: "j'ai publié", "he enviado", "ich habe ... gesendet",
# 送信しました (DESIGN §5.5: claimed effects)
_CLAIMS_EFFECT_OTHER = re.compile(
    r"\bj'ai\s+(?:\w+\s+){0,2}?(?:publié|envoyé|créé|programmé|enregistré|partagé|généré|posté)\b"
    r"|\b(?:he|hemos)\s+(?:\w+\s+){0,2}?(?:publicado|enviado|creado|programado|guardado|compartido|generado)\b"
    r"|\b(?:ich\s+habe|wir\s+haben|wurde|wurden)\b.{0,60}?\b(?:gepostet|gesendet|geschickt|erstellt|geplant|gespeichert|"
    r"geteilt|veröffentlicht|eingerichtet)\b"
    r"|(?:送信|投稿|作成|設定|保存|共有|予約)(?:しました|済み|完了)",
    re.IGNORECASE,
)
# a negated or future claim claims nothing: "I have not posted", "I will post", 没有发送, 未发送
_NOT_A_CLAIM = re.compile(
    r"\b(?:not|never|n't|will|going\s+to|shall|can|could|would|should|ne\s+\w+\s+pas|no\s+he|nicht|noch\s+nicht)\b"
    r"|没有|没|未|即将|将会|将要|打算|准备|まだ|していません",
    re.IGNORECASE,
)


def effect_claims(answer: str) -> list[str]:
    """The sentences of ``answer`` that claim an effect happened ("I have posted the report to
    #finance", "Report saved to …", "The reminder has been scheduled", 已发送到群, "j'ai publié …",
    送信しました); negated or future sentences ("I have not posted", "I will now post") claim
    nothing. Generic language rules: which tool a claim is about is the caller's business (the
    tools' metadata). Shape: ``str -> list[str]``; never raises."""
    out: list[str] = []
    for sentence in split_sentences(answer or ""):
        m = _CLAIMS_EFFECT.search(sentence) or _CLAIMS_EFFECT_OTHER.search(sentence)
        # negated or future where the claim is made ("I have not posted"), not anywhere in the
        # sentence ("I have posted it so you can see it")
        if m is None or _NOT_A_CLAIM.search(sentence[max(0, m.start() - 30) : m.end()]):
            continue
        out.append(sentence)
    return out


_NUMBER = re.compile(r"\d[\d,.]*\d|\d")
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_CJK_PAIR = re.compile(r"(?=([\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]{2}))")
#: Keys of the tool-result envelope (``tools.results``): not content.
_ENVELOPE_WORDS = frozenset(
    {
        "status",
        "summary",
        "data",
        "error",
        "handle",
        "truncated",
        "total",
        "rows",
        "true",
        "false",
        "null",
        "none",
        "result",
        "results",
        "ok",
    }
)


def _tokens(text: str) -> set[str]:
    text = (text or "").casefold()
    nums = {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}
    return nums | set(_WORD.findall(text)) | set(_CJK_PAIR.findall(text))


def answer_defects(answer: str, goal: str = "") -> list[str]:
    """What makes ``answer`` no evidence of a done task (generic: no task or tool knowledge).

    Kinds: ``empty``; ``no_words`` (no letter or digit); ``control_tokens`` (leaked template
    or tool-call syntax: ``<|im_end|>``, ``{"tool_call": ...``); ``repetition`` (a long answer
    made of few distinct words, or one phrase repeated); ``echo`` (the request repeated back);
    ``inability`` (an apology or "I cannot ...", 无法, 抱歉). ``[]`` means none found — not
    that the answer is right. Shape: ``(str, str) -> list[str]``; never raises."""
    text = (answer or "").strip()
    if not text:
        return ["empty"]
    defects: list[str] = []
    if not re.search(r"[^\W_]", text, re.UNICODE):
        defects.append("no_words")
    if _CONTROL_TOKENS.search(text):
        defects.append("control_tokens")
    words = re.findall(r"[^\W_]+", text.casefold(), re.UNICODE)
    cjk = re.findall(r"[\u4e00-\u9fff\u3040-\u30ff\uac00-\ud7af]", text)
    units = words if len(words) >= len(cjk) else cjk
    if (len(units) >= 12 and len(set(units)) / len(units) < 0.35) or re.search(r"(.{6,}?)\1{3,}", text, re.DOTALL):
        defects.append("repetition")
    norm_answer, norm_goal = " ".join(words), " ".join(re.findall(r"[^\W_]+", (goal or "").casefold(), re.UNICODE))
    if (
        norm_goal
        and norm_answer
        and (norm_answer == norm_goal or (len(norm_answer) >= 12 and norm_answer in norm_goal))
    ):
        defects.append("echo")
    if _INABILITY.search(text):
        defects.append("inability")
    return defects


def answer_grounded(answer: str, goal: str, result_texts: Sequence[str]) -> bool:
    """True when ``answer`` quotes something only the tool results contained: a number, a
    word of 4+ letters or a CJK character pair that is in a result and not in the request
    (envelope keys such as "summary" or "status" do not count)."""
    if not answer or not result_texts:
        return False
    found = _tokens(" ".join(result_texts)) - _tokens(goal) - _ENVELOPE_WORDS
    return bool(_tokens(answer) & found)


def assess_task(goal: str, answer: str, stop_reason: str | None, evidence: TurnEvidence) -> TaskAssessment:
    """Whether a finished turn is a task memory, and at what confidence (seed §4.2 "task
    completed"; DESIGN §4.4 "verified outcomes only").

    * **completed** needs evidence in the state, never the model's word alone: every required
      step succeeded, or (a request with no required step) a tool result that the answer is
      grounded in (it quotes the result or names an artifact). A defective answer (``answer_defects``) is no evidence and is not quoted;
      an answer that claims a side effect ("posted", "saved") while none succeeded is a
      defect (``unverified_claim``). The confidence is the noisy-OR of ``EVIDENCE_WEIGHTS``
      over the evidence found, so it is as strong as what was observed.
    * **stopped** (``stop_reason`` set) is recorded only when some tool succeeded, at
      ``TASK_STOPPED_CONFIDENCE``; the stop notice is not quoted.
    * otherwise ``outcome=None``: an answer with no tool evidence (chat, a question answered
      from the model's own knowledge, nonsense) is not a task memory.
    """
    defects = answer_defects(answer, goal)
    if evidence.unbacked_claims or (
        not (evidence.side_effects_done or evidence.artifacts) and effect_claims(answer or "")
    ):
        defects.append("unverified_claim")
    if evidence.verified is False:
        defects.append("unverified_answer")
    if stop_reason is not None:
        if not evidence.tools_succeeded or evidence.verified is False:
            # an unverified answer's stop names what was unsupported: not worth recalling
            return TaskAssessment(None, 0.0, [], defects)
        done = ", ".join(evidence.tools_succeeded)
        return TaskAssessment(
            "stopped", TASK_STOPPED_CONFIDENCE, [f"stopped: {stop_reason}", f"succeeded: {done}"], defects
        )
    reasons: dict[str, str] = {}
    required = set(evidence.required_steps)
    steps_complete = bool(required) and required <= set(evidence.steps_done)
    if required and not steps_complete:
        return TaskAssessment(None, 0.0, [], defects)
    if steps_complete:
        reasons["steps_done"] = f"all {len(required)} required step(s) succeeded"
    if evidence.tools_succeeded:
        reasons["tool_results"] = f"{len(evidence.tools_succeeded)} tool(s) succeeded"
    if evidence.artifacts:
        reasons["artifacts"] = f"produced {len(evidence.artifacts)} artifact(s)"
    if not defects and (
        answer_grounded(answer, goal, evidence.result_texts)
        or any(a and a in (answer or "") for a in evidence.artifacts)
    ):
        reasons["answer_grounded"] = "the answer quotes the tool results"
    elif not defects and evidence.verified and evidence.rests_on_data:
        # "there is none" after a read that found nothing quotes nothing, and is verified
        reasons["answer_grounded"] = "the answer is verified against a data read"
    if not steps_complete and "answer_grounded" not in reasons:
        # a request with no required step: only an answer drawn from a result shows it was done
        return TaskAssessment(None, 0.0, list(reasons.values()), defects)
    if evidence.verified is False or evidence.unbacked_claims:
        # refuted or unsupported by this goal's results, or claiming an effect not done: never a
        # completed-task memory, whatever else was observed (DESIGN §4.4, §5.5)
        return TaskAssessment(None, 0.0, list(reasons.values()), defects)
    miss = 1.0
    for key in reasons:
        miss *= 1.0 - EVIDENCE_WEIGHTS[key]
    why = list(reasons.values())
    if evidence.verified:
        why.append("answer verified against this goal's results")
    if evidence.refs:
        why.append("evidence: " + "; ".join(evidence.refs[:8]))
    return TaskAssessment("completed", round(1.0 - miss, 4), why, defects, keep_answer=not defects)
