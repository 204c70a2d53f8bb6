// The gate's module in each test file's process of `node --test` (loaded with `--import`).
//
// node's test runner runs every test file in a child process and reports its tests to the
// parent, where the gate's reporter (assay_gate_node.mjs) listens. A child whose code ends
// the process early (`process.exit(0)` at import) would leave a file with its tests untold
// and the run green. So each child marks that it is running, and only when its event loop
// empties on its own ('beforeExit', never emitted by an explicit exit) runs the tripwire: an
// assertion that must fail with the gate's nonce (code that patched node:assert silences
// it). It then leaves that message where the reporter reads it.
import assert from 'node:assert';
import fs from 'node:fs';
import path from 'node:path';

const REPORT_ENV = 'ASSAY_GATE_REPORT';
const taken = process.env.NODE_TEST_CONTEXT ? process.env[REPORT_ENV] : undefined;

if (taken) {
  delete process.env[REPORT_ENV]; // the code under test does not find it there
  const [folder, nonce] = taken.split('\n');
  const mark = path.join(folder, `node:test-child-${process.pid}`);
  fs.writeFileSync(`${mark}.running`, process.argv[1] || '');
  process.once('beforeExit', () => {
    let message = '';
    try {
      assert.strictEqual(`the gate's tripwire ${nonce} fails on purpose`, '');
    } catch (error) {
      message = String(error && error.message);
    }
    fs.writeFileSync(`${mark}.done`, JSON.stringify({ file: process.argv[1] || '', message }));
    fs.rmSync(`${mark}.running`, { force: true });
  });
}
