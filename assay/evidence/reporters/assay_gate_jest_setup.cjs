// The gate's tripwire in a jest test file (a setup file assay_gate_jest_runner.cjs adds).
//
// It runs in the file's own context, after jest's globals and before the file: it defines
// a test that asserts the gate's nonce is empty, so a working `expect` fails it with the
// nonce in its message (code under test that patched `expect` or jest's reporting makes
// it pass, or go unreported). jest-circus runs tests in the order they were defined, so
// when the run starts (its `run_start` event, once every test of the file is known) the
// tripwire is moved to the end of the file; and it runs whatever the row selected (`-t`,
// a `.only` in the file).
'use strict';

const KEY = Symbol.for('assay.gate.tripwire');
const HANDLERS = Symbol.for('EVENT_HANDLERS'); // jest-circus's own list of event handlers
const TRIPWIRE = 'assay_gate_tripwire';

const nonce = globalThis[KEY];
delete globalThis[KEY];

if (nonce) {
  const { test, expect } =
    typeof globalThis.test === 'function' ? globalThis : require('@jest/globals');
  test(TRIPWIRE, () => {
    expect(nonce).toBe('');
  });
  let pattern = null;
  const handlers = globalThis[HANDLERS];
  if (Array.isArray(handlers)) {
    handlers.push((event, state) => {
      const root = state.rootDescribeBlock;
      if (event.name === 'run_start') {
        const index = root.children.findIndex((c) => c.type === 'test' && c.name === TRIPWIRE);
        if (index < 0) return;
        const [wire] = root.children.splice(index, 1);
        wire.mode = 'only'; // runs beside a focused test, never because of one
        root.children.push(wire);
      } else if (event.name === 'test_start' && event.test.name === TRIPWIRE && event.test.parent === root) {
        pattern = state.testNamePattern;
        state.testNamePattern = null;
      } else if (
        (event.name === 'test_done' || event.name === 'test_skip') &&
        event.test.name === TRIPWIRE &&
        event.test.parent === root
      ) {
        state.testNamePattern = pattern;
      }
    });
  }
}
