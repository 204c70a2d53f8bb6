"""A forge over HTTP(S) that makes sure the server speaks git before trusting "no refs".

git falls back to the "dumb" HTTP protocol when a server does not answer the smart-HTTP
handshake, and against any web server answering 200 it then reads an empty repository:
``claim list`` said "no claims" for a page that says "hello". So when a read finds no refs
at all, one probe asks for the smart-HTTP advertisement; anything else is
``ForgeUnavailable`` (69) "not a git forge". The probe costs nothing on a forge that has
refs, which is every forge Assay made (main always exists).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from assay.errors import Denied, ForgeUnavailable
from assay.forge.base import Forge

ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
_PROBE_TIMEOUT_S = 15.0
UNAUTHORIZED = (
    "the forge refused this request without a valid token (set ASSAY_FORGE_TOKEN to a token "
    "from `assay forge token add`)"
)


def speaks_git(
    url: str, *, timeout_s: float = _PROBE_TIMEOUT_S, headers: Mapping[str, str] | None = None
) -> bool:
    """Whether ``url`` answers git's smart-HTTP handshake (an upload-pack advertisement);
    ``headers``: the ones git would send it (a token). A 401 is ``Denied``."""
    probe = url.rstrip("/") + "/info/refs?service=git-upload-pack"
    request = urllib.request.Request(
        probe, headers={**(headers or {}), "Git-Protocol": "version=2"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            kind = str(reply.headers.get("Content-Type", ""))
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise Denied(f"{url}: {UNAUTHORIZED}") from None
        return False
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return kind.split(";")[0].strip() == ADVERTISEMENT


class HttpForge(Forge):
    """``Forge`` for ``http(s)://`` URLs: an empty answer is checked to come from git."""

    _checked = False

    def _require_git(self) -> None:
        if self._checked:
            return
        from assay.forge.lsrefs import extra_headers

        if not speaks_git(self.url, headers=extra_headers(self.url, self._config) or {}):
            raise ForgeUnavailable(
                f"--forge {self.display_url}: not a git forge (the server does not answer "
                "git's smart-HTTP handshake)"
            )
        self._checked = True

    def ls_refs(self, prefix: str = "refs/") -> dict[str, str]:
        refs = super().ls_refs(prefix)
        if not refs:
            self._require_git()
        return refs

    def fetch(self, refs: str | Sequence[str]) -> dict[str, str]:
        found = super().fetch(refs)
        if not found:
            self._require_git()
        return found
