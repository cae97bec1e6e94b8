"""Observations written beside conversation turns (issue 20; DESIGN §4.4): who, when and what
a turn is about become searchable, by rules only, while the prompt keeps the turn's own words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.embeddings import HashEmbedder
from memory.episodic.base import SPEAKER_BOOST, EpisodicEvent, fuse, index_text, speaker_weight
from memory.episodic.lance import LanceEpisodicStore
from memory.observations import annotate, named_entities, observe, query_names, third_person
from memory.service import MemoryService

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("I went to a support group", "Caroline went to a support group"),
        ("I'm a counselor now", "Caroline is a counselor now"),
        ("I’ve painted my dog", "Caroline has painted Caroline's dog"),
        ("Tell me about it", "Tell Caroline about it"),
        ("your painting is lovely", "Melanie's painting is lovely"),
        ("You're so brave", "Melanie is so brave"),
    ],
)
def test_first_and_second_person_become_the_names(said, expected):
    assert third_person(said, "Caroline", "Melanie") == expected


def test_without_an_addressee_second_person_is_left_as_said():
    assert third_person("your painting", "Caroline") == "your painting"


@pytest.mark.parametrize(
    ("said", "resolved"),
    [
        ("I went there yesterday", "2023-05-07"),
        ("I ran a charity race last Saturday", "2023-05-06"),
        ("we moved two years ago", "2021"),
        ("I start next month", "2023-06"),
    ],
)
def test_relative_dates_are_resolved_against_the_turn_date(said, resolved):
    obs = observe("Caroline", said, MAY_8)
    assert resolved in obs.text
    assert obs.text.startswith("2023-05-08 · ")


def test_a_short_reply_carries_the_turn_it_answers():
    obs = observe(
        "Melanie",
        "Wow, that's so cool!",
        MAY_8,
        addressee="Caroline",
        previous=("Caroline", "I went to a pottery workshop with my kids."),
    )
    assert "pottery workshop" in obs.text
    assert obs.text.startswith("2023-05-08 · Melanie: ")


def test_a_long_self_contained_turn_does_not_carry_the_previous_one():
    long_turn = (
        "I finally finished the mural for the community center downtown, twelve panels about "
        "migration, family, resilience and hope, painted over six weekends with volunteers."
    )
    obs = observe("Caroline", long_turn, MAY_8, previous=("Melanie", "Any news about the pottery class?"))
    assert "pottery" not in obs.text


def test_entities_are_the_speaker_the_addressee_and_the_names():
    obs = observe("Caroline", "We hiked the Grand Canyon with Harry last week.", MAY_8, addressee="Melanie")
    assert obs.entities[:2] == ("Caroline", "Melanie")
    assert {"Grand Canyon", "Harry"} <= set(obs.entities)
    assert named_entities("Wow. That is great. Oh, and Paris too.") == ["Paris"]


def _turns(*said: tuple[str, str], session: int = 1) -> list[EpisodicEvent]:
    return [
        EpisodicEvent(
            user_id="u",
            kind="conversation",
            text=f"{who}: {what}",
            created_at=MAY_8,
            confidence=0.9,
            metadata={"session": session},
        )
        for who, what in said
    ]


def test_annotate_gives_each_turn_of_a_batch_its_observation():
    events = _turns(("Caroline", "I adopted a puppy yesterday."), ("Melanie", "Aww, what's its name?"))
    other = EpisodicEvent(user_id="u", kind="task", text="completed task: report", confidence=0.9)
    assert annotate([*events, other]) == 2
    first, second = (index_text(e) for e in events)
    assert "Caroline adopted a puppy yesterday (2023-05-07)" in first
    assert "puppy" in second and second.startswith("2023-05-08 · Melanie")  # what the reply is about
    assert events[0].metadata["entities"][:2] == ["Caroline", "Melanie"]
    assert index_text(other) == other.text and "index_text" not in other.metadata
    assert events[0].text == "Caroline: I adopted a puppy yesterday."  # the prompt keeps the words


class _Recording(HashEmbedder):
    """The lexical hash embedder, remembering the passages it embedded."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.seen: list[str] = []

    async def embed_passages(self, texts):
        self.seen += list(texts)
        return await super().embed_passages(texts)


async def test_a_turn_is_found_by_what_only_its_observation_says(tmp_path):
    """The keyword half indexes the observation: the reply is found by the topic of the turn it
    answers and by the resolved date; the memory shown is still the turn as said."""
    store = LanceEpisodicStore(tmp_path / "e.lance", _Recording(64), ttl_days=100_000)
    memory = MemoryService(tmp_path, episodic=store)
    events = _turns(
        ("Caroline", "Guess what, I adopted a golden retriever puppy on Sunday!"),
        ("Melanie", "Aww, that's adorable, so happy for you!"),
        ("Caroline", "I also signed up for a pottery class yesterday."),
    )
    await memory.write_events(events)
    now = datetime(2023, 5, 9, tzinfo=UTC)
    hits = await store.search("u", "retriever", k=3, now=now, mode="keyword")
    assert "Melanie: Aww, that's adorable, so happy for you!" in [h.event.text for h in hits]
    hits = await store.search("u", "2023-05-07", k=1, now=now, mode="keyword")
    assert [h.event.text for h in hits] == ["Caroline: I also signed up for a pottery class yesterday."]
    # the vector half embeds the observation too (the reply's vector is about the puppy)
    assert index_text(events[1]) in store.embedder.seen and events[1].text not in store.embedder.seen
    await store.close()


def _said(who: str, what: str, minute: int) -> EpisodicEvent:
    [event] = _turns((who, what))
    event.created_at = MAY_8.replace(minute=minute)
    annotate([event])
    return event


def test_a_turn_spoken_by_the_person_the_query_names_ranks_first():
    """Entity link: "what does Melanie paint?" is first about what Melanie said, even when
    another turn matches as well and is newer."""
    hers = _said("Melanie", "I paint lakes at dawn.", 1)
    other = _said("Caroline", "Melanie paints lakes at dawn.", 2)
    scores = {hers.id: (hers, 1.0), other.id: (other, 1.0)}
    now = datetime(2023, 5, 9, tzinfo=UTC)
    names = query_names("What does Melanie paint?")
    assert names == {"melanie"}
    ranked = fuse(scores, {}, alpha=0.5, now=now, half_life_days=14, k=2, names=names)
    assert [h.event.id for h in ranked] == [hers.id, other.id]
    assert ranked[0].score == pytest.approx(SPEAKER_BOOST * ranked[1].score, rel=1e-3)
    plain = fuse(scores, {}, alpha=0.5, now=now, half_life_days=14, k=2, names=query_names("what is painted?"))
    assert [h.event.id for h in plain] == [other.id, hers.id]  # no name: the newer first


def test_speaker_weight_reads_the_first_entity_link_only():
    event = _said("Caroline", "I met Melanie at the park.", 1)
    assert speaker_weight(event, {"caroline"}) == SPEAKER_BOOST
    assert speaker_weight(event, {"melanie"}) == 1.0  # mentioned, not the speaker
    assert speaker_weight(EpisodicEvent(user_id="u", kind="task", text="x", confidence=0.9), {"caroline"}) == 1.0


def test_a_long_turn_is_clipped_so_ten_lines_stay_within_600_tokens():
    from memory.retrieval import MAX_LINE_CHARS, approx_tokens, format_episode

    [event] = _turns(("Caroline", "word " * 200))
    line = format_episode(event)
    assert line.endswith("…") and len(line.split("] ", 1)[1]) <= MAX_LINE_CHARS
    assert 10 * approx_tokens(line) <= 900  # the longest; LoCoMo's ten recalled lines average 593
