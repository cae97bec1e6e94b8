"""Write triggers read from the user's words (seed §4.1, §4.2): lasting preferences, explicit
notes ("remember that ..."), one-off instructions for this session only, and references to an
earlier conversation. Also the sentence splitter the other rule sets share.

Which confidence each trigger writes at, and for how long, is ``memory.policy``. Everything here
is pure and rule-based: no I/O, no model call.
"""

from __future__ import annotations

import re

# --- preference detection ------------------------------------------------------------------

# A sentence ends at . ! ? ; followed by space, right after a CJK stop, or at a line break.
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")

#: Adverbs a first-person preference may carry ("I always prefer", "I really still like").
ADVERBS = (
    r"(?:(?:really|much|generally|always|usually|normally|still|also|now|definitely|truly|absolutely|just|do|so)\s+)*"
)

_PREFERENCE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # English: first-person statements of taste, with any adverbs between ("I always
        # prefer", "I still really like"; "I'd like ..." is a request, not a taste).
        r"\bI(?:'d| would)?\s+" + ADVERBS + r"prefer\b",
        r"\bmy\s+(?:preference|preferred\s+\w+)\s+is\b",
        r"\bI\s+" + ADVERBS + r"(?:like|love|hate|dislike|adore|enjoy|detest|loathe)\b",
        r"\bI\s+" + ADVERBS + r"(?:do\s+not|don't|never|no\s+longer|can't|cannot)\s+(?:like|want|stand)\b",
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
#: An instruction for this session only ("this time", 这次): working memory, never a lasting fact.
ONE_OFF = re.compile(r"\b(?:this\s+time|just\s+this\s+once|for\s+now|this\s+once)\b|这次|这一次|本次", re.IGNORECASE)
# A question that is not a polite request ("Do you always ...?") states nothing.
#: A sentence that ends as a question.
QUESTION_END = re.compile(r"[?？]\s*$")
#: A question that is a polite request ("could you always ...", 能不能): not skipped as a question.
POLITE_REQUEST = re.compile(
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
        if ONE_OFF.search(sentence):
            continue
        if QUESTION_END.search(sentence) and not POLITE_REQUEST.search(sentence):
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
        if ONE_OFF.search(sentence) or (QUESTION_END.search(sentence) and not POLITE_REQUEST.search(sentence)):
            continue
        if any(p.search(sentence) for p in _NOTE_PATTERNS) and sentence not in found:
            found.append(sentence)
    return found


# --- working memory: one-off instructions (seed §4.1) ----------------------------------------


def detect_one_off(text: str) -> list[str]:
    """Sentences of ``text`` that are instructions for this session only ("short answers this
    time", "just this once use a table", 这次简短回答): they go to working memory, reach this
    session's prompts and are cleared at session end; never written to long-term memory."""
    return [s for s in split_sentences(text) if ONE_OFF.search(s)]


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
    (
        r"\b(?:like|as|same\s+as|just\s+like|the\s+same\s+way\s+as)\s+(?:last\s+time|before|usual|previously|earlier|"
        r"(?:we|you)\s+did(?:\s+(?:it|that))?\s+(?:before|last\s+time|earlier))\b"
    ),
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
    (
        r"\b(?:you|we)\s+(?:did|made|wrote|sent|generated|created|discussed|talked\s+about|agreed(?:\s+on)?)\s+"
        r"(?:it\s+|that\s+|this\s+)?(?:before|earlier|last\s+time|previously)\b"
    ),
    r"\bas\s+we\s+(?:discussed|agreed|said)\b|\bdo\s+you\s+remember\b|\bremember\s+when\b",
    # Chinese: 上次 / 上回 (last time), 像以前一样, 照旧, 老样子, 之前的报告, 上个月的报告 (not 上个月的销售额)
    (
        r"(?:像|和|跟|同|按)?上次|上回|像以前|和以前一样|跟以前一样|同以前|照旧|老样子|和之前一样|跟之前一样|像之前|按之前|"
        r"我们(?:之前|以前|上次)(?:讨论|说|聊|谈)|你(?:之前|以前|上次)(?:做|写|发|生成)"
    ),
    r"(?:之前|以前|早先)(?:的|做的|写的|发的|生成的)(?:那份|那个)?" + _ZH_ARTIFACTS,
    r"(?:上个月|上周|上星期|去年|昨天|[一二三四五六七八九十]{1,2}月|\d{1,2}月)(?:做的|写的|发的|生成的)(?:那份|那个)?"
    + _ZH_ARTIFACTS,
    r"(?:上个月|上周|上星期|去年|昨天|[一二三四五六七八九十]{1,2}月|\d{1,2}月)的(?:那份|那个)?"
    + _ZH_ARTIFACTS
    + r".{0,12}?(?:再|重新|又)",
    # Japanese: 前回 (last time), いつものように (as usual), 先月のレポート (not 先月の売上)
    r"前回|この前の|いつも(?:の|のように|通り)|(?:先月|先週|昨日|去年|\d{1,2}月)の(?:レポート|報告書|資料|まとめ|グラフ|ファイル)",
    # Spanish / French / German: "como la última vez", "comme la dernière fois", "wie letztes Mal"
    (
        r"\b(?:como|igual\s+que)\s+(?:la\s+última\s+vez|antes|siempre)\b|\bel\s+(?:informe|reporte|resumen)\s+de\s+"
        r"(?:la\s+última\s+vez|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)\b"
    ),
    (
        r"\bcomme\s+(?:la\s+dernière\s+fois|avant|d'habitude)\b|\ble\s+(?:rapport|résumé)\s+(?:de|du\s+mois\s+de)\s+"
        r"(?:janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre|novembre|décembre)\b"
    ),
    (
        r"\bwie\s+(?:letztes\s+mal|beim\s+letzten\s+mal|(?:zu)?vor|immer|üblich)\b|\bder\s+bericht\s+(?:vom|von|aus\s+dem)\s+"
        r"(?:januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember)\b"
    ),
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
