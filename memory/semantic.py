"""Semantic memory: a knowledge graph of entities, relations and attributes on SQLite.

Store chosen by measurement (``evals/bench_memory_semantic.py``, figures in ``evals/README.md``):
plain SQLite tables with recursive queries answer 1–3-hop queries with confidence and validity
filters in well under a millisecond at 10k entities / 50k relations; no graph database needed
(kuzu is archived; its fork gave wrong counts on parameterised 2-hop queries). Tables live in
``<data_dir>/memory.db`` beside the retry queue.

The parts, one concern each: the fact model (``memory.semantic_model``), the SQLite fact store
(``memory.semantic_sqlite``), conflicts and supersession on write (``memory.semantic_conflicts``),
forgetting (``memory.semantic_forgetting``), ageing (``memory.semantic_expiry``), recall
(``memory.semantic_recall``, ranking and branch visibility in ``memory.semantic_ranking``) and
multi-hop queries (``memory.semantic_traversal``).

    entities(user_id, key, name, type)                  key = casefolded name
    facts(id, user_id, subject, predicate, object, object_is_entity,
          confidence, evidence, sources, status, valid_from, valid_to,
          created_at, updated_at, last_used_at, use_count, conflict_with, superseded_by)

A fact is ``subject —predicate→ object``; ``object_is_entity`` says whether the object is an
entity of the graph (a relation: user reports_to Alice) or a literal (an attribute: user
prefers_format pdf). Each fact carries its confidence, its source (``evidence`` "direct" with
the episode ids in ``sources``, or "inferred"), validity (``valid_from``/``valid_to``) and a
status:

    confirmed    believed true
    pending      contradicts a confirmed fact of a single-valued predicate; waits for the
                 user's next behaviour (seed §4.3)
    superseded   lost a conflict (``valid_to`` and ``superseded_by`` say when and to what)
    archived     expired (not confirmed for ``ttl_days``) or down-weighted below the threshold

Conflicts (``upsert``): the same fact again is a duplicate (its sources merged, nothing else);
a different value for a single-valued predicate (``fact_extraction.FUNCTIONAL_PREDICATES``) whose
confirmed value exists is stored *pending* beside it — never overwriting it. When the user
then states or uses one of the two values again, that value is confirmed and the other
superseded with a timestamp (``resolved``). The prompt shows an undecided pair as a conflict
(``memory.retrieval``), never as two true facts. Opposite predicates
(``fact_extraction.OPPOSITE_PREDICATES``: ``likes`` / ``dislikes``) about the same object are a
contradiction of the user's own taste: the later statement supersedes the earlier at once
(``resolved``; tastes change, and both are the user's words), and the earlier statement's
episodes are no longer recalled (:meth:`SemanticMemory.retracted_sources`).

Forgetting is final (:meth:`SemanticMemory.forget`): the fact is deleted and a tombstone
(``semantic_forgotten``: its key and source episodes) keeps it from coming back — an upsert of
the same fact read from those same episodes (consolidation re-reading them, a model extraction)
is refused (``forgotten``), and the episodes are no longer recalled. Only a new statement (a
new episode) brings the fact back.
"""

from __future__ import annotations

from memory.semantic_conflicts import ConflictWrites
from memory.semantic_expiry import FactExpiry
from memory.semantic_forgetting import Forgetting
from memory.semantic_model import Fact, FactStatus, UpsertOutcome, UpsertResult, entity_key, origin_of
from memory.semantic_ranking import visible
from memory.semantic_recall import FactRecall
from memory.semantic_sqlite import SCHEMA
from memory.semantic_traversal import GraphQueries

__all__ = [
    "SCHEMA",
    "Fact",
    "FactStatus",
    "SemanticMemory",
    "UpsertOutcome",
    "UpsertResult",
    "entity_key",
    "origin_of",
    "visible",
]


class SemanticMemory(FactRecall, GraphQueries, ConflictWrites, Forgetting, FactExpiry):
    """The knowledge graph (see the module docstring). ``db_path``: the SQLite file.

    ``ttl_days``: a fact not confirmed again (nor used) for this long is archived by
    ``expire`` (seed §6.4: 180 days). ``min_confidence``: facts below it are not stored and,
    after down-weighting, archived.
    """
