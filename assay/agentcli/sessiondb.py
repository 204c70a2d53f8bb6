"""A CLI's session database (SQLite) in the checkpoint: a consistent copy, redacted.

OpenCode keeps its sessions in one SQLite database in write-ahead-log mode
(``$HOME/.local/share/opencode/opencode.db`` and its ``-wal``), written while it runs. The
bytes of the database file alone are not the session (the log holds what is not
checkpointed yet), and a secret replaced byte for byte in a database breaks it. So a
profile names such files (``NativeResume.databases``) and the desk records each as one
self-contained database:

- ``database_copy`` reads the database file and its log as data (the caller's reader: only
  regular files, never through a link; SQLite never opens a file of the CLI's HOME, whose
  ``-shm`` it would write). The log is read before and after the database; when the two
  reads differ the CLI was writing, and the copy is read again. A log that did not change
  while the database was read makes a consistent pair whatever the CLI's own checkpoints
  copied into the database meanwhile (every page they copy is in the log). The pair is
  opened in a private folder, its committed transactions applied, and written out as one
  compact database (no log, no free page).
- ``redacted_database`` replaces each withheld value in every text and blob of every table,
  checks with SQL that none is left anywhere (a trigger of the CLI's could have copied one
  aside), compacts the database again (no freed page keeps a replaced value) and checks
  its bytes; ``DatabaseRefused`` when a value is left.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from assay.journal.redact import REDACTED

READS = 5  # how many times a database the CLI keeps writing is read before giving up
LOG = "-wal"

Reader = Callable[[str], "bytes | None"]


class DatabaseRefused(ValueError):
    """A session database that cannot be recorded as it is (not SQLite, changing, a secret
    that cannot be taken out)."""


def database_copy(read: Reader, relative: str) -> bytes | None:
    """The database ``relative`` (read by ``read``, a path relative to the CLI's HOME) as
    one self-contained database file; None when there is none."""
    for _ in range(READS):
        log = read(relative + LOG)
        main = read(relative)
        if main is None:
            return None
        if read(relative + LOG) == log:
            return _applied(main, log)
    raise DatabaseRefused(f"the CLI kept writing it while it was read {READS} times")


def _applied(main: bytes, log: bytes | None) -> bytes:
    """``main`` with the committed transactions of its write-ahead ``log``, compacted."""
    with tempfile.TemporaryDirectory(prefix="assay-session-db-") as folder:
        path = Path(folder) / "session.db"
        path.write_bytes(main)
        if log:
            Path(f"{path}{LOG}").write_bytes(log)
        try:
            with contextlib.closing(sqlite3.connect(path)) as source:
                source.execute("PRAGMA trusted_schema = OFF")
                memory = sqlite3.connect(":memory:")
                source.backup(memory)
        except sqlite3.Error as exc:
            raise DatabaseRefused(f"not a SQLite database ({exc})") from None
    with contextlib.closing(memory):
        return _compacted(memory)


def redacted_database(data: bytes, withheld: Sequence[str], *, where: str) -> bytes:
    """``data`` (a database ``database_copy`` made) with each withheld value replaced by
    ``[redacted]`` (module docstring); ``DatabaseRefused`` naming ``where`` when one is
    left."""
    values = [v for v in withheld if v]
    if not values:
        return data
    memory = sqlite3.connect(":memory:")
    with contextlib.closing(memory):
        try:
            memory.deserialize(data)
            memory.execute("PRAGMA trusted_schema = OFF")
            for table, column in _columns(memory):
                _replace(memory, table, column, values)
            memory.commit()
            left = _holding(memory, values)
            if left:
                raise DatabaseRefused(f"{where}: a withheld value is left in {left}")
            redacted = _compacted(memory)
        except sqlite3.Error as exc:
            raise DatabaseRefused(f"{where}: cannot be redacted ({exc})") from None
    if any(v.encode("utf-8") in redacted for v in values):
        raise DatabaseRefused(f"{where}: a withheld value is left in its bytes")
    return redacted


def _tables(db: sqlite3.Connection) -> list[str]:
    return [
        str(name) for (name,) in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    ]


def _columns(db: sqlite3.Connection) -> list[tuple[str, str]]:
    """Every (table, column) the redaction sets: the database's own tables' stored columns
    (SQLite's tables and virtual tables are left as they are, and checked with the rest)."""
    virtual = {
        str(name)
        for (name,) in db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'"
        )
    }
    return [
        (table, str(row[1]))
        for table in _tables(db)
        if not table.startswith("sqlite_") and table not in virtual
        for row in db.execute(f"PRAGMA table_xinfo({_quoted(table)})")
        if not row[6]  # a generated column is computed, never set
    ]


def _replace(db: sqlite3.Connection, table: str, column: str, values: list[str]) -> None:
    """Each of ``values`` replaced in ``table.column`` where it is text or a blob."""
    name = _quoted(column)
    text, blob = name, f"CAST({name} AS TEXT)"
    for _ in values:
        text, blob = f"replace({text}, ?, ?)", f"replace({blob}, ?, ?)"
    pairs = [item for value in values for item in (value, REDACTED)]
    found = " OR ".join(f"instr({name}, ?)" for _ in values)
    db.execute(
        f"UPDATE {_quoted(table)} SET {name} = CASE typeof({name}) "
        f"WHEN 'text' THEN {text} ELSE CAST({blob} AS BLOB) END "
        f"WHERE typeof({name}) IN ('text', 'blob') AND ({found})",
        [*pairs, *pairs, *values],
    )


def _holding(db: sqlite3.Connection, values: list[str]) -> str | None:
    """Where a withheld value is still found: the schema, or a table's column."""
    found = " OR ".join("instr(sql, ?)" for _ in values)
    if db.execute(f"SELECT 1 FROM sqlite_schema WHERE {found} LIMIT 1", values).fetchone():
        return "its schema"
    for table in _tables(db):
        for row in db.execute(f"PRAGMA table_xinfo({_quoted(table)})"):
            name = _quoted(str(row[1]))
            where = " OR ".join(f"instr(CAST({name} AS BLOB), CAST(? AS BLOB))" for _ in values)
            if db.execute(
                f"SELECT 1 FROM {_quoted(table)} WHERE {where} LIMIT 1", values
            ).fetchone():
                return f"{table}.{row[1]}"
    return None


def _compacted(db: sqlite3.Connection) -> bytes:
    db.execute("VACUUM")
    return bytes(db.serialize())


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
