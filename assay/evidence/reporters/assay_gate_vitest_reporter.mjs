// The gate's reporter for vitest, in vitest's own process (which loads no code under test:
// the files run in its workers). When the run ends it writes the gate's report through
// assay_gate_js.cjs: each test by file (relative to the working folder) and full name, a
// file that failed to load, or an error outside any test, as a test in error; and the
// tripwire as every file's tripwire test told it (assay_gate_vitest_setup.mjs), taken out
// of the count.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const gate = require('./assay_gate_js.cjs');
const OUTCOMES = { passed: 'passed', failed: 'failed', skipped: 'skipped', pending: 'error' };

export default class AssayGateReporter {
  onTestRunEnd(modules, errors) {
    const taken = gate.taken();
    if (!taken || taken.runner !== 'vitest') return;
    const tests = {};
    const told = [];
    for (const module of modules) {
      const name = path.relative(process.cwd(), module.moduleId);
      let wire = null;
      for (const test of module.children.allTests()) {
        if (test.name === gate.TRIPWIRE && test.parent === module) {
          wire = test;
          continue;
        }
        tests[`${name}::${test.fullName}`] = OUTCOMES[test.result().state] || 'error';
      }
      if (module.errors().length > 0 || module.state() === 'failed' && !wire) {
        tests[`${name}: failed to run`] = 'error';
      }
      const message = wire ? String(wire.meta().assayGateTripwire || '') : '';
      if (message.includes(taken.nonce)) told.push(message);
    }
    if (errors.length > 0) tests['vitest: errors outside the tests'] = 'error';
    const tripwire =
      modules.length > 0 && told.length === modules.length
        ? { outcome: 'failed', message: told.join('\n').slice(-2000) }
        : { outcome: 'not run', message: `${told.length} of ${modules.length} test files told it` };
    gate.write(tests, tripwire);
  }
}
