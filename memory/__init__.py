"""Memory for Hermes Agent (DESIGN §4, seed §4). Knows nothing of the graph.

    working.py     per-session working memory (TTL cache, cleared at session end)
    episodic/      episodic events: base protocol, SQLite FTS5 store (default), Weaviate store
    policy.py      write triggers, confidence threshold, expiry (episodic 30 d, semantic 180 d)
    queue.py       persistent retry queue for failed writes
    service.py     MemoryService: recall (labelled, branch-aware) and record_turn
"""
