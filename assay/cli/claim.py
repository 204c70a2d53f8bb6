"""``assay claim``: acquire, renew, release, list and show claims on a forge."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from rich.table import Table

from assay.claims import ClaimRecord, ClaimStore
from assay.claims.record import now_utc
from assay.cli.options import forge_option, json_option, print_result
from assay.console import err, fitted_table, out
from assay.errors import Corrupt
from assay.forge import open_forge

DEFAULT_LEASE_S = 300.0


def _skew_option(fn: Any) -> Any:
    return click.option(
        "--skew",
        type=float,
        default=None,
        envvar="ASSAY_CLAIM_SKEW",
        metavar="SECONDS",
        help="Clock-skew allowance added to every lease (default 30; $ASSAY_CLAIM_SKEW).",
    )(fn)


def _store(forge: str | None, skew: float | None) -> ClaimStore:
    return ClaimStore(open_forge(forge), skew_s=skew)


def _row(store: ClaimStore, record: ClaimRecord, now: datetime) -> dict[str, Any]:
    deadline = record.expires_at(skew_s=store.skew_s)
    return {
        **record.to_json(),
        "ref": record.ref,
        "sha": record.sha,
        "status": record.status(skew_s=store.skew_s, now=now),
        "lease_age_s": round(record.lease_age(now), 3),
        "expires_in_s": None if deadline is None else round((deadline - now).total_seconds(), 3),
    }


def _say(text: str) -> None:
    err.print(text, markup=False, highlight=False)


@click.group("claim")
def claim_group() -> None:
    """Claims: which desk holds which brief, as git refs on the forge."""


@claim_group.command("acquire")
@click.argument("brief")
@click.option("--desk", required=True, help="The desk taking the brief.")
@click.option(
    "--lease",
    "lease_s",
    type=float,
    default=DEFAULT_LEASE_S,
    show_default=True,
    metavar="SECONDS",
    help="Lease length; renew within it or lose the claim.",
)
@click.option("--wake", is_flag=True, help="Also take a waiting claim (a waker resuming it).")
@_skew_option
@forge_option
@json_option
def acquire_command(
    brief: str,
    desk: str,
    lease_s: float,
    wake: bool,
    skew: float | None,
    forge: str | None,
    as_json: bool,
) -> None:
    """Take BRIEF for a desk; prints the holder token. Exit 3 when someone else holds it."""
    store = _store(forge, skew)
    claim = store.acquire(brief, desk, lease_s=lease_s, allow_waiting=wake)
    if as_json:
        row = _row(store, claim.record, now_utc())
        print_result(
            {"status": "ok", "code": 0, "holder": claim.holder, "fence": claim.fence, "claim": row}
        )
        return
    click.echo(claim.holder)
    _say(f"acquired {brief} for desk {desk} at fence {claim.fence} (lease {lease_s:g} s)")


@claim_group.command("renew")
@click.argument("brief")
@click.option("--holder", required=True, metavar="TOKEN", help="The token acquire printed.")
@_skew_option
@forge_option
@json_option
def renew_command(
    brief: str, holder: str, skew: float | None, forge: str | None, as_json: bool
) -> None:
    """Renew the lease on BRIEF. Exit 4 when TOKEN has been fenced out."""
    store = _store(forge, skew)
    claim = store.renew(store.adopt(brief, holder))
    if as_json:
        print_result({"status": "ok", "code": 0, "claim": _row(store, claim.record, now_utc())})
    else:
        _say(f"renewed {brief} (fence {claim.fence})")


@claim_group.command("release")
@click.argument("brief")
@click.option("--holder", required=True, metavar="TOKEN", help="The token acquire printed.")
@click.option("--done", is_flag=True, help="Close the brief: it is never claimable again.")
@forge_option
@json_option
def release_command(brief: str, holder: str, done: bool, forge: str | None, as_json: bool) -> None:
    """Give BRIEF back (or mark it done). Exit 4 when TOKEN has been fenced out."""
    store = _store(forge, None)
    claim = store.adopt(brief, holder)
    store.release(claim, done=done)
    state = "done" if done else "released"
    if as_json:
        print_result(
            {"status": "ok", "code": 0, "brief": brief, "state": state, "fence": claim.fence}
        )
    else:
        _say(f"{state} {brief} (fence {claim.fence})")


def _table(rows: list[dict[str, Any]]) -> Table:
    headers = (
        "brief",
        "status",
        "desk",
        "fence",
        "holder",
        "lease age",
        "expires in",
        "waiting for",
    )
    cells = [
        (
            row["brief"],
            row["status"],
            row["desk"],
            str(row["fence"]),
            row["holder"][:12],
            f"{row['lease_age_s']:.0f} s",
            "-" if row["expires_in_s"] is None else f"{row['expires_in_s']:.0f} s",
            row["waiting_for"] or "-",
        )
        for row in rows
    ]
    drop = ("lease age", "holder", "waiting for", "fence")
    return fitted_table(headers, cells, drop=drop, title=None, show_edge=False)


@claim_group.command("list")
@_skew_option
@forge_option
@json_option
def list_command(skew: float | None, forge: str | None, as_json: bool) -> None:
    """Every claim, its state, desk, fence and lease age (one fetch). Exit 6 if any is corrupt."""
    store = _store(forge, skew)
    records, broken = store.scan()
    now = now_utc()
    rows = [_row(store, record, now) for record in records]
    if as_json:
        print_result(
            {
                "status": "ok" if not broken else "corrupt",
                "code": 0 if not broken else Corrupt.code,
                "claims": rows,
                "corrupt": [e.message for e in broken],
            }
        )
        if broken:
            raise click.exceptions.Exit(Corrupt.code)
        return
    if rows:
        out.print(_table(rows))
    else:
        _say("no claims")
    if broken:
        if len(broken) > 1:
            for extra in broken[1:]:
                _say(f"assay: corrupt: {extra.message}")
        raise broken[0]


@claim_group.command("show")
@click.argument("brief")
@_skew_option
@forge_option
@json_option
def show_command(brief: str, skew: float | None, forge: str | None, as_json: bool) -> None:
    """One claim in full. Exit 6 when its record is corrupt (the message names the ref)."""
    store = _store(forge, skew)
    record = store.get(brief)
    if record is None:
        if as_json:
            print_result({"status": "ok", "code": 0, "brief": brief, "claim": None})
        else:
            _say(f"{brief} has no claim")
        return
    row = _row(store, record, now_utc())
    if as_json:
        print_result({"status": "ok", "code": 0, "brief": brief, "claim": row})
        return
    for key in (
        "brief",
        "status",
        "desk",
        "holder",
        "fence",
        "attempt",
        "since",
        "renewed_at",
        "lease_s",
        "lease_age_s",
        "expires_in_s",
        "waiting_for",
        "journal_head",
        "note",
        "ref",
        "sha",
    ):
        out.print(f"{key}: {row[key]}", markup=False, highlight=False)


def register(root: click.Group) -> None:
    """Add ``assay claim`` to the root group."""
    root.add_command(claim_group)
