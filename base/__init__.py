"""What every layer may import, below ``tools/`` and ``memory/`` (DESIGN §7.1): the one opener of
shared SQLite files (:mod:`base.sqlite_files`) and the process environment
(:mod:`base.environment`). It knows nothing of Hermes's tools, memory or graph.
"""
