"""Memory write policy: when to write, with what confidence, and for how long (seed §4.2, §6.4).

Source: DESIGN.md §4 / seed §4.2 ("key points force a write: task completed, the user states a
preference explicitly, a tool failed and then succeeded on retry, a cross-session reference")
and seed §6.4 ("a confidence threshold before writing; a validity period after writing:
episodic 30 days, semantic 180 days by default").

Everything here is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Records below this confidence are not written (seed §6.4 "confidence threshold before
#: writing"). The seed gives no number; 0.6 keeps every direct observation below and drops only
#: weak guesses. Unit: probability-like score in [0, 1].
MIN_CONFIDENCE: float = 0.6

#: Validity period of an episodic event, in days (seed §6.4: "episodic memory 30 days").
EPISODIC_TTL_DAYS: int = 30
#: Validity period of a semantic fact, in days (seed §6.4: "semantic memory 180 days").
SEMANTIC_TTL_DAYS: int = 180

#: Confidence given to each write trigger (seed §4.2). A task's confidence is not a constant:
#: it is derived from the evidence of its outcome (``assess_task``).
#: The user's own words stating a preference.
PREFERENCE_CONFIDENCE: float = 0.9
#: A tool that failed and then succeeded on retry, observed by the runtime.
TOOL_RECOVERY_CONFIDENCE: float = 0.9
#: The user's own words asking Hermes to remember a fact ("please remember: the code is X").
NOTE_CONFIDENCE: float = 0.9

# --- preference detection ------------------------------------------------------------------

# A sentence ends at . ! ? ; followed by space, right after a CJK stop, or at a line break.
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")

# Adverbs a first-person preference may carry ("I always prefer", "I really still like").
_ADVERBS = (
    r"(?:(?:really|much|generally|always|usually|normally|still|also|now|definitely|truly|absolutely|just|do|so)\s+)*"
)

_PREFERENCE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # English: first-person statements of taste, with any adverbs between ("I always
        # prefer", "I still really like"; "I'd like ..." is a request, not a taste).
        r"\bI(?:'d| would)?\s+" + _ADVERBS + r"prefer\b",
        r"\bmy\s+(?:preference|preferred\s+\w+)\s+is\b",
        r"\bI\s+" + _ADVERBS + r"(?:like|love|hate|dislike|adore|enjoy|detest|loathe)\b",
        r"\bI\s+" + _ADVERBS + r"(?:do\s+not|don't|never|no\s+longer|can't|cannot)\s+(?:like|want|stand)\b",
        r"\bI'?m\s+(?:not\s+)?(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into)\b",
        # English: standing instructions.
        r"^(?:please\s+|pls\s+)?(?:always|never)\s+\w",
        r"\b(?:please|pls|you\s+should|you\s+must)\s+(?:always|never)\b",
        r"\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:always|never)\b",
        r"\bplease\s+(?:use|reply|respond|answer|write|format)\b",
        r"\b(?:from\s+now\s+on|going\s+forward|from\s+here\s+on|in\s+(?:the\s+)?future)\b",
        # Chinese (seed §4.2 trigger words 喜欢 / 不要 / 以后, narrowed to their preference forms).
        r"我(?:更|比较|最|很|不|不太)?喜欢",
        r"我(?:更)?偏好",
        r"(?:以后|今后|往后)[^。！？]{0,10}?(?:都|请|每次|一律|统一|不要|别|就用|改用|用)",
        r"从现在(?:开始|起)",
        r"请(?:总是|一直|始终|永远|每次)",
        r"请不要|不要再|别再",
        r"我(?:真的|非常|很|超|特别|最|一直|都|也|还是)?(?:不|不太)?(?:爱|讨厌|厌恶|受不了)",
        # Japanese, Spanish, French, German: tastes and "from now on".
        r"(?:が|は)(?:大)?(?:好き|嫌い)|の方が(?:好き|いい)|好みです|今後は|これからは",
        r"\b(?:me\s+(?:encanta|encantan|gusta|gustan)|no\s+me\s+gusta[n]?|odio|adoro|prefiero)\b",
        r"\b(?:a\s+partir\s+de\s+ahora|de\s+ahora\s+en\s+adelante|siempre\s+(?:usa|env[ií]a|escribe))\b",
        r"(?:\bj'(?:adore|aime|préfère)|\bje\s+(?:\w+\s+)?(?:préfère|déteste|hais|n'aime\s+pas|aime))\b",
        r"\b(?:désormais|dorénavant|à\s+partir\s+de\s+maintenant)\b",
        r"\bich\s+(?:\w+\s+)?(?:liebe|hasse|mag|bevorzuge)\b|\b(?:ab\s+jetzt|von\s+nun\s+an|künftig)\b",
    )
)

# One-off instructions belong to working memory (seed §4.1: "this time reply concisely" is
# cleared at session end), so they are not long-term preferences.
_ONE_OFF = re.compile(r"\b(?:this\s+time|just\s+this\s+once|for\s+now|this\s+once)\b|这次|这一次|本次", re.IGNORECASE)
# A question that is not a polite request ("Do you always ...?") states nothing.
_QUESTION_END = re.compile(r"[?？]\s*$")
_POLITE_REQUEST = re.compile(
    r"^(?:please\s+)?(?:can|could|would|will)\s+you\b|能不能|可不可以|可以|能否|能", re.IGNORECASE
)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into trimmed, non-empty sentences (English and Chinese punctuation)."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text or "") if s and s.strip()]


def detect_preferences(text: str) -> list[str]:
    """Return the sentences of ``text`` in which the user states a lasting preference.

    Rule-based (seed §4.2 "the user states a preference explicitly"): English ("I prefer ...",
    "always ...", "please use ...", "from now on ...") and Chinese (我喜欢, 以后都, 请总是, 请不要
    ...). Skipped: one-off instructions ("this time", 这次 — working memory, seed §4.1) and
    questions that are not polite requests ("Do you always ...?"). Order kept, duplicates dropped.

    Shape: ``str -> list[str]``; never raises; ``[]`` when nothing is found.
    """
    found: list[str] = []
    for sentence in split_sentences(text):
        if _ONE_OFF.search(sentence):
            continue
        if _QUESTION_END.search(sentence) and not _POLITE_REQUEST.search(sentence):
            continue
        if any(p.search(sentence) for p in _PREFERENCE_PATTERNS) and sentence not in found:
            found.append(sentence)
    return found


# --- explicit notes: "remember that ..." -----------------------------------------------------

_NOTE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(?:please\s+|pls\s+)?(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind)\b(?!\s+when\b)",
        r"\b(?:please|pls|can\s+you|could\s+you)\s+(?:remember|note|keep\s+in\s+mind)\b(?!\s+when\b)",
        r"\bfor\s+the\s+record\b|\bfyi\b|\bmake\s+a\s+note\b|\bdon'?t\s+forget\s+that\b",
        r"(?:请|帮我)?记住|记一下|别忘了",
        r"覚えて(?:おいて|ください)|メモして",
    )
)


def detect_notes(text: str) -> list[str]:
    """Return the sentences of ``text`` in which the user asks Hermes to remember a fact
    ("Please remember: the project code is K-42", "note that the office moved", 请记住…,
    覚えておいて…) — an explicit write request (seed §4.2 "the user states it explicitly"), kept
    as a ``note`` memory in the user's own words. Skipped: questions about memory ("do you
    remember ...?", "remember when ...") and one-off instructions (working memory, seed §4.1).

    Shape: ``str -> list[str]``; never raises; ``[]`` when nothing is found.
    """
    found: list[str] = []
    for sentence in split_sentences(text):
        if _ONE_OFF.search(sentence) or (_QUESTION_END.search(sentence) and not _POLITE_REQUEST.search(sentence)):
            continue
        if any(p.search(sentence) for p in _NOTE_PATTERNS) and sentence not in found:
            found.append(sentence)
    return found


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


_CONTROL_TOKENS = re.compile(r"<\|[\w-]+\|>|</?s>|\[/?INST\]|<think>|\{\s*\"(?:tool_call|response|name)\"\s*:", re.I)
_INABILITY = re.compile(
    r"\bI\s+(?:can(?:no|')t|cannot)\s+(?:help|do|access|complete|find|perform|answer|provide)\b"
    r"|\bI(?:'m|\s+am)\s+(?:not\s+able|unable)\s+to\b|\bI\s+(?:do\s+not|don't)\s+(?:have\s+access|know)\b"
    r"|\bas\s+an\s+AI\b|\b(?:sorry|unfortunately|apologi[sz]e)\b"
    r"|无法|不能(?:完成|访问|回答|执行)|抱歉|对不起|不知道|できません|申し訳",
    re.I,
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
    re.I,
)
# other languages of the intent rules' neighbours: "j'ai publié", "he enviado", "ich habe ... gesendet",
# 送信しました (DESIGN §5.5: claimed effects)
_CLAIMS_EFFECT_OTHER = re.compile(
    r"\bj'ai\s+(?:\w+\s+){0,2}?(?:publié|envoyé|créé|programmé|enregistré|partagé|généré|posté)\b"
    r"|\b(?:he|hemos)\s+(?:\w+\s+){0,2}?(?:publicado|enviado|creado|programado|guardado|compartido|generado)\b"
    r"|\b(?:ich\s+habe|wir\s+haben|wurde|wurden)\b.{0,60}?\b(?:gepostet|gesendet|geschickt|erstellt|geplant|gespeichert|"
    r"geteilt|veröffentlicht|eingerichtet)\b"
    r"|(?:送信|投稿|作成|設定|保存|共有|予約)(?:しました|済み|完了)",
    re.I,
)
# a negated or future claim claims nothing: "I have not posted", "I will post", 没有发送, 未发送
_NOT_A_CLAIM = re.compile(
    r"\b(?:not|never|n't|will|going\s+to|shall|can|could|would|should|ne\s+\w+\s+pas|no\s+he|nicht|noch\s+nicht)\b"
    r"|没有|没|未|即将|将会|将要|打算|准备|まだ|していません",
    re.I,
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
    if len(units) >= 12 and len(set(units)) / len(units) < 0.35:
        defects.append("repetition")
    elif re.search(r"(.{6,}?)\1{3,}", text, re.S):
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


def passes_threshold(confidence: float) -> bool:
    """True when a record of this confidence may be written (seed §6.4, ``MIN_CONFIDENCE``)."""
    return confidence >= MIN_CONFIDENCE


# --- working memory: one-off instructions (seed §4.1) ----------------------------------------


def detect_one_off(text: str) -> list[str]:
    """Sentences of ``text`` that are instructions for this session only ("short answers this
    time", "just this once use a table", 这次简短回答): they go to working memory, reach this
    session's prompts and are cleared at session end; never written to long-term memory."""
    return [s for s in split_sentences(text) if _ONE_OFF.search(s)]


# --- cross-session references (seed §4.2 trigger) -------------------------------------------

# A cross-session reference points at an earlier conversation or at something made in one
# ("like last time", "the report from March", "as before", 上次, 像以前一样). A time range about
# the data ("last month's sales", 上个月的销售额, le chiffre d'affaires du mois dernier) is not
# one: a time phrase counts only when it qualifies an artifact noun (report, summary, chart ...).
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_ARTIFACTS = (
    r"(?:report|summary|summaries|analysis|chart|graph|slides?|deck|presentation|document|doc|file|"
    r"spreadsheet|email|e-mail|message|post|memo|draft|dashboard|plan|notes?|list|export|"
    r"script|query|template|answer|reply|conversation|chat|discussion|session)s?"
)
_ZH_ARTIFACTS = r"(?:报告|总结|汇总|图表|文件|文档|邮件|消息|分析|幻灯片|表格|草稿|方案)"
_WHEN = (
    r"(?:last\s+(?:week|month|year|quarter|time|session|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday)|yesterday|earlier(?:\s+today)?|the\s+other\s+day|(?:" + _MONTHS + r")(?:\s+\d{4})?|\d{4}-\d{2})"
)
_CROSS_SESSION_PATTERNS = (
    # "like last time", "as before", "same as usual", "the way you did it before"
    r"\b(?:like|as|same\s+as|just\s+like|the\s+same\s+way\s+as)\s+(?:last\s+time|before|usual|previously|earlier|"
    r"(?:we|you)\s+did(?:\s+(?:it|that))?\s+(?:before|last\s+time|earlier))\b",
    r"\blast\s+time\b|\bprevious\s+(?:session|conversation|chat)\b|\bwhere\s+we\s+left\s+off\b",
    # "the report from March", "that summary you made yesterday" (from: made then, not about then)
    r"\b(?:the|that|my|your|our)\s+(?:\w+\s+)?"
    + _ARTIFACTS
    + r"\s+(?:from|(?:you|we)\s+(?:made|wrote|sent|did)\s+)\s*"
    + _WHEN
    + r"\b",
    # "send last week's report again", "reuse the March summary" — a time-qualified artifact is a
    # reference only when it is fetched again ("write last month's report" asks for a new one)
    r"\b(?:re-?send|re-?use|re-?open|show\s+me|pull\s+up|forward|update|revise|reuse|resend)\s+(?:me\s+)?(?:the\s+)?"
    + _WHEN
    + r"(?:'s|’s)?\s+"
    + _ARTIFACTS
    + r"\b",
    r"\b" + _WHEN + r"(?:'s|’s)?\s+" + _ARTIFACTS + r"\b.{0,40}?\b(?:again|once\s+more)\b",
    # "the previous / earlier / last / old report"
    r"\b(?:the|that|my|your|our)\s+(?:previous|earlier|last|old|original)\s+" + _ARTIFACTS + r"\b",
    # "you/we made it before", "we discussed", "do you remember"
    r"\b(?:you|we)\s+(?:did|made|wrote|sent|generated|created|discussed|talked\s+about|agreed(?:\s+on)?)\s+"
    r"(?:it\s+|that\s+|this\s+)?(?:before|earlier|last\s+time|previously)\b",
    r"\bas\s+we\s+(?:discussed|agreed|said)\b|\bdo\s+you\s+remember\b|\bremember\s+when\b",
    # Chinese: 上次 / 上回 (last time), 像以前一样, 照旧, 老样子, 之前的报告, 上个月的报告 (not 上个月的销售额)
    r"(?:像|和|跟|同|按)?上次|上回|像以前|和以前一样|跟以前一样|同以前|照旧|老样子|和之前一样|跟之前一样|像之前|按之前|"
    r"我们(?:之前|以前|上次)(?:讨论|说|聊|谈)|你(?:之前|以前|上次)(?:做|写|发|生成)",
    r"(?:之前|以前|早先)(?:的|做的|写的|发的|生成的)(?:那份|那个)?" + _ZH_ARTIFACTS,
    r"(?:上个月|上周|上星期|去年|昨天|[一二三四五六七八九十]{1,2}月|\d{1,2}月)(?:做的|写的|发的|生成的)(?:那份|那个)?"
    + _ZH_ARTIFACTS,
    r"(?:上个月|上周|上星期|去年|昨天|[一二三四五六七八九十]{1,2}月|\d{1,2}月)的(?:那份|那个)?"
    + _ZH_ARTIFACTS
    + r".{0,12}?(?:再|重新|又)",
    # Japanese: 前回 (last time), いつものように (as usual), 先月のレポート (not 先月の売上)
    r"前回|この前の|いつも(?:の|のように|通り)|(?:先月|先週|昨日|去年|\d{1,2}月)の(?:レポート|報告書|資料|まとめ|グラフ|ファイル)",
    # Spanish / French / German: "como la última vez", "comme la dernière fois", "wie letztes Mal"
    r"\b(?:como|igual\s+que)\s+(?:la\s+última\s+vez|antes|siempre)\b|\bel\s+(?:informe|reporte|resumen)\s+de\s+"
    r"(?:la\s+última\s+vez|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)\b",
    r"\bcomme\s+(?:la\s+dernière\s+fois|avant|d'habitude)\b|\ble\s+(?:rapport|résumé)\s+(?:de|du\s+mois\s+de)\s+"
    r"(?:janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre)\b",
    r"\bwie\s+(?:letztes\s+mal|beim\s+letzten\s+mal|(?:zu)?vor|immer|üblich)\b|\bder\s+bericht\s+(?:vom|von|aus\s+dem)\s+"
    r"(?:januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember)\b",
)
_CROSS_SESSION = re.compile("|".join(f"(?:{p})" for p in _CROSS_SESSION_PATTERNS), re.IGNORECASE)


def detect_cross_session(text: str) -> str | None:
    """The phrase by which ``text`` refers to an earlier conversation or something made in
    one ("like last time", "the report from March", "as before", 上次, 像以前一样, 前回, "comme
    la dernière fois"), or ``None``. A time range about data ("last month's sales", "sales
    from March", 上个月的销售额, 先月の売上) is not a reference: a time phrase counts only when
    it qualifies an artifact (report, summary, chart, 报告 ...). Such a request is answered with
    memories of the earlier work and recorded as a ``cross_session`` event (seed §4.2)."""
    m = _CROSS_SESSION.search(text or "")
    return m.group(0) if m else None


CROSS_SESSION_CONFIDENCE: float = 0.8

# --- semantic facts: rule-based extraction (used when no capable model is configured) ---------

#: Predicates with one value at a time: a different value is a conflict (seed §4.3).
FUNCTIONAL_PREDICATES: frozenset[str] = frozenset(
    {
        "prefers_format",
        "prefers_answer_length",
        "prefers_language",
        "reports_to",
        "works_at",
        "lives_in",
        "manager_of_user",
    }
)

_FORMATS = {
    "pdf": "pdf",
    "markdown": "markdown",
    "md": "markdown",
    "html": "html",
    "csv": "csv",
    "excel": "excel",
    "xlsx": "excel",
    "spreadsheet": "excel",
    "word": "word",
    "docx": "word",
    "json": "json",
    "plain text": "plain text",
    "txt": "plain text",
    "ppt": "slides",
    "slides": "slides",
}
_FORMAT_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _FORMATS), key=len, reverse=True)) + r")\b", re.I)
_FORMAT_CONTEXT = re.compile(r"\b(?:report|reports|format|output|file|export|as|in|use)\b|格式|报告", re.I)
_SHORT = re.compile(r"\b(?:short|concise|brief|terse|succinct)\b|简短|简洁|简要", re.I)
_LONG = re.compile(r"\b(?:detailed|long|thorough|in[- ]depth|verbose)\b|详细", re.I)
_LENGTH_CONTEXT = re.compile(r"\b(?:answers?|replies|reply|responses?|respond|explanations?)\b|回答|回复", re.I)
_LANGUAGES = {
    "english": "english",
    "chinese": "chinese",
    "中文": "chinese",
    "英文": "english",
    "french": "french",
    "german": "german",
    "spanish": "spanish",
    "japanese": "japanese",
    "日语": "japanese",
}
_LANGUAGE_RE = re.compile(
    r"(?:\b(?:in|reply in|respond in|answer in|write in)\s+(english|chinese|french|german|"
    r"spanish|japanese)\b)|用(中文|英文|日语)",
    re.I,
)
_NAME = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})"
_GROUP = r"(?:the\s+)?([A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,3}?)"
_RELATION_PATTERNS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"\bI\s+(?:now\s+)?report\s+(?:directly\s+)?to\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\b[Mm]y\s+(?:new\s+)?(?:manager|boss|lead)\s+is\s+" + _NAME), "user", "reports_to"),
    (re.compile(r"\bI\s+(?:now\s+)?work\s+(?:at|for)\s+" + _NAME), "user", "works_at"),
    (re.compile(r"\bI\s+(?:now\s+)?live\s+in\s+" + _NAME), "user", "lives_in"),
    (re.compile(r"我(?:现在)?向(\S{1,8}?)汇报"), "user", "reports_to"),
)
_MEMBER = re.compile(
    _NAME + r"\s+(?:is|are)\s+(?:a\s+member\s+of|in|on|part\s+of)\s+" + _GROUP + r"\s+(group|team|department|squad)\b",
    re.I,
)
_MEMBER_ZH = re.compile(r"(\S{1,8}?)(?:在|属于)(\S{1,8}?)(组|团队|部门)")
_LEADS = re.compile(_NAME + r"\s+(?:leads|runs|manages|heads)\s+" + _GROUP + r"\s+(group|team|department)\b", re.I)


class FactCandidate:
    """A candidate semantic fact: ``subject predicate object`` (``object_is_entity``: the
    object is an entity of the graph, else a literal value) with a confidence."""

    __slots__ = ("confidence", "object", "object_is_entity", "predicate", "subject")

    def __init__(self, subject: str, predicate: str, obj: str, *, object_is_entity: bool, confidence: float) -> None:
        self.subject = subject
        self.predicate = predicate
        self.object = obj
        self.object_is_entity = object_is_entity
        self.confidence = confidence

    def key(self) -> tuple[str, str, str]:
        return (self.subject.casefold(), self.predicate, self.object.casefold())

    def __repr__(self) -> str:
        return f"FactCandidate({self.subject!r}, {self.predicate!r}, {self.object!r}, {self.confidence})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FactCandidate) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


#: Confidence of a fact the rule-based extractor reads from the user's own sentence.
RULE_FACT_CONFIDENCE: float = 0.85


#: Opposite predicates: a fact of one and a fact of the other about the same object cannot both
#: hold; the later statement supersedes the earlier (``memory.semantic``; issue 23 kind 2).
OPPOSITE_PREDICATES: dict[str, str] = {"likes": "dislikes", "dislikes": "likes"}

_NEG_EN = r"(?:do\s+not|don't|never|no\s+longer|can't|cannot)\s+(?:like|stand)"
# (pattern, which group holds the verb, which the object); the verb decides the polarity
_TASTES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bI\s+"
        + _ADVERBS
        + r"(?P<verb>"
        + _NEG_EN
        + r"|love|like|adore|enjoy|hate|dislike|detest|loathe)\s+(?P<obj>[^.,;!?]+)",
        r"\bI'?m\s+(?P<verb>not\s+a\s+(?:big\s+|huge\s+)?fan|a\s+(?:big\s+|huge\s+)?fan)\s+of\s+(?P<obj>[^.,;!?]+)",
        r"我(?:真的|非常|很|超|特别|最|一直|都|也|还是)?(?P<verb>不喜欢|不太喜欢|不爱|讨厌|厌恶|受不了|喜欢|爱)(?:吃|喝|看|听|用|玩)?(?P<obj>[^。！？，,.!?；;]{1,16})",
        r"(?P<obj>[^。！？、，,.!?\s]{1,16}?)(?:が|は)(?:大)?(?P<verb>好き|嫌い)",
        r"\b(?P<verb>no\s+me\s+gusta[n]?|me\s+encanta[n]?|me\s+gusta[n]?|odio|adoro)\s+(?P<obj>[^.,;!?]+)",
        r"(?P<verb>\bj'adore|\bj'aime|\bje\s+(?:\w+\s+)?(?:déteste|hais|n'aime\s+pas|aime|adore))\s+(?P<obj>[^.,;!?]+)",
        r"\bich\s+(?P<verb>liebe|hasse|mag\s+kein\w*|mag\s+\w+\s+nicht|mag)\s+(?P<obj>[^.,;!?]+)",
    )
)
_NEGATIVE_VERB = re.compile(
    r"hate|dislike|detest|loathe|n't|not|never|no\s+longer|cannot|不|讨厌|厌恶|受不了|嫌い|odio|déteste|hais|hasse|kein|nicht",
    re.IGNORECASE,
)
# what follows "I like" that is not a thing liked: an infinitive, a clause, a pronoun
_NOT_AN_OBJECT = re.compile(r"^(?:to|it|that|this|when|if|how|what|you|your|the\s+idea)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an|el|la|los|las|le|les|l'|das|die|der|den)\s*", re.IGNORECASE)
# time and degree words after the thing ("I don't like jazz anymore", "I love it again")
_TRAILING = re.compile(
    r"(?:\s+(?:anymore|any\s+more|again|now|either|too|a\s+lot|so\s+much|very\s+much|at\s+all|these\s+days|"
    r"nowadays|ya|más|plus|du\s+tout|nicht\s+mehr|mehr|sehr|auch))+$",
    re.IGNORECASE,
)


def extract_tastes(sentence: str) -> list[tuple[str, str]]:
    """``(predicate, object)`` pairs of the likes and dislikes a preference sentence states:
    "I love Chinese food" → ``("likes", "chinese food")``, "I really don't like Chinese food" /
    我讨厌中餐 / 寿司が嫌い / odio la comida china / je déteste ... / ich hasse ... →
    ``("dislikes", ...)``. The object is cut at punctuation, articles dropped, casefolded, at most
    six words. Nothing for "I like to ...", "I like it when ...". Never raises."""
    out: list[tuple[str, str]] = []
    for pattern in _TASTES:
        for m in pattern.finditer(sentence or ""):
            obj = " ".join(m.group("obj").split())
            obj = _TRAILING.sub("", _ARTICLE.sub("", obj)).strip(" '\"").casefold()
            if not obj or _NOT_AN_OBJECT.search(obj) or len(obj.split()) > 6:
                continue
            verb = m.group("verb")
            predicate = "dislikes" if _NEGATIVE_VERB.search(verb) or verb.lower().startswith("not") else "likes"
            if (predicate, obj) not in out:
                out.append((predicate, obj))
    return out


def _clean_name(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip(" .,;:!?'\"")


def extract_facts(text: str) -> list[FactCandidate]:
    """Rule-based candidate facts from a user's message (the extractor used when no capable
    model is configured — stated as such in the consolidate graph's state):

    * lasting preferences (``detect_preferences`` sentences): report/output format
      (``prefers_format``: pdf, markdown, excel ...), answer length (``prefers_answer_length``:
      short | detailed), reply language (``prefers_language``); else likes and dislikes
      (``likes`` / ``dislikes`` <thing>, :func:`extract_tastes`: opposite predicates, so "I
      love X" then "I hate X" is a contradiction the later statement wins);
    * relations: "I report to X" / "my manager is X" / 我向X汇报 (``user reports_to X``),
      "I work at X", "I live in X", "X is in the Y group" / X在Y组 (``X member_of Y group``),
      "X leads the Y team" (``X leads Y team``).

    One-off instructions ("this time") yield nothing. Never raises."""
    out: list[FactCandidate] = []
    conf = RULE_FACT_CONFIDENCE
    for sentence in detect_preferences(text):
        before = len(out)
        formats = {_FORMATS[m.group(1).lower()] for m in _FORMAT_RE.finditer(sentence)}
        if len(formats) == 1 and _FORMAT_CONTEXT.search(sentence):
            out.append(FactCandidate("user", "prefers_format", formats.pop(), object_is_entity=False, confidence=conf))
        short, long_ = bool(_SHORT.search(sentence)), bool(_LONG.search(sentence))
        if short != long_ and _LENGTH_CONTEXT.search(sentence):
            out.append(
                FactCandidate(
                    "user",
                    "prefers_answer_length",
                    "short" if short else "detailed",
                    object_is_entity=False,
                    confidence=conf,
                )
            )
        m = _LANGUAGE_RE.search(sentence)
        if m:
            lang = _LANGUAGES[(m.group(1) or m.group(2)).lower()]
            out.append(FactCandidate("user", "prefers_language", lang, object_is_entity=False, confidence=conf))
        if len(out) == before:  # a format, length or language preference says it all
            for predicate, obj in extract_tastes(sentence):
                out.append(FactCandidate("user", predicate, obj, object_is_entity=False, confidence=conf))
    for sentence in split_sentences(text):
        if _ONE_OFF.search(sentence) or (_QUESTION_END.search(sentence) and not _POLITE_REQUEST.search(sentence)):
            continue
        for pattern, subject, predicate in _RELATION_PATTERNS:
            for m in pattern.finditer(sentence):
                out.append(
                    FactCandidate(subject, predicate, _clean_name(m.group(1)), object_is_entity=True, confidence=conf)
                )
        for m in _MEMBER.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(
                FactCandidate(_clean_name(m.group(1)), "member_of", group, object_is_entity=True, confidence=conf)
            )
        for m in _MEMBER_ZH.finditer(sentence):
            out.append(
                FactCandidate(
                    _clean_name(m.group(1)),
                    "member_of",
                    m.group(2) + m.group(3),
                    object_is_entity=True,
                    confidence=conf,
                )
            )
        for m in _LEADS.finditer(sentence):
            group = f"{_clean_name(m.group(2))} {m.group(3).lower()}"
            out.append(FactCandidate(_clean_name(m.group(1)), "leads", group, object_is_entity=True, confidence=conf))
    return list(dict.fromkeys(out))


# --- retrieval: memory types matched to the task (seed §4.2 "type filter") --------------------

_TASK_WORDS = re.compile(
    r"\b(?:report|summar|analy|query|data|sales|post|send|remind|schedule|generate|export|"
    r"run|create|file)\w*|报告|汇总|分析|数据|提醒|发送",
    re.I,
)


def kinds_for_task(goal: str) -> list[str] | None:
    """Episodic kinds worth recalling for ``goal``: a piece of work (report, query, reminder
    ...) gets past tasks, tool recoveries, cross-session records and preferences — not
    conversation turns; anything else gets every kind (``None``)."""
    if _TASK_WORDS.search(goal or ""):
        return ["task", "tool_recovery", "cross_session", "preference", "note"]
    return None


def behaviour_values(text: str) -> list[tuple[str, str]]:
    """Values of single-valued preferences that a request *uses* ("send it as a PDF", "keep it
    short", "in Chinese") without stating a lasting preference: the user's next behaviour
    that decides a pending conflict (seed §4.3). Only used to resolve an existing conflict,
    never to create a fact. Returns (predicate, value) pairs."""
    out: list[tuple[str, str]] = []
    formats = {_FORMATS[m.group(1).lower()] for m in _FORMAT_RE.finditer(text or "")}
    if len(formats) == 1 and _FORMAT_CONTEXT.search(text):
        out.append(("prefers_format", formats.pop()))
    short, long_ = bool(_SHORT.search(text or "")), bool(_LONG.search(text or ""))
    if short != long_:
        out.append(("prefers_answer_length", "short" if short else "detailed"))
    m = _LANGUAGE_RE.search(text or "")
    if m:
        out.append(("prefers_language", _LANGUAGES[(m.group(1) or m.group(2)).lower()]))
    return out
