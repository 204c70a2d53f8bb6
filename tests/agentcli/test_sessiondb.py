"""A CLI's SQLite session database (OpenCode's) between its HOME and the checkpoint: copied
while another process writes it (what only its write-ahead log holds included), never
opened in place (a link the CLI left beside it is not written through), redacted through
SQL wherever a withheld value sits (an indexed column, a blob, a value a trigger copies
aside), and refused when a value cannot be taken out or the database never holds still."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.agentcli.profiles import get_profile
from assay.agentcli.sessiondb import DatabaseRefused, database_copy, redacted_database
from assay.agentcli.sessionstate import capture, restore, session_files, state_folder
from assay.sandbox.scan import CheckpointScan

RESUME = get_profile("opencode").resume
DB = ".local/share/opencode/opencode.db"
TOKEN = "assay-gateway-token-51c0d9e2"
SECRET = "sk-upstream-secret-77ab03f4"

# A writer in its own process, as the CLI is: WAL mode, no checkpoint, and it stays open
# (its log is not folded into the database file) until told to go.
WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE part (id TEXT PRIMARY KEY, data TEXT, raw BLOB)")
db.execute("CREATE INDEX part_data ON part (data)")
for i in range(200):
    db.execute("INSERT INTO part VALUES (?, ?, ?)", (f"p{i}", f"output {i} KEY={sys.argv[2]}",
               f"bytes {sys.argv[2]}".encode()))
print("written", flush=True)
sys.stdin.readline()
"""


@contextlib.contextmanager
def cli_writing(home: Path) -> Iterator[Path]:
    path = home / DB
    path.parent.mkdir(parents=True)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), SECRET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "written\n"
        yield path
    finally:
        writer.communicate("\n", timeout=30)


def rows(data: bytes) -> list[tuple[str, str, bytes]]:
    db = sqlite3.connect(":memory:")
    db.deserialize(data)
    return list(db.execute("SELECT id, data, raw FROM part ORDER BY rowid"))


def test_a_database_being_written_is_copied_whole_and_recorded_redacted(tmp_path: Path) -> None:
    assert RESUME is not None
    home, tree = tmp_path / "home", tmp_path / "tree"
    subprocess.run(["git", "init", "-q", str(tree)], check=True)  # a checkpoint's work tree
    with cli_writing(home) as path:
        assert Path(f"{path}-wal").stat().st_size > path.stat().st_size  # the log holds it
        files = session_files(home, RESUME)
        assert list(files) == [DB]
        assert len(rows(files[DB])) == 200  # what only the log held is in the copy
        point = capture(
            files,
            tree=tree,
            brief="b1",
            profile="opencode",
            session="",
            at=4,
            withheld=[TOKEN, SECRET],
            databases=RESUME.databases,
        )
    recorded = state_folder(tree, "b1") / "home" / DB
    data = recorded.read_bytes()
    assert SECRET.encode() not in data
    got = rows(data)
    assert got[7] == ("p7", "output 7 KEY=[redacted]", b"bytes [redacted]")
    CheckpointScan([TOKEN, SECRET]).check_worktree(tree)  # no Denied
    fresh = tmp_path / "fresh-home"
    restore(point, tree=tree, brief="b1", home=fresh)
    assert rows((fresh / DB).read_bytes()) == got  # what the resumed CLI opens


def test_a_link_the_cli_leaves_beside_its_database_is_neither_read_nor_written(
    tmp_path: Path,
) -> None:
    assert RESUME is not None
    home = tmp_path / "home"
    host = tmp_path / "host-file"
    host.write_bytes(b"the desk's own file")
    with cli_writing(home) as path:
        wal = Path(f"{path}-wal")
        wal.rename(tmp_path / "moved-wal")
        wal.symlink_to(host)  # its log: a link to a file of the desk's
        Path(f"{path}-shm").unlink()
        Path(f"{path}-shm").symlink_to(host)  # SQLite would write its index there
        files = session_files(home, RESUME)
    assert host.read_bytes() == b"the desk's own file"
    copy = sqlite3.connect(":memory:")
    copy.deserialize(files[DB])  # the database file alone: nothing of the log, not even the table
    assert copy.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)


def test_a_value_no_update_can_take_out_refuses_the_database(tmp_path: Path) -> None:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE part (data TEXT DEFAULT '{SECRET}')")
    with pytest.raises(DatabaseRefused, match=r"x\.db: a withheld value is left in its schema"):
        redacted_database(bytes(db.serialize()), [SECRET], where="x.db")


def test_a_trigger_that_copies_the_old_value_aside_keeps_nothing(tmp_path: Path) -> None:
    db = sqlite3.connect(":memory:")
    db.executescript(
        """
        CREATE TABLE part (data TEXT);
        CREATE TABLE stash (old TEXT);
        CREATE TRIGGER keep BEFORE UPDATE ON part BEGIN INSERT INTO stash VALUES (old.data); END;
        """
    )
    db.execute("INSERT INTO part VALUES (?)", (f"token {SECRET}",))
    db.commit()
    try:
        data = redacted_database(bytes(db.serialize()), [SECRET], where="x.db")
    except DatabaseRefused as refused:  # found where the trigger put it
        assert "stash.old" in str(refused)
    else:
        assert SECRET.encode() not in data


def test_a_database_that_never_holds_still_or_is_not_one_is_refused() -> None:
    logs = iter(range(100))

    def changing(path: str) -> bytes | None:
        return f"log {next(logs)}".encode() if path.endswith("-wal") else b"x"

    with pytest.raises(DatabaseRefused, match="kept writing it while it was read"):
        database_copy(changing, DB)
    with pytest.raises(DatabaseRefused, match="not a SQLite database"):
        database_copy(lambda path: None if path.endswith("-wal") else b"garbage" * 100, DB)
    assert database_copy(lambda path: None, DB) is None
