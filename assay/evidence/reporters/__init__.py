"""The gate's reporters: modules the rows' Python imports from the gate's own folder.

They are copied out of this package into a gate-owned folder beside the gate's
``sitecustomize`` (never into the tree under test) and write one JSON report per runner
process into a folder whose random name the row learns only from its environment:

- ``assay_gate_pytest``: a pytest plugin (``-p assay_gate_pytest`` in ``PYTEST_ADDOPTS``);
- ``assay_gate_unittest``: wraps ``python -m unittest`` (installed by the sitecustomize);
- ``assay_gate_node.mjs``: a ``node --test`` reporter (``--test-reporter`` in
  ``NODE_OPTIONS``), with ``assay_gate_node_child.mjs`` imported into each test file's
  process, where the tripwire runs once the file's tests are done;
- ``assay_gate_js.cjs``: preloaded into every node process (``--require`` in
  ``NODE_OPTIONS``), it acts only in jest's and vitest's own processes, where it adds the
  gate's runner, setup and results processor (``assay_gate_jest_*.cjs``) or the gate's
  configuration, setup and reporter (``assay_gate_vitest*.mjs``) to the run;
- ``assay_gate_go_exec``: the program ``go test`` starts each test binary through
  (``-exec`` in ``GOFLAGS``), and ``assay_gate_cargo_runner``, the runner cargo starts each
  test binary through (``CARGO_TARGET_<TRIPLE>_RUNNER``), and ``assay_gate_go_cache``, which
  starts a go row from a private copy of main's Go build cache; each with the gate's
  interpreter on its first line.

Each Python and node reporter adds the gate's tripwire, a test known to fail with a random
message, and reports it apart from the real tests; the exit status the runner would have
without it is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPORT_ENV = "ASSAY_GATE_REPORT"
MODULES = (
    "assay_gate_pytest.py",
    "assay_gate_unittest.py",
    "assay_gate_report.py",
    "assay_gate_node.mjs",
    "assay_gate_node_child.mjs",
    "assay_gate_js.cjs",
    "assay_gate_jest_runner.cjs",
    "assay_gate_jest_setup.cjs",
    "assay_gate_jest_results.cjs",
    "assay_gate_vitest.config.mjs",
    "assay_gate_vitest_setup.mjs",
    "assay_gate_vitest_reporter.mjs",
)
# Programs a runner starts by path (no interpreter on its command line): written with the
# gate's own interpreter as their first line, with -I (none of the rows' Python settings) and
# -S (no site-packages: they need the standard library only, and start in ~20 ms, not ~170).
PROGRAMS = {
    "assay_gate_go_exec.py": "assay_gate_go_exec",
    "assay_gate_go_cache.py": "assay_gate_go_cache",
    "assay_gate_cargo_runner.py": "assay_gate_cargo_runner",
}


def install(folder: Path) -> None:
    """Copy the reporter modules into ``folder`` (the gate's site folder)."""
    here = Path(__file__).parent
    for name in MODULES:
        (folder / name).write_bytes((here / name).read_bytes())
    for source, name in PROGRAMS.items():
        program = folder / name
        program.write_bytes(f"#!{sys.executable} -IS\n".encode() + (here / source).read_bytes())
        program.chmod(0o755)
