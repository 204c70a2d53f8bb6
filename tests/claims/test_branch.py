"""BranchSync: a brief's checkpoints on its journal ref, its code on its branch, one atomic
CAS push of both per durability point."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from assay.branch import BranchSync, branch_ref
from assay.errors import BadInput, Fenced
from assay.forge import Forge
from assay.plumbing import Identity, RefUpdate
from assay.refs import journal_ref

ME = Identity.for_holder("coder", "h1")
HEIR = Identity.for_holder("coder", "h2")
REF = branch_ref("b1")
JOURNAL = journal_ref("b1")


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def test_a_new_branch_starts_from_main_and_each_sync_is_one_commit(
    forge: Forge, tmp_path: Path
) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    work = sync.checkout()
    assert sync.tip is None and (work / "briefs" / "README.md").exists()
    sync.journal_dir.mkdir(parents=True)
    (sync.journal_dir / "000001.jsonl").write_text('{"seq":1}\n')
    (work / "src.py").write_text("x = 1\n")
    first = sync.sync("step 1")
    assert forge.ls_refs("refs/heads/")[REF] == first
    (work / "src.py").write_text("x = 2\n")
    (sync.journal_dir / "000001.jsonl").write_text('{"seq":1}\n{"seq":2}\n')
    second = sync.sync("step 2")
    assert _git(work, "rev-list", "--count", f"{first}..{second}") == "1"
    # The branch (the review) holds the code alone; the journal ref the whole checkpoint.
    assert _git(work, "diff", "--name-only", first, second).splitlines() == ["src.py"]
    checkpoint = forge.ls_refs(JOURNAL)[JOURNAL]
    assert checkpoint == sync.checkpoint == sync.head()
    changed = _git(work, "diff", "--name-only", f"{checkpoint}~1", checkpoint).splitlines()
    assert changed == [".assay/journal/b1/000001.jsonl", "src.py"]
    assert not [
        p
        for p in _git(work, "ls-tree", "-r", "--name-only", second).splitlines()
        if p.startswith(".assay/")
    ]
    assert sync.sync("nothing new") == second  # no change: no commit, no push
    assert forge.ls_refs(JOURNAL)[JOURNAL] == checkpoint


def test_a_step_that_changes_only_the_journal_moves_only_the_journal_ref(
    forge: Forge, tmp_path: Path
) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    work = sync.checkout()
    sync.journal_dir.mkdir(parents=True)
    (work / "src.py").write_text("x = 1\n")
    (sync.journal_dir / "000001.jsonl").write_text('{"seq":1}\n')
    code = sync.sync("tool")
    lines = '{"seq":1}\n'
    for step in range(2, 5):  # model calls: the journal grows, the code does not
        lines += f'{{"seq":{step}}}\n'
        (sync.journal_dir / "000001.jsonl").write_text(lines)
        assert sync.sync("model") == code
    assert forge.ls_refs(REF)[REF] == code
    checkpoint = forge.ls_refs(JOURNAL)[JOURNAL]
    main = forge.ls_refs("refs/heads/main")["refs/heads/main"]
    assert _git(work, "rev-list", "--count", f"{main}..{checkpoint}") == "4"
    assert _git(work, "rev-list", "--count", f"{main}..{code}") == "1"
    assert _git(work, "diff", "--name-only", main, code).splitlines() == ["src.py"]


def test_a_stale_holders_push_of_branch_and_journal_is_refused_whole(
    forge: Forge, tmp_path: Path
) -> None:
    old = BranchSync(forge, "b1", workdir=tmp_path / "old", identity=ME)
    (old.checkout() / "a.txt").write_text("old 1")
    old.sync("old step 1")
    heir = BranchSync(forge, "b1", workdir=tmp_path / "heir", identity=HEIR)
    heir.checkout()
    # The heir's takeover moves the journal ref alone (its code is the old holder's).
    heir.journal_dir.mkdir(parents=True)
    (heir.journal_dir / "000001.jsonl").write_text('{"takeover":1}\n')
    code = heir.sync("takeover")
    before = forge.ls_refs("refs/")
    assert before[REF] == code == old.tip and before[JOURNAL] == heir.checkpoint
    # The stale holder's branch lease still holds; its journal lease does not: nothing moves.
    (old.workdir / "a.txt").write_text("old 2")
    with pytest.raises(Fenced, match="another holder"):
        old.sync("old step 2")
    assert forge.ls_refs("refs/") == before


def test_commits_name_the_holder_whatever_the_machine_config_says(
    forge: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Machine Owner\n\temail = owner@machine\n[commit]\n\tgpgsign = true\n"
    )
    monkeypatch.setenv("HOME", str(home))
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    work = sync.checkout()
    (work / "a.txt").write_text("a")
    sync.sync("step")
    assert _git(work, "log", "-1", "--format=%an <%ae>|%cn <%ce>") == (
        "coder <h1@coder.assay.invalid>|coder <h1@coder.assay.invalid>"
    )


def test_the_journal_is_committed_even_when_ignored(forge: Forge, tmp_path: Path) -> None:
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    work = sync.checkout()
    (work / ".gitignore").write_text(".assay/\n*.log\n")
    sync.journal_dir.mkdir(parents=True)
    (sync.journal_dir / "000001.jsonl").write_text("{}\n")
    (work / "debug.log").write_text("noise")
    sync.sync("step")
    files = _git(work, "ls-tree", "-r", "--name-only", sync.checkpoint or "").splitlines()
    assert ".assay/journal/b1/000001.jsonl" in files and "debug.log" not in files


def test_a_takeover_fences_the_old_holder_and_its_push_writes_nothing(
    forge: Forge, tmp_path: Path
) -> None:
    old = BranchSync(forge, "b1", workdir=tmp_path / "old", identity=ME)
    (old.checkout() / "a.txt").write_text("old 1")
    pushed = old.sync("old step 1")
    heir = BranchSync(forge, "b1", workdir=tmp_path / "heir", identity=HEIR)
    work = heir.checkout()
    assert heir.tip == pushed and (work / "a.txt").read_text() == "old 1"
    (work / "a.txt").write_text("heir 1")
    heirs = heir.sync("takeover")
    (old.workdir / "a.txt").write_text("old 2")
    with pytest.raises(Fenced, match="another holder") as raised:
        old.sync("old step 2")
    assert raised.value.code == 4
    assert forge.ls_refs("refs/heads/")[REF] == heirs
    # Checking out again makes the old work dir exactly the forge's tip.
    old.checkout()
    assert (old.workdir / "a.txt").read_text() == "heir 1" and old.tip == heirs


def test_two_fresh_starts_race_and_only_one_creates_the_branch(
    forge: Forge, tmp_path: Path
) -> None:
    first = BranchSync(forge, "b1", workdir=tmp_path / "a", identity=ME)
    second = BranchSync(forge, "b1", workdir=tmp_path / "b", identity=HEIR)
    for sync in (first, second):
        (sync.checkout() / "who.txt").write_text(sync.identity.email)
    winner = first.sync("start")
    with pytest.raises(Fenced):
        second.sync("start")
    assert forge.ls_refs("refs/heads/")[REF] == winner


def test_a_forge_without_main_cannot_start_a_branch(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "empty.git")], check=True)
    with (
        Forge(f"file://{tmp_path / 'empty.git'}", cache_dir=tmp_path / "c") as bare,
        pytest.raises(BadInput, match="no main"),
    ):
        BranchSync(bare, "b1", workdir=tmp_path / "w", identity=ME).checkout()


def test_checkout_fetches_only_its_own_branch(forge: Forge, tmp_path: Path) -> None:
    other = BranchSync(forge, "b10", workdir=tmp_path / "other", identity=HEIR)
    (other.checkout() / "big.bin").write_bytes(b"\0" * 1000)
    other.sync("another brief's work")
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    sync.checkout()
    assert _git(sync.workdir, "for-each-ref", "--format=%(refname)", "refs/remotes/") == (
        "refs/remotes/forge/main"
    )
    (sync.workdir / "a.txt").write_text("a")
    tip = sync.sync("step")
    assert sync.checkout() and sync.tip == tip
    # When the branch is deleted on the forge, the next checkout starts from main again.
    assert forge.push([RefUpdate(REF, None, expected=tip)]).ok
    sync.checkout()
    assert sync.tip is None and not (sync.workdir / "a.txt").exists()


def test_a_pushed_step_is_in_the_cache_so_reading_it_back_starts_no_fetch(
    forge: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate's view of a branch the desk just pushed (and the next checkout) reads the
    # tip from the cache: what the forge accepted was copied there after the push.
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=ME)
    (sync.checkout() / "src.py").write_text("x = 1\n")
    first = sync.sync("step 1")
    (sync.workdir / "src.py").write_text("x = 2\n")
    second = sync.sync("step 2")
    assert forge.has_commit(first) and forge.has_commit(second)
    assert [sha for sha, _ in forge.parent_lists(second)][-2:] == [first, second]
    with monkeypatch.context() as no_git:
        no_git.setenv("PATH", "")  # a git fetch could not even start
        assert forge.refresh([REF]) == {REF: second}


def test_a_branch_written_before_the_journal_ref_is_resumed_from_as_it_is(
    forge: Forge, tmp_path: Path
) -> None:
    # An older run: its journal rides on the branch, and there is no journal ref.
    main = forge.ls_refs("refs/heads/main")["refs/heads/main"]
    forge.refresh(["refs/heads/main"])
    names = forge.list_tree(main, "")
    files = dict(zip(names, forge.read_blobs([(main, n) for n in names]), strict=True))
    files |= {".assay/journal/b1/000001.jsonl": b'{"seq":1}\n', "a.txt": b"old"}
    legacy = forge.commit(files, parents=[main], message="b1: model", author=ME)
    assert forge.push([RefUpdate(REF, legacy, expected=None)]).ok
    sync = BranchSync(forge, "b1", workdir=tmp_path / "w", identity=HEIR)
    work = sync.checkout()
    assert sync.tip == legacy and sync.checkpoint is None
    assert (sync.journal_dir / "000001.jsonl").read_text() == '{"seq":1}\n'
    assert (work / "a.txt").read_text() == "old"
    (sync.journal_dir / "000001.jsonl").write_text('{"seq":1}\n{"seq":2}\n')
    code = sync.sync("takeover")
    refs = forge.ls_refs("refs/")
    # From its next push on: the checkpoints on the journal ref, the branch the code alone.
    assert refs[REF] == code and refs[JOURNAL] == sync.checkpoint
    assert _git(work, "rev-parse", f"{sync.checkpoint}~1") == legacy
    assert _git(work, "rev-parse", f"{code}~1") == legacy
    assert _git(work, "ls-tree", "-r", "--name-only", code, ".assay") == ""
    assert _git(work, "show", f"{code}:a.txt") == "old"
