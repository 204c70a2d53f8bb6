"""JavaScript's runners: node's own test runner, jest, vitest, bun, and package scripts.

- **node --test**: the files and folders named on its command (a file runs whatever its
  name; a folder is searched), else the working folder, searched by node's rules: in a
  ``test`` folder every ``.js``/``.cjs``/``.mjs`` file (and ``.ts``, which node 22 strips),
  elsewhere ``test.js``, ``test-*.js``, ``*.test.js``, ``*-test.js``, ``*_test.js`` (node 20
  reads a folder so; node 22's default globs say the same; a glob on the command is
  matched as node 22 would); the modules it preloads (``--import``, ``--require``);
- **jest**: its default ``testMatch`` (``__tests__/``, ``*.test.*``, ``*.spec.*``,
  ``test.js``), or main's ``testMatch``/``testRegex`` and setup files from a JSON
  configuration (``package.json``'s ``jest``, ``jest.config.json``); files named on the
  command; ``__mocks__/`` (a root one replaces a package without a word in the test) and
  ``__snapshots__/``;
- **vitest**: ``*.test.*`` and ``*.spec.*`` under its root (``--root``, ``--dir``), files
  named on the command, ``__mocks__/`` and ``__snapshots__/``; **bun test**: ``*.test.*``,
  ``*_test.*``, ``*.spec.*``, ``*_spec.*``;
- **npm, yarn, pnpm** (``test``, ``run NAME``, a script's name, ``exec``, ``npx``): the
  script main's ``package.json`` has under that name (with its ``pre``/``post`` scripts and
  the arguments given after it), discovered in turn, as ``make`` follows its recipe.

Every JS row pins ``package.json``, ``.npmrc`` (it can set ``node-options`` for every
script) and the yarn files at every level from the root down, and the configuration the
runners and their transformers read wherever it is under the working folder: jest, vitest
and vite configs, ``babel.config.*``, ``.babelrc*``, ``.swcrc``, ``tsconfig*.json``,
``jsconfig.json``.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from assay.evidence.discovery.python import MAX_DEPTH
from assay.evidence.discovery.tree import ancestors, inside, join, simple_commands

if TYPE_CHECKING:
    from assay.evidence.discovery.core import Discovery

JS_PROGRAMS = frozenset({"node", "npm", "yarn", "pnpm", "npx", "jest", "vitest", "bun", "bunx"})
# What the package managers and runners read at each level above the tests.
_LEVEL_CONFIG = ("package.json", ".npmrc", ".yarnrc", ".yarnrc.yml", "bunfig.toml")
# What the runners and their transformers read next to the files they load.
_TOOL_CONFIG = re.compile(
    r"^(?:(?:jest|vitest|vite)\.config\.(?:[cm]?[jt]s|json)|vitest\.workspace\.(?:[cm]?[jt]s|json)"
    r"|babel\.config\.(?:json|[cm]?[jt]s)|\.babelrc(?:\.(?:json|[cm]?js|cts))?|\.swcrc"
    r"|tsconfig[^/]*\.json|jsconfig\.json)$"
)
_JS_FILE = re.compile(r"\.[cm]?[jt]sx?$")
_NODE_FILE = re.compile(r"\.[cm]?[jt]s$")
_NODE_STEM = re.compile(r"^(?:test|test-.+|.+[.\-_]test)$")
_JEST_TEST = re.compile(r"(?:^|\.)(?:test|spec)\.[cm]?[jt]sx?$")
_VITEST_TEST = re.compile(r"\.(?:test|spec)\.[cm]?[jt]sx?$")
_BUN_TEST = re.compile(r"[._](?:test|spec)\.[cm]?[jt]sx?$")
_SUPPORT_FOLDERS = ("__mocks__", "__snapshots__")
_GLOB = re.compile(r"[*?[{]")
# Options whose value is the next word, per runner (the value is never a test path).
_NODE_VALUED = frozenset(
    {
        "-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
        "--conditions", "--test-name-pattern", "--test-skip-pattern", "--test-reporter",
        "--test-reporter-destination", "--test-concurrency", "--test-timeout", "--test-shard",
        "--test-isolation", "--input-type", "--title", "--stack-size", "--inspect-port",
        "--env-file", "--test-coverage-include", "--test-coverage-exclude", "--watch-path"
    }
)  # fmt: skip
_NODE_PRELOADS = frozenset({"-r", "--require", "--import", "--loader", "--experimental-loader"})
_JEST_VALUED = frozenset(
    {
        "-c", "--config", "--rootDir", "--roots", "-t", "--testNamePattern",
        "--testPathPattern", "--testPathPatterns", "--testPathIgnorePatterns", "--testMatch",
        "--testRegex", "--setupFiles", "--setupFilesAfterEnv", "--globalSetup",
        "--globalTeardown", "--testEnvironment", "--testRunner", "--testSequencer",
        "--testResultsProcessor", "--snapshotResolver", "--resolver", "--reporters",
        "--transform", "--selectProjects", "--ignoreProjects", "-w", "--maxWorkers",
        "--maxConcurrency", "--shard", "--seed", "--testTimeout", "--outputFile",
        "--coverageDirectory", "--collectCoverageFrom", "--moduleNameMapper", "--modulePaths",
        "--moduleDirectories", "--testEnvironmentOptions", "--filter", "--json5"
    }
)  # fmt: skip
_JEST_FILES = frozenset(
    {
        "--setupFiles", "--setupFilesAfterEnv", "--globalSetup", "--globalTeardown",
        "--testEnvironment", "--testRunner", "--testSequencer", "--testResultsProcessor",
        "--snapshotResolver", "--resolver", "--filter"
    }
)  # fmt: skip
_VITEST_VALUED = frozenset(
    {
        "-c", "--config", "-r", "--root", "--dir", "-t", "--testNamePattern", "--reporter",
        "--outputFile", "--pool", "--environment", "--project", "--shard", "--maxWorkers",
        "--minWorkers", "--mode", "--testTimeout", "--hookTimeout", "--bail", "--retry",
        "--exclude", "--include", "--sequence.seed"
    }
)  # fmt: skip
_VITEST_COMMANDS = frozenset({"run", "watch", "dev", "bench", "list"})
# The package managers' own options that take a value, and the folder they run in.
_MANAGER_VALUED = frozenset(
    {
        "--prefix", "-C", "--dir", "--cwd", "-w", "--workspace", "--filter", "-F", "--loglevel",
        "--registry", "--cache", "--userconfig", "--script-shell"
    }
)  # fmt: skip
_MANAGER_FOLDER = frozenset({"--prefix", "-C", "--dir", "--cwd"})
_LIFECYCLE = ("start", "stop", "restart", "test")
# Words that are a package manager's own commands, not a script's name.
_MANAGER_COMMANDS = frozenset(
    {
        "install", "i", "ci", "add", "remove", "rm", "uninstall", "update", "up", "upgrade",
        "audit", "publish", "pack", "link", "unlink", "init", "create", "config", "set", "get",
        "cache", "version", "view", "info", "outdated", "ls", "list", "why", "dedupe", "prune",
        "rebuild", "login", "logout", "whoami", "help", "import", "patch", "store", "env",
        "bin", "root", "owner", "team", "token", "dlx"
    }
)  # fmt: skip
_CONFIG_KEYS_NAMING_FILES = (
    "setupFiles",
    "setupFilesAfterEnv",
    "globalSetup",
    "globalTeardown",
    "testEnvironment",
    "testRunner",
    "testSequencer",
    "testResultsProcessor",
    "snapshotResolver",
    "resolver",
)


def _options(words: list[str], valued: frozenset[str]) -> Iterator[tuple[str, str]]:
    """(option, value) for each option of ``words`` and ("", word) for each other word."""
    stream = iter(words)
    for word in stream:
        if word.startswith("-") and word != "-":
            name, eq, value = word.partition("=")
            if not eq and name in valued:
                value = next(stream, "")
            yield name, value
        else:
            yield "", word


def js_config(d: Discovery, cwd: str) -> None:
    """What every JS runner and package manager reads, as the module docstring says."""
    for level in ancestors(inside(cwd, "x")):
        for name in _LEVEL_CONFIG:
            d.found.config.add(inside(level, name))
    d.found.config_at_levels(cwd, lambda name: bool(_TOOL_CONFIG.match(name)))
    d.found.collect(cwd, lambda rel: bool(_TOOL_CONFIG.match(posixpath.basename(rel))), config=True)


def _target(d: Discovery, word: str, *, cwd: str, tests: Callable[[str, str], bool]) -> None:
    """A file or folder a runner's command names: a file is pinned as named, a folder's
    tests (``tests(folder, rel)``) are collected; a glob is matched from ``cwd``."""
    if _GLOB.search(word):
        pattern = glob_regex(word)
        d.found.collect(cwd, lambda rel: bool(pattern.fullmatch(rel)))
        return
    path = join(cwd, word)
    if path is None:
        return
    if path and d.exists(path):
        d.found.named.add(path)
    elif d.is_dir(path):
        d.found.collect(path, lambda rel: tests(path, rel))
    elif path and _JS_FILE.search(path):
        d.found.named.add(path)  # the branch's own (unpinned), or a holdout row's file


def _support_folders(rel: str) -> bool:
    """``__mocks__/`` and ``__snapshots__/``: what jest and vitest read beside the tests."""
    return any(f"/{folder}/" in f"/{rel}" for folder in _SUPPORT_FOLDERS)


# -- node --test --------------------------------------------------------------------------


def node_test_file(folder: str, rel: str) -> bool:
    """Whether node's test runner, searching ``folder``, runs the file at ``rel`` in it."""
    if not _NODE_FILE.search(rel):
        return False
    parts = rel.split("/")
    if "test" in parts[:-1] or posixpath.basename(folder) == "test":
        return True
    return bool(_NODE_STEM.match(_NODE_FILE.sub("", parts[-1])))


def node(d: Discovery, args: list[str], *, cwd: str, depth: int) -> None:
    """``node [OPTIONS] [--test [TARGETS]] | SCRIPT ARGS``."""
    script = next((value for option, value in _options(args, _NODE_VALUED) if not option), "")
    if "--test" not in args:
        name = posixpath.basename(script)
        after = args[args.index(script) + 1 :] if script else []
        if name in ("jest", "jest.js") and "jest" in script:
            jest(d, after, cwd=cwd)
        elif name in ("vitest", "vitest.mjs") and "vitest" in script:
            vitest(d, after, cwd=cwd)
        else:
            d.words(args, cwd=cwd)
        return
    d.found.runners.update({"node", "node:test"})  # node's own runner: its report is read
    js_config(d, cwd)
    targets = []
    for option, value in _options(args, _NODE_VALUED):
        if option in _NODE_PRELOADS:
            d.words([value], cwd=cwd)  # loaded into every test file's process
        elif not option:
            targets.append(value)
    for word in targets or ["."]:
        _target(d, word, cwd=cwd, tests=node_test_file)


# -- jest, vitest, bun ----------------------------------------------------------------------


def jest(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.update({"node", "jest"})
    js_config(d, cwd)
    root = cwd
    config_file = ""
    for option, value in _options(args, _JEST_VALUED):
        if option in ("-c", "--config") and not value.lstrip().startswith("{"):
            config_file = join(cwd, value) or ""
            if config_file:
                d.found.config.add(config_file)
        elif option == "--rootDir":
            root = join(cwd, value) or root
        elif option in _JEST_FILES:
            d.words([value], cwd=cwd)
        elif not option:
            _target(d, value, cwd=cwd, tests=lambda _folder, rel: _jest_default(rel))
    config = _jest_json_config(d, root, config_file)
    for key in _CONFIG_KEYS_NAMING_FILES:
        for value in _strings(config.get(key)):
            d.words([value.replace("<rootDir>/", "").replace("<rootDir>", ".")], cwd=root)
    patterns = [glob_regex(_relative_glob(g)) for g in _strings(config.get("testMatch"))]
    regexes = [_compile(r) for r in _strings(config.get("testRegex"))]

    def tests(rel: str) -> bool:
        if _support_folders(rel):
            return True
        if patterns or regexes:
            return any(p.fullmatch(rel) for p in patterns) or any(
                r is not None and r.search("/" + rel) for r in regexes
            )
        return _jest_default(rel)

    # Everything under the root is a superset of every `roots` folder inside it.
    d.found.collect(root, tests)


def _jest_default(rel: str) -> bool:
    """jest's default ``testMatch``."""
    if not _JS_FILE.search(rel):
        return _support_folders(rel)
    return "__tests__" in rel.split("/")[:-1] or bool(_JEST_TEST.search(posixpath.basename(rel)))


def _jest_json_config(d: Discovery, root: str, config_file: str) -> dict[str, Any]:
    """Main's jest configuration when it is JSON (``--config FILE.json``,
    ``jest.config.json``, ``package.json``'s ``jest``); {} for a JS one, read by jest alone."""
    candidates = [config_file] if config_file else [inside(root, "jest.config.json")]
    for path in candidates:
        if path.endswith(".json"):
            data = _json(d.read(path))
            if data:
                return data
    package = _json(d.read(inside(root, "package.json")))
    config = package.get("jest") if not config_file else None
    return config if isinstance(config, dict) else {}


def vitest(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.update({"node", "vitest"})
    js_config(d, cwd)
    root = cwd
    filters: list[str] = []
    for index, (option, value) in enumerate(_options(args, _VITEST_VALUED)):
        if option in ("-c", "--config") and join(cwd, value):
            d.found.config.add(join(cwd, value) or "")
        elif option in ("-r", "--root", "--dir"):
            root = join(cwd, value) or root
        elif not option and not (index == 0 and value in _VITEST_COMMANDS):
            filters.append(value)
    for word in filters:
        _target(d, word, cwd=cwd, tests=lambda _folder, rel: _vitest_test(rel))
    if root != cwd:
        js_config(d, root)
    d.found.collect(root, _vitest_test)


def _vitest_test(rel: str) -> bool:
    return bool(_VITEST_TEST.search(posixpath.basename(rel))) or _support_folders(rel)


def bun_test(d: Discovery, args: list[str], *, cwd: str) -> None:
    d.found.runners.add("node")
    js_config(d, cwd)
    for option, value in _options(args, frozenset({"-t", "--test-name-pattern", "--timeout"})):
        if not option:
            _target(d, value, cwd=cwd, tests=lambda _folder, rel: _bun_test(rel))
    d.found.collect(cwd, _bun_test)


def _bun_test(rel: str) -> bool:
    return bool(_BUN_TEST.search(posixpath.basename(rel))) or _support_folders(rel)


# -- package managers -----------------------------------------------------------------------


def package_manager(d: Discovery, program: str, args: list[str], *, cwd: str, depth: int) -> None:
    """``npm|yarn|pnpm|npx|bun|bunx ARGS``: the script it runs (main's), or the program it
    executes, discovered in turn."""
    words = list(args)
    while words and words[0].startswith("-"):  # the manager's own options
        name, eq, value = words.pop(0).partition("=")
        if not eq and name in _MANAGER_VALUED and words:
            value = words.pop(0)
        if name in _MANAGER_FOLDER:
            cwd = join(cwd, value) or cwd
    if program in ("npx", "bunx"):
        _execute(d, words, cwd=cwd, depth=depth)
        return
    if not words:
        return
    command, rest = words[0], words[1:]
    if program == "bun" and command == "test":
        bun_test(d, rest, cwd=cwd)
        return
    if command in ("exec", "x") and program != "bun":
        _execute(d, rest, cwd=cwd, depth=depth)
        return
    if command in ("run", "run-script", "rum", "urn"):
        command, rest = (rest[0], rest[1:]) if rest else ("", [])
    elif command in ("t", "tst"):
        command = "test"
    elif command in _MANAGER_COMMANDS or (program == "npm" and command not in _LIFECYCLE):
        return  # npm runs a script only through run or a lifecycle word
    d.found.runners.add(program)
    js_config(d, cwd)
    found = _script(d, command, rest, cwd=cwd, depth=depth)
    if not found and program in ("yarn", "pnpm", "bun") and command not in _LIFECYCLE:
        _execute(d, [command, *rest], cwd=cwd, depth=depth)  # a package's program


def _execute(d: Discovery, words: list[str], *, cwd: str, depth: int) -> None:
    """``npx``, ``npm exec``, ``yarn exec``: a program from the project's packages."""
    program = [w for w in words if w != "--"]
    while program and program[0].startswith("-"):
        program = program[1:]
    if program:
        d.command(program, cwd=cwd, depth=depth)


def _script(d: Discovery, name: str, args: list[str], *, cwd: str, depth: int) -> bool:
    """Discover the script ``name`` of the nearest ``package.json`` up from ``cwd`` (main's),
    with its ``pre``/``post`` scripts; whether there is one."""
    if not name or depth >= MAX_DEPTH:
        return False
    for level in reversed(ancestors(inside(cwd, "x"))):
        text = d.read(inside(level, "package.json"))
        if text is None:
            continue
        scripts = _json(text).get("scripts")
        if not isinstance(scripts, dict) or not isinstance(scripts.get(name), str):
            return False
        extra = args[1:] if args[:1] == ["--"] else args  # given to the script, as npm does
        for step in (f"pre{name}", name, f"post{name}"):
            line = scripts.get(step)
            if not isinstance(line, str):
                continue
            if step == name and extra:
                line = f"{line} {shlex.join(extra)}"
            d.commands(simple_commands(line), cwd=level, depth=depth + 1)
        return True
    return False


# -- shared ---------------------------------------------------------------------------------


def _json(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _relative_glob(pattern: str) -> str:
    """A jest glob relative to its root (``<rootDir>/tests/**`` -> ``tests/**``)."""
    return pattern.replace("<rootDir>/", "").lstrip("/")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regular expression for a glob as node, jest and vitest read one: ``**``, ``*``,
    ``?``, ``[...]``, ``{a,b}`` and the extended ``?(a|b)``, ``+(...)``, ``*(...)``,
    ``@(...)``, ``!(...)`` (read as ``@``: it only widens what is pinned)."""
    if pattern.startswith("./"):
        pattern = pattern[2:]
    out: list[str] = []
    closers: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c in "?+*@!" and pattern.startswith("(", i + 1):
            out.append("(?:")
            closers.append({"?": ")?", "+": ")+", "*": ")*"}.get(c, ")"))
            i += 2
            continue
        if c == ")" and closers:
            out.append(closers.pop())
        elif c == "|" and closers:
            out.append("|")
        elif c == "{":
            out.append("(?:")
            closers.append(")")
        elif c == "," and closers:
            out.append("|")
        elif c == "}" and closers:
            out.append(closers.pop())
        elif c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                out.append("[" + pattern[i + 1 : end].replace("!", "^", 1) + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(closers[::-1])
    try:
        return re.compile("".join(out))
    except re.error:
        return re.compile(re.escape(pattern))
