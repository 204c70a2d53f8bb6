// The gate's tripwire in a vitest test file (a setup file assay_gate_vitest.config.mjs
// adds), run in the file's own context in vitest's worker.
//
// It defines a test that asserts the gate's nonce is empty: a working `expect` throws, and
// the test keeps the error's message in its metadata, which vitest reports to the gate's
// reporter in vitest's own process (code under test that patched `expect` leaves nothing
// there). The test itself passes, so vitest's exit status is the real tests'. A hook before
// the file's tests moves it to the end of the file, and it runs whatever the row selected
// (`-t`, a `.only`).
import { beforeAll, expect, inject, test } from 'vitest';

const TRIPWIRE = 'assay_gate_tripwire';
const nonce = inject('assayGateTripwire');

if (nonce) {
  test(TRIPWIRE, ({ task }) => {
    try {
      expect(nonce).toBe('');
    } catch (error) {
      task.meta.assayGateTripwire = String(error && error.message);
    }
  });
  // vitest hands a hook's suite as its second argument; its first is a fixture object
  beforeAll(({}, file) => {
    const index = file.tasks.findIndex((t) => t.type === 'test' && t.name === TRIPWIRE);
    if (index < 0) return;
    const [wire] = file.tasks.splice(index, 1);
    wire.mode = 'run';
    file.tasks.push(wire);
  });
}
