"""The user's database, read-only: the tools ``describe_database`` and ``query_database`` (DESIGN
§0 "the user's own data"), whose catalog entry points are this package's two names
(``tools.builtin.database:query_database``); ``generate_report`` (:mod:`tools.builtin.report`)
uses the modules below directly.

Which database: the setting ``HERMES_DATABASE`` / ``Context.database`` — an SQLite file path or
an SQLAlchemy-style URL ``sqlite:///relative/path`` / ``sqlite:////absolute/path``. The toolbox
resolves it against the agent's working directory (:func:`tools.database_setting.database_location`)
and the executor hands the absolute path to the tool as the injected argument ``database`` (like
``data_dir``; a model-supplied value is dropped), with read access to that file and its
``-wal``/``-shm``/``-journal`` companions. Nothing here ever creates, repairs or substitutes a
database: an empty setting, a missing path, a directory, a file that is not SQLite, or another
engine's URL is a :class:`DatabaseError` naming the setting and the path.

One concern per module:

- :mod:`.connection` — the setting checked, the read-only connection (``mode=ro`` URI,
  ``PRAGMA query_only=ON``, an authorizer that denies everything but reading) and the deadline;
- :mod:`.statement` — reading SQL (tokens, names, parse tree) and admitting one SELECT;
- :mod:`.schema` — tables, columns, keys and the one-line schema summary;
- :mod:`.hints` — another engine's syntax and join paths, for error messages;
- :mod:`.errors` — SQLite errors rendered with what to write instead;
- :mod:`.execution` — running a checked SELECT (bounded rows and cells, time limit);
- :mod:`.dates` — date and period columns, their ranges, the note of a result without data;
- :mod:`.period_scope` — whether a query's conditions restrict a period (generate_report);
- :mod:`.tools` — the two tool entry points.

These functions run inside the executor's worker process.
"""

from tools.builtin.database.tools import describe_database, query_database
from tools.database_setting import DatabaseError

__all__ = ["DatabaseError", "describe_database", "query_database"]
