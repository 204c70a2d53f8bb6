"""Which GitHub repository, through which endpoints, with which token.

``github:OWNER/REPO`` names the repository. The REST root is ``$GITHUB_API_URL`` (GitHub
Enterprise Server and the tests set it; default ``https://api.github.com``); the git endpoint
is ``$ASSAY_GITHUB_GIT_URL`` when given, else derived from the REST root
(``https://api.github.com`` -> ``https://github.com/OWNER/REPO.git``,
``https://HOST/api/v3`` -> ``https://HOST/OWNER/REPO.git``). The token is read from
``$GITHUB_TOKEN`` or from the variable named by ``--token-env`` / ``$ASSAY_GITHUB_TOKEN_ENV``
(else from the file ``$ASSAY_GITHUB_TOKEN_FILE`` names, removed once read);
it is never put in a URL, a command line, a message or a log: git gets it as an
``http.extraHeader`` scoped to the git host, in git's own environment.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from assay.errors import BadInput

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TOKEN_ENV = "GITHUB_TOKEN"
TOKEN_FILE_ENV = "ASSAY_GITHUB_TOKEN_FILE"
_SLUG = re.compile(r"(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/(?P<repo>[A-Za-z0-9._-]{1,100})")


@dataclass(frozen=True)
class GitHubTarget:
    """One repository on one GitHub (or Enterprise Server) instance."""

    owner: str
    repo: str
    api_url: str
    git_url: str
    token: str = field(repr=False)
    token_env: str = DEFAULT_TOKEN_ENV

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def spec(self) -> str:
        return f"github:{self.slug}"

    def git_config(self) -> dict[str, str]:
        """git settings that authenticate to the git host only (never logged; ``run_git``
        passes them in git's environment, never on its command line)."""
        parts = urlsplit(self.git_url)
        if parts.scheme not in ("http", "https"):
            return {}
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return {
            f"http.{parts.scheme}://{parts.netloc}/.extraHeader": f"Authorization: Basic {basic}"
        }


def parse_spec(spec: str) -> tuple[str, str]:
    """``github:OWNER/REPO`` -> ``(OWNER, REPO)``; ``BadInput`` naming ``--forge`` otherwise."""
    body = spec.strip().removeprefix("github:")
    body = body.removesuffix(".git")
    match = _SLUG.fullmatch(body)
    if not spec.strip().startswith("github:") or match is None or ".." in body:
        raise BadInput(f"--forge {spec!r}: expected github:OWNER/REPO")
    return match["owner"], match["repo"]


def git_url_for(api_url: str, owner: str, repo: str) -> str:
    """The smart-HTTP git URL of ``owner/repo`` on the instance whose REST root is ``api_url``."""
    parts = urlsplit(api_url.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput(f"GITHUB_API_URL {api_url!r}: expected an http(s) URL")
    if parts.netloc == "api.github.com":
        return f"https://github.com/{owner}/{repo}.git"
    root = parts.path
    if root.endswith("/api/v3"):
        root = root[: -len("/api/v3")]
    elif root:
        raise BadInput(
            f"GITHUB_API_URL {api_url!r}: cannot derive the git endpoint (set ASSAY_GITHUB_GIT_URL)"
        )
    return f"{parts.scheme}://{parts.netloc}{root}/{owner}/{repo}.git"


def resolve_target(
    spec: str,
    *,
    environ: Mapping[str, str] | None = None,
    token_env: str | None = None,
) -> GitHubTarget:
    """Everything needed to reach ``spec``, from the environment.

    ``BadInput`` names what is missing or malformed.
    """
    env = os.environ if environ is None else environ
    owner, repo = parse_spec(spec)
    api_url = (env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    git_url = env.get("ASSAY_GITHUB_GIT_URL") or git_url_for(api_url, owner, repo)
    name = token_env or env.get("ASSAY_GITHUB_TOKEN_ENV") or DEFAULT_TOKEN_ENV
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise BadInput(f"--token-env {name!r}: not an environment variable name")
    token = env.get(name, "")
    if not token and env.get(TOKEN_FILE_ENV):
        from assay.sandbox.shield import take_secret_file

        token = take_secret_file(env[TOKEN_FILE_ENV])  # a workflow's file, removed once read
    if not token:
        raise BadInput(f"--forge {spec}: no GitHub token in ${name} (set it, or pass --token-env)")
    return GitHubTarget(owner, repo, api_url, git_url, token, name)
