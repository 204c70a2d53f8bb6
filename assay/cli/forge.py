"""``assay forge init``, ``settings``, ``serve`` and ``token``: make, set, serve and guard an
embedded forge."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from assay.cli.options import json_option, serve_options, serve_until_stopped
from assay.console import err, out, print_json
from assay.errors import BadInput
from assay.evidence.holdout import HoldoutPublicKey
from assay.evidence.keys import PublicKey, create_key, gate_key
from assay.evidence.trust import record_gate
from assay.forge import open_forge, principals
from assay.forge.connections import IDLE_TIMEOUT_S, MAX_CONNECTIONS
from assay.forge.embedded import init_forge, is_forge
from assay.forge.serve import ForgeServer
from assay.forge.settings import (
    MAX_PUSHES_PER_MINUTE,
    read_settings,
    record_merge_budget,
    record_push_budget,
)

_pushes_option = click.option(
    "--pushes-per-minute",
    "pushes_per_minute",
    type=click.IntRange(min=0, max=MAX_PUSHES_PER_MINUTE),
    default=None,
    metavar="N",
    help="The push budget `assay forge serve` enforces: pushes that move refs a minute, "
    "more wait their turn (0: unlimited, the default).",
)

_merges_option = click.option(
    "--merges-per-minute",
    "merges_per_minute",
    type=click.IntRange(min=0, max=MAX_PUSHES_PER_MINUTE),
    default=None,
    metavar="N",
    help="The merge budget the gate keeps to: merges into main a minute, a batch being "
    "one; more wait their turn (0: unlimited, the default).",
)


@click.group("forge")
def forge_group() -> None:
    """Make and serve an embedded forge (a bare git repository that is a whole forge)."""


@forge_group.command("init")
@click.argument("path", type=click.Path(path_type=Path))
@_pushes_option
@_merges_option
@json_option
def init_command(
    path: Path, pushes_per_minute: int | None, merges_per_minute: int | None, as_json: bool
) -> None:
    """Create an embedded forge at PATH: main with briefs/ and .gitattributes.

    Also makes the gate's signing key pair, outside the forge, in the gate's state
    directory ($ASSAY_GATE_STATE, else ~/.local/state/assay-gate; mode 0700), unless one is
    there already, and records its public half in the forge's config, so that anyone
    reading the forge can check evidence and only the gate can sign it.
    --pushes-per-minute and --merges-per-minute record a push and a merge budget there too
    (see `assay forge settings`).
    """
    made = init_forge(path)
    key_file, public = _record_gate_key(made, replace=False)
    if pushes_per_minute is not None or merges_per_minute is not None:
        with open_forge(str(made)) as local:
            if pushes_per_minute is not None:
                record_push_budget(local, pushes_per_minute)
            if merges_per_minute is not None:
                record_merge_budget(local, merges_per_minute)
    if as_json:
        print_json(
            {
                "status": "ok",
                "code": 0,
                "path": str(made),
                "url": f"file://{made}",
                "gate_key": str(key_file),
                "gate_public_key": public.text,
                "gate_key_fingerprint": public.fingerprint,
                "pushes_per_minute": pushes_per_minute or 0,
                "merges_per_minute": merges_per_minute or 0,
            }
        )
    else:
        out.print(f"forge ready at {made}", markup=False, highlight=False)
        out.print(
            f"gate key {public.fingerprint} at {key_file} (only the gate's user may read it)",
            markup=False,
            highlight=False,
        )


def _record_gate_key(forge: Path, *, replace: bool) -> tuple[Path, PublicKey]:
    """Make the gate's key (unless there is one) and record its public half in ``forge``'s
    config, through the local filesystem: the admin's path."""
    key_file = create_key()
    gate = gate_key()
    assert gate is not None  # create_key made the file gate_key reads (or an env key won)
    with open_forge(str(forge)) as local:
        record_gate(local, gate, replace=replace)
    return key_file, gate.public


@forge_group.command("settings")
@click.argument("path", type=click.Path(path_type=Path))
@_pushes_option
@_merges_option
@json_option
def settings_command(
    path: Path, pushes_per_minute: int | None, merges_per_minute: int | None, as_json: bool
) -> None:
    """Show the settings record of the embedded forge at PATH; set its push and merge budgets.

    The record (refs/assay/config) is written by the forge's admin, through the local
    filesystem. With --pushes-per-minute N, `assay forge serve` takes at most N pushes that
    move refs in any minute; a push over the budget waits for its turn (it is not refused),
    and a server already running reads the new budget at its next push. With
    --merges-per-minute N, the gate (`assay merge`) moves main at most N times a minute; a
    batch of briefs merged together is one.
    """
    if not is_forge(path):
        raise BadInput(f"{path}: not a local embedded forge (assay forge init makes one)")
    with open_forge(str(path.resolve())) as local:
        changed = False
        if pushes_per_minute is not None:
            changed = record_push_budget(local, pushes_per_minute)
        if merges_per_minute is not None:
            changed = record_merge_budget(local, merges_per_minute) or changed
        current = read_settings(local)
    if as_json:
        print_json({"status": "ok", "code": 0, "changed": changed, **current.to_json()})
        return
    key = current.gate_public_key
    budget, merges = current.pushes_per_minute, current.merges_per_minute
    for line in (
        f"gate key: {key.fingerprint if key else '(none)'}",
        f"push budget: {f'{budget} a minute' if budget else 'unlimited'}",
        f"merge budget: {f'{merges} a minute' if merges else 'unlimited'}",
    ):
        out.print(line, markup=False, highlight=False)


@forge_group.command("gate-key")
@click.argument("path", type=click.Path(path_type=Path), required=False)
@click.option(
    "--replace",
    is_flag=True,
    help="Trust this gate's key on PATH instead of the one recorded there.",
)
@json_option
def gate_key_command(path: Path | None, replace: bool, as_json: bool) -> None:
    """Show the gate's public key, making the key pair when there is none.

    With PATH (an embedded forge's directory), also record it in that forge's config; a
    different key already recorded is refused (exit 77) unless --replace. The private key
    stays in the gate's state directory ($ASSAY_GATE_STATE, else
    ~/.local/state/assay-gate): on GitHub, store that file's one line as the repository
    secret ASSAY_EVIDENCE_KEY and the public key as the variable ASSAY_GATE_PUBLIC_KEY.
    """
    if path is not None and not is_forge(path):
        raise BadInput(f"{path}: not a local embedded forge (assay forge init makes one)")
    key_file = create_key()
    gate = gate_key()
    assert gate is not None  # create_key made the file gate_key reads (or an env key won)
    if path is not None:
        _record_gate_key(path.resolve(), replace=replace)
    public, holdout = gate.public, HoldoutPublicKey.of(gate)
    if as_json:
        print_json(
            {
                "status": "ok",
                "code": 0,
                "gate_key": str(key_file),
                "public_key": public.text,
                "fingerprint": public.fingerprint,
                "holdout_public_key": holdout.text,
                "recorded": str(path) if path is not None else None,
            }
        )
    else:
        out.print(public.text, markup=False, highlight=False)
        err.print(
            f"gate key {public.fingerprint} at {key_file}"
            + (f", recorded in {path}" if path is not None else ""),
            markup=False,
            highlight=False,
        )


@forge_group.command("serve")
@click.argument("path", type=click.Path(path_type=Path))
@serve_options
@click.option(
    "--max-connections",
    default=MAX_CONNECTIONS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Requests served at once; more wait their turn.",
)
@click.option(
    "--idle-timeout",
    default=IDLE_TIMEOUT_S,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a client may be silent (or take over its headers) before it is dropped.",
)
@click.option(
    "--anonymous-read",
    is_flag=True,
    help="Let fetches through without a token (pushes still need one).",
)
@json_option
def serve_command(
    path: Path,
    host: str,
    port: int,
    max_connections: int,
    idle_timeout: float,
    anonymous_read: bool,
    as_json: bool,
) -> None:
    """Serve the forge at PATH over smart HTTP (pushes enabled) until interrupted.

    The first line printed is the URL to pass to --forge. A forge with tokens
    (`assay forge token add`) refuses every request without one; a forge without any is
    open to anyone who reaches the server, and says so first on stderr.
    """
    server = ForgeServer(
        path,
        host=host,
        port=port,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        anonymous_read=anonymous_read,
    )
    if server.tokens.open:
        err.print(
            "no tokens: anyone who reaches this server may write", markup=False, highlight=False
        )
    if as_json:
        print_json({"status": "ok", "code": 0, "url": server.url, "port": server.port})
    else:
        sys.stdout.write(server.url + "\n")
        sys.stdout.flush()
        err.print(f"serving {server.path} (Ctrl-C stops)", markup=False, highlight=False)
    serve_until_stopped(server)


@forge_group.group("token")
def token_group() -> None:
    """Tokens of an embedded forge's server: who may read and write, and in which role."""


def _forge_path(forge: str | None) -> Path:
    if not forge:
        raise BadInput(
            "no forge given: pass --forge PATH (a local embedded forge) or set ASSAY_FORGE"
        )
    path = Path(forge.removeprefix("file://")).expanduser().resolve()
    if not is_forge(path):
        raise BadInput(f"--forge {forge!r}: not a local embedded forge (tokens live beside it)")
    return path


_forge_path_option = click.option(
    "--forge",
    "forge",
    envvar="ASSAY_FORGE",
    default=None,
    metavar="PATH",
    help="The embedded forge's directory (default: $ASSAY_FORGE).",
)


@token_group.command("add")
@click.argument("name")
@click.option(
    "--role",
    required=True,
    metavar="|".join(principals.ROLES),
    help="What the token may write (docs/forge.md, Who may write what).",
)
@_forge_path_option
@json_option
def token_add_command(name: str, role: str, forge: str | None, as_json: bool) -> None:
    """Make a token NAME with ROLE and print it, once: only its digest is kept."""
    token = principals.add_token(_forge_path(forge), name, role)
    if as_json:
        print_json({"status": "ok", "code": 0, "name": name, "role": role, "token": token})
    else:
        sys.stdout.write(token + "\n")
        err.print(
            f"token {name} ({role}): shown once; clients read it from ASSAY_FORGE_TOKEN",
            markup=False,
            highlight=False,
        )


@token_group.command("list")
@_forge_path_option
@json_option
def token_list_command(forge: str | None, as_json: bool) -> None:
    """List the forge's token names and roles (never a token or its digest)."""
    found = principals.list_tokens(_forge_path(forge))
    if as_json:
        rows = [{"name": p.name, "role": p.role} for p in found]
        print_json({"status": "ok", "code": 0, "tokens": rows})
        return
    for principal in found:
        out.print(f"{principal.name}\t{principal.role}", markup=False, highlight=False)


@token_group.command("revoke")
@click.argument("name")
@_forge_path_option
@json_option
def token_revoke_command(name: str, forge: str | None, as_json: bool) -> None:
    """Remove the token NAME; requests bearing it are refused from then on."""
    principals.revoke_token(_forge_path(forge), name)
    if as_json:
        print_json({"status": "ok", "code": 0, "name": name, "revoked": True})
    else:
        out.print(f"revoked {name}", markup=False, highlight=False)


def register(root: click.Group) -> None:
    """Add ``assay forge`` to the root group."""
    root.add_command(forge_group)
