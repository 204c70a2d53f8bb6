"""Who may write what on a served forge: tokens, 401s and the push rule per role.

Every attack goes through real git (or Assay's own clients) against a real
:class:`ForgeServer` on loopback, and checks the forge's refs afterwards: a refused push
moved nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.errors import Denied
from assay.forge import ForgeServer, open_forge, principals
from assay.forge.embedded import init_forge, ref_tips
from assay.plumbing import ASSAY_IDENTITY, RefUpdate, config_env
from tests.conftest import AssayRunner, assay_argv, assay_env
from tests.forge.serving import request

CLAIM = "refs/assay/claims/b1"
EVIDENCE = "refs/assay/evidence/b1"
MAIN = "refs/heads/main"


def git(
    *args: str, cwd: Path | None = None, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    """git, sending ``token`` as a plain git client would (http.extraHeader), here through
    git's config environment rather than argv."""
    env = {**os.environ, **ASSAY_IDENTITY.env(), "GIT_TERMINAL_PROMPT": "0"}
    if token is not None:
        env.update(config_env({"http.extraHeader": f"Authorization: Bearer {token}"}))
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


class Guarded:
    """A served forge with one token per role, and a clone to make commits in."""

    def __init__(self, root: Path, *, anonymous_read: bool = False) -> None:
        self.path = init_forge(root / "forge.git")
        self.tokens = {
            role: principals.add_token(self.path, f"t-{role}", role) for role in principals.ROLES
        }
        self.server = ForgeServer(self.path, anonymous_read=anonymous_read).start()
        self.url = self.server.url
        self.work = root / "work"
        done = git("clone", "--quiet", self.url, str(self.work), token=self.tokens["admin"])
        assert done.returncode == 0, done.stderr

    def commit(self, message: str, parent: str = "HEAD") -> str:
        tree = git("rev-parse", f"{parent}^{{tree}}", cwd=self.work).stdout.strip()
        done = git("commit-tree", tree, "-p", parent, "-m", message, cwd=self.work)
        return done.stdout.strip()

    def claim(self, message: str, parent: str = "HEAD", *, desk: str = "t-desk") -> str:
        """A commit on ``parent`` whose tree is one ``claim.json`` naming ``desk``."""
        record = json.dumps({"v": 1, "brief": "b1", "desk": desk, "holder": message})
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"],
            cwd=self.work,
            input=record,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        tree = subprocess.run(
            ["git", "mktree"],
            cwd=self.work,
            input=f"100644 blob {blob}\tclaim.json\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        done = git("commit-tree", tree, "-p", parent, "-m", message, cwd=self.work)
        return done.stdout.strip()

    def push(self, role: str | None, *specs: str) -> subprocess.CompletedProcess[str]:
        token = self.tokens[role] if role else None
        return git("push", "--porcelain", self.url, *specs, cwd=self.work, token=token)

    def refs(self) -> dict[str, str]:
        return ref_tips(self.path, ("refs/",))


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Guarded]:
    forge = Guarded(tmp_path)
    yield forge
    forge.server.stop()


# ---------------------------------------------------------------------- the token CLI


def test_token_add_list_revoke_through_the_cli(run_assay: AssayRunner, tmp_path: Path) -> None:
    forge = init_forge(tmp_path / "forge.git")
    added = run_assay(
        "forge", "token", "add", "d1", "--role", "desk", "--forge", str(forge), "--json"
    )
    assert added.returncode == 0, added.stderr
    shown = json.loads(added.stdout)
    assert (shown["name"], shown["role"]) == ("d1", "desk")
    token = shown["token"]
    assert len(token) >= 40
    path = forge / principals.TOKENS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text()  # stored hashed

    plain = run_assay("forge", "token", "add", "g1", "--role", "gate", "--forge", str(forge))
    assert plain.returncode == 0, plain.stderr
    second = plain.stdout.strip()

    listed = run_assay("forge", "token", "list", "--forge", str(forge), "--json")
    assert json.loads(listed.stdout)["tokens"] == [
        {"name": "d1", "role": "desk"},
        {"name": "g1", "role": "gate"},
    ]
    table = run_assay("forge", "token", "list", "--forge", str(forge))
    for said in (listed, table):
        assert token not in said.stdout + said.stderr and second not in said.stdout + said.stderr
        assert principals.read_tokens(forge)[0]["sha256"] not in said.stdout  # type: ignore[index]

    revoked = run_assay("forge", "token", "revoke", "d1", "--forge", str(forge))
    assert revoked.returncode == 0, revoked.stderr
    assert [p.name for p in principals.list_tokens(forge)] == ["g1"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("add", "d1", "--role", "root"), "--role"),
        (("add", "../x", "--role", "desk"), "token name"),
        (("revoke", "nobody"), "nobody"),
    ],
)
def test_bad_token_input_is_bad_input_naming_it(
    run_assay: AssayRunner, tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    forge = init_forge(tmp_path / "forge.git")
    done = run_assay("forge", "token", *args, "--forge", str(forge))
    assert done.returncode == 65, done.stderr
    assert named in done.stderr


def test_a_duplicate_name_or_a_path_that_is_no_forge_is_bad_input(
    run_assay: AssayRunner, tmp_path: Path
) -> None:
    forge = init_forge(tmp_path / "forge.git")
    principals.add_token(forge, "d1", "desk")
    again = run_assay("forge", "token", "add", "d1", "--role", "gate", "--forge", str(forge))
    assert again.returncode == 65 and "d1" in again.stderr
    nowhere = run_assay("forge", "token", "list", "--forge", str(tmp_path / "none"))
    assert nowhere.returncode == 65 and "--forge" in nowhere.stderr
    (forge / principals.TOKENS_FILE).write_text("{not json")
    broken = run_assay("forge", "token", "list", "--forge", str(forge))
    assert broken.returncode == 65 and principals.TOKENS_FILE in broken.stderr


# ---------------------------------------------------------------------- authentication


def test_no_token_is_401_for_fetch_and_push(guarded: Guarded) -> None:
    before = guarded.refs()
    for service in ("git-upload-pack", "git-receive-pack"):
        status, _ = request(guarded.server, "GET", f"/forge.git/info/refs?service={service}")
        assert status == 401
    conn_status, _ = request(
        guarded.server,
        "POST",
        "/forge.git/git-upload-pack",
        b"0000",
        **{"Content-Type": "application/x-git-upload-pack-request", "Authorization": "Bearer nope"},
    )
    assert conn_status == 401
    fetched = git("ls-remote", guarded.url)
    assert fetched.returncode != 0
    assert (
        "401" in fetched.stderr
        or "Authentication" in fetched.stderr
        or "Username" in fetched.stderr
    )
    pushed = guarded.push(None, f"{guarded.commit('x', 'HEAD')}:{MAIN}")
    assert pushed.returncode != 0
    assert guarded.refs() == before


def test_the_401_says_bearer(guarded: Guarded) -> None:
    import http.client

    conn = http.client.HTTPConnection(guarded.server.host, guarded.server.port, timeout=30)
    try:
        conn.request("GET", "/forge.git/info/refs?service=git-upload-pack")
        reply = conn.getresponse()
        assert reply.status == 401
        assert (reply.getheader("WWW-Authenticate") or "").startswith("Bearer")
    finally:
        conn.close()


def test_a_revoked_token_is_refused_by_the_running_server(guarded: Guarded) -> None:
    assert git("ls-remote", guarded.url, token=guarded.tokens["desk"]).returncode == 0
    principals.revoke_token(guarded.path, "t-desk")
    refused = git("ls-remote", guarded.url, token=guarded.tokens["desk"])
    assert refused.returncode != 0
    assert git("ls-remote", guarded.url, token=guarded.tokens["gate"]).returncode == 0


def test_anonymous_read_lets_a_clone_through_and_not_a_push(tmp_path: Path) -> None:
    forge = Guarded(tmp_path, anonymous_read=True)
    try:
        cloned = git("clone", "--quiet", forge.url, str(tmp_path / "anon"))
        assert cloned.returncode == 0, cloned.stderr
        before = forge.refs()
        pushed = git("push", forge.url, f"{forge.commit('anon')}:{MAIN}", cwd=tmp_path / "anon")
        assert pushed.returncode != 0
        assert forge.refs() == before
    finally:
        forge.server.stop()


def test_a_forge_without_tokens_stays_open(tmp_path: Path) -> None:
    path = init_forge(tmp_path / "forge.git")
    with ForgeServer(path) as server:
        work = tmp_path / "work"
        assert git("clone", "--quiet", server.url, str(work)).returncode == 0
        tree = git("rev-parse", "HEAD^{tree}", cwd=work).stdout.strip()
        sha = git("commit-tree", tree, "-p", "HEAD", "-m", "open", cwd=work).stdout.strip()
        assert git("push", server.url, f"{sha}:{MAIN}", cwd=work).returncode == 0
        assert ref_tips(path, (MAIN,))[MAIN] == sha


def test_serve_says_first_when_anyone_may_write(tmp_path: Path) -> None:
    path = init_forge(tmp_path / "forge.git")
    for tokens, warned in ((False, True), (True, False)):
        if tokens:
            principals.add_token(path, "a1", "admin")
        proc = subprocess.Popen(
            assay_argv("forge", "serve", str(path), "--port", "0"),
            env=assay_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
        assert first.startswith("no tokens: anyone who reaches this server may write") is warned


# ---------------------------------------------------------------------- the push rule


def test_a_desk_may_not_write_main_nor_evidence(guarded: Guarded) -> None:
    before = guarded.refs()
    pushed = guarded.push("desk", f"{guarded.commit('desk main')}:{MAIN}")
    assert pushed.returncode != 0
    assert "role desk may not write refs/heads/main" in pushed.stdout + pushed.stderr
    pushed = guarded.push("desk", f"{guarded.commit('desk ev')}:{EVIDENCE}")
    assert "role desk may not write refs/assay/evidence/b1" in pushed.stdout + pushed.stderr
    # One refused command refuses the push whole: the claim beside it did not move.
    both = guarded.push("desk", f"{guarded.claim('c')}:{CLAIM}", f"{guarded.commit('m')}:{MAIN}")
    assert both.returncode != 0
    assert guarded.refs() == before


def test_a_desk_moves_claims_and_its_branch_but_never_deletes_or_forces_a_claim(
    guarded: Guarded,
) -> None:
    first = guarded.claim("claim 1")
    assert guarded.push("desk", f"{first}:{CLAIM}").returncode == 0
    second = guarded.claim("claim 2", first)
    assert guarded.push("desk", f"{second}:{CLAIM}").returncode == 0
    branch = guarded.commit("work")
    assert guarded.push("desk", f"{branch}:refs/heads/assay/b1").returncode == 0
    before = guarded.refs()
    assert before[CLAIM] == second

    deleted = guarded.push("desk", f":{CLAIM}")
    assert deleted.returncode != 0 and f"only admin deletes {CLAIM}" in deleted.stdout
    forced = guarded.push("desk", f"+{guarded.claim('rewritten', first)}:{CLAIM}")
    assert forced.returncode != 0
    assert f"role desk may not force {CLAIM}" in forced.stdout
    assert guarded.refs() == before


def test_a_desk_writes_a_briefs_branch_and_review_only_while_its_claim_names_it(
    guarded: Guarded,
) -> None:
    branch, review = "refs/heads/assay/b1", "refs/assay/reviews/b1"
    # No claim at all: a desk may not start a branch (or a review) for a brief it never took.
    for ref in (branch, review):
        alone = guarded.push("desk", f"{guarded.commit('unclaimed')}:{ref}")
        assert alone.returncode != 0
        assert "the brief has no claim" in alone.stdout + alone.stderr
    # Another desk's claim (written by admin): still refused, naming that desk.
    assert guarded.push("admin", f"{guarded.claim('c', desk='d2')}:{CLAIM}").returncode == 0
    other = guarded.push("desk", f"{guarded.commit('theirs')}:{branch}")
    assert "a claim naming desk 'd2'" in other.stdout + other.stderr
    assert branch not in guarded.refs()
    # Its own claim, taken in the same atomic push as the branch: allowed.
    taken = guarded.push(
        "desk",
        "--atomic",
        f"{guarded.claim('mine', guarded.refs()[CLAIM])}:{CLAIM}",
        f"{guarded.commit('work')}:{branch}",
    )
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert branch in guarded.refs()


def test_a_desk_writes_a_briefs_journal_ref_only_while_its_claim_names_it(
    guarded: Guarded,
) -> None:
    branch, journal = "refs/heads/assay/b1", "refs/assay/journal/b1"
    alone = guarded.push("desk", f"{guarded.commit('unclaimed')}:{journal}")
    assert alone.returncode != 0
    assert "the brief has no claim" in alone.stdout + alone.stderr
    assert guarded.push("admin", f"{guarded.claim('c', desk='d2')}:{CLAIM}").returncode == 0
    # Another desk's claim: the atomic push of branch and journal is refused whole.
    other = guarded.push(
        "desk",
        "--atomic",
        f"{guarded.commit('code')}:{branch}",
        f"{guarded.commit('checkpoint')}:{journal}",
    )
    assert "a claim naming desk 'd2'" in other.stdout + other.stderr
    assert branch not in guarded.refs() and journal not in guarded.refs()
    taken = guarded.push(
        "desk",
        "--atomic",
        f"{guarded.claim('mine', guarded.refs()[CLAIM])}:{CLAIM}",
        f"{guarded.commit('code')}:{branch}",
        f"{guarded.commit('checkpoint')}:{journal}",
    )
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert branch in guarded.refs() and journal in guarded.refs()


def test_a_desk_writes_only_claims_naming_itself(guarded: Guarded) -> None:
    before = guarded.refs()
    other = guarded.push("desk", f"{guarded.claim('as d2', desk='d2')}:{CLAIM}")
    assert other.returncode != 0
    assert "desk t-desk may not write a claim naming desk 'd2'" in other.stdout
    bare = guarded.push("desk", f"{guarded.commit('no record')}:{CLAIM}")
    assert "desk t-desk may not write a claim naming no desk" in bare.stdout
    assert guarded.refs() == before
    # The sweeper marks any desk's claim (forward): the desk rule is the desk's alone.
    mine = guarded.claim("mine")
    assert guarded.push("desk", f"{mine}:{CLAIM}").returncode == 0
    stuck = guarded.claim("stuck", mine, desk="t-desk")
    assert guarded.push("sweeper", f"{stuck}:{CLAIM}").returncode == 0


def test_the_rule_holds_on_the_receive_pack_path_too(guarded: Guarded) -> None:
    # A forge setting the in-process path leaves alone: every push goes to receive-pack.
    subprocess.run(
        ["git", f"--git-dir={guarded.path}", "config", "receive.fsckObjects", "true"], check=True
    )
    before = guarded.refs()
    pushed = guarded.push("desk", f"{guarded.commit('desk main')}:{MAIN}")
    assert "role desk may not write refs/heads/main" in pushed.stdout
    first = guarded.claim("claim 1")
    assert guarded.push("desk", f"{first}:{CLAIM}").returncode == 0
    forced = guarded.push("desk", f"+{guarded.claim('other claim')}:{CLAIM}")
    assert forced.returncode != 0
    other = guarded.push("desk", f"{guarded.claim('as d2', first, desk='d2')}:{CLAIM}")
    assert "desk t-desk may not write a claim naming desk 'd2'" in other.stdout
    assert forced.returncode != 0
    after = guarded.refs()
    assert after.pop(CLAIM) == first
    assert after == before
    assert guarded.server.started["receive-pack"] >= 1


def test_a_large_push_by_a_desk_goes_through_git_probe_first(guarded: Guarded) -> None:
    # Over http.postBuffer git first POSTs a lone flush, then the push chunked. The desk
    # holds the brief's claim: it writes a branch only then.
    assert guarded.push("desk", f"{guarded.claim('held')}:{CLAIM}").returncode == 0
    (guarded.work / "big.bin").write_bytes(os.urandom(1 << 20))
    git("add", "big.bin", cwd=guarded.work)
    git("commit", "-q", "-m", "big", cwd=guarded.work)
    sha = git("rev-parse", "HEAD", cwd=guarded.work).stdout.strip()
    pushed = git(
        "-c",
        "http.postBuffer=65536",
        "push",
        guarded.url,
        f"{sha}:refs/heads/assay/b1",
        cwd=guarded.work,
        token=guarded.tokens["desk"],
    )
    assert pushed.returncode == 0, pushed.stderr
    assert guarded.refs()["refs/heads/assay/b1"] == sha


def test_a_gate_writes_main_forward_and_only_admin_rewinds_it(guarded: Guarded) -> None:
    old = guarded.refs()[MAIN]
    ahead = guarded.commit("merge")
    pushed = guarded.push("gate", f"{ahead}:{MAIN}", f"{guarded.commit('ev')}:{EVIDENCE}")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert guarded.refs()[MAIN] == ahead
    rewound = guarded.push("gate", f"+{old}:{MAIN}")
    assert rewound.returncode != 0 and "role gate may not force refs/heads/main" in rewound.stdout
    assert guarded.push("gate", f":{EVIDENCE}").returncode != 0
    assert guarded.refs()[MAIN] == ahead
    assert guarded.push("admin", f"+{old}:{MAIN}", f":{EVIDENCE}").returncode == 0
    assert guarded.refs()[MAIN] == old and EVIDENCE not in guarded.refs()


def test_only_admin_writes_the_forge_config_where_the_gate_key_is_trusted(
    guarded: Guarded,
) -> None:
    # A desk that could replace the gate's public key could sign its own evidence.
    config = "refs/assay/config"
    for role in ("desk", "gate", "sweeper", "person"):
        pushed = guarded.push(role, f"{guarded.commit(f'{role} config')}:{config}")
        assert pushed.returncode != 0
        assert f"role {role} may not write {config}" in pushed.stdout + pushed.stderr
    assert config not in guarded.refs()
    assert guarded.push("admin", f"{guarded.commit('admin config')}:{config}").returncode == 0
    assert config in guarded.refs()


def test_a_person_seals_holdout_rows_and_a_desk_may_not_touch_them(guarded: Guarded) -> None:
    holdout = "refs/assay/holdout/b1"
    refused = guarded.push("desk", f"{guarded.commit('desk holdout')}:{holdout}")
    assert f"role desk may not write {holdout}" in refused.stdout + refused.stderr
    assert guarded.push("person", f"{guarded.commit('rows')}:{holdout}").returncode == 0
    assert guarded.push("desk", f":{holdout}").returncode != 0  # nor delete them
    assert holdout in guarded.refs()


def test_person_and_sweeper_keep_to_their_refs(guarded: Guarded) -> None:
    events = "refs/assay/events/b1"
    assert guarded.push("person", f"{guarded.commit('approve')}:{events}").returncode == 0
    assert (
        "role person may not write"
        in guarded.push("person", f"{guarded.commit('c')}:{CLAIM}").stdout
    )
    status = "refs/assay/status/b1"
    assert guarded.push("sweeper", f"{guarded.commit('st')}:{status}").returncode == 0
    made = guarded.push("sweeper", f"{guarded.commit('c')}:{CLAIM}")
    assert "role sweeper may only mark existing claims" in made.stdout
    assert (
        "role sweeper may not write"
        in guarded.push("sweeper", f"{guarded.commit('e')}:refs/assay/events/b2").stdout
    )
    assert guarded.push("sweeper", f":{status}").returncode == 0
    assert status not in guarded.refs()


# ---------------------------------------------------------------------- Assay's clients


def test_assay_clients_send_ASSAY_FORGE_TOKEN(
    guarded: Guarded, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ASSAY_FORGE_TOKEN", raising=False)
    with open_forge(guarded.url, cache_dir=tmp_path / "c0") as forge, pytest.raises(Denied):
        forge.ls_refs("refs/heads/")
    # Every git Assay starts goes through a shim that notes its argv and config values.
    shims, log = tmp_path / "shims", tmp_path / "git.log"
    shims.mkdir()
    real = shutil.which("git")
    (shims / "git").write_text(
        f'#!/bin/sh\nprintf "argv %s\\n" "$*" >> {log}\n'
        f'env | grep "^GIT_CONFIG_VALUE_" >> {log}\nexec {real} "$@"\n'
    )
    (shims / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    token = guarded.tokens["desk"]
    monkeypatch.setenv("ASSAY_FORGE_TOKEN", token)
    with open_forge(guarded.url, cache_dir=tmp_path / "c1") as forge:
        main = forge.refresh([MAIN])[MAIN]  # in process (ls-refs, fetch)
        assert forge.fetch(MAIN)[MAIN] == main  # git, the token in its config environment
        claim = forge.commit(
            {"claim.json": b'{"desk": "t-desk"}'},
            parents=[main],
            message="claim",
            author=ASSAY_IDENTITY,
        )
        assert forge.push([RefUpdate(CLAIM, claim, expected=None)]).ok
        refused = forge.push([RefUpdate(MAIN, claim, expected=main)])
        assert not refused.ok
    assert guarded.refs()[CLAIM] == claim and guarded.refs()[MAIN] == main
    lines = log.read_text().splitlines()
    argv = [line for line in lines if line.startswith("argv ")]
    assert any(" fetch " in line for line in argv)
    assert not any(token in line for line in argv)
    assert f"Authorization: Bearer {token}" in "\n".join(lines)  # the environment path


def test_the_cli_reads_the_token_from_the_environment_and_never_prints_it(
    guarded: Guarded, run_assay: AssayRunner
) -> None:
    token = guarded.tokens["desk"]
    without = run_assay("claim", "list", "--forge", guarded.url)
    assert without.returncode == 77, without.stderr
    done = run_assay(
        "claim", "list", "--forge", guarded.url, "--json", env={"ASSAY_FORGE_TOKEN": token}
    )
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout + done.stderr


def test_claims_made_by_the_claim_store_pass_the_desk_and_sweeper_rules(
    guarded: Guarded, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from datetime import timedelta

    from assay.claims.record import now_utc
    from assay.claims.store import ClaimStore
    from assay.errors import AssayError

    monkeypatch.setenv("ASSAY_FORGE_TOKEN", guarded.tokens["desk"])
    with open_forge(guarded.url, cache_dir=tmp_path / "c") as forge:
        store = ClaimStore(forge)
        store.renew(store.acquire("b1", "t-desk", lease_s=60))
        with pytest.raises(AssayError):
            store.acquire("b2", "d2", lease_s=60)  # as another desk: the server refuses
        record = store.get("b1")
    assert record is not None and record.desk == "t-desk"
    assert "refs/assay/claims/b2" not in guarded.refs()
    monkeypatch.setenv("ASSAY_FORGE_TOKEN", guarded.tokens["sweeper"])
    later = now_utc() + timedelta(hours=1)
    with open_forge(guarded.url, cache_dir=tmp_path / "s") as forge:
        sweeper = ClaimStore(forge, clock=lambda: later)
        seen = sweeper.get("b1")  # read through the sweeper's own forge
        assert seen is not None
        stuck = sweeper.mark_stuck(seen, by="sweeper", note="expired")
    assert stuck.state == "stuck"
    assert guarded.refs()[CLAIM] == stuck.sha


def test_an_unprivileged_client_is_held_to_the_same_rules(guarded: Guarded) -> None:
    # CI runs as root: the client side then runs as nobody (as whoever runs the tests else).
    import tempfile

    place = Path(tempfile.mkdtemp(prefix="assay-nobody-"))
    place.chmod(0o777)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    prefix = as_nobody if os.geteuid() == 0 and shutil.which("setpriv") else []

    def client(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(place),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            **ASSAY_IDENTITY.env(),
        }
        if token is not None:
            env.update(config_env({"http.extraHeader": f"Authorization: Bearer {token}"}))
        return subprocess.run(
            [*prefix, "git", *args],
            cwd=place,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    try:
        desk = guarded.tokens["desk"]
        assert client("ls-remote", guarded.url).returncode != 0
        assert client("clone", "-q", guarded.url, "w", token=desk).returncode == 0
        work = str(place / "w")
        assert client("-C", work, "commit", "-q", "--allow-empty", "-m", "x").returncode == 0
        main = client("-C", work, "push", "--porcelain", "origin", f"HEAD:{MAIN}", token=desk)
        assert "role desk may not write refs/heads/main" in main.stdout
        held = guarded.push("desk", f"{guarded.claim('held')}:refs/assay/claims/b9")
        assert held.returncode == 0, held.stdout + held.stderr  # a branch needs its claim
        branch = client("-C", work, "push", "origin", "HEAD:refs/heads/assay/b9", token=desk)
        assert branch.returncode == 0, branch.stderr
        assert "refs/heads/assay/b9" in guarded.refs()
    finally:
        shutil.rmtree(place, ignore_errors=True)
