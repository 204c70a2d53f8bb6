// The gate's results processor for jest (`--testResultsProcessor`, added by
// assay_gate_js.cjs): jest calls it in its own process once every test file has run, with
// the run's aggregated results, before it exits. It writes the gate's report from them:
// each test by file (relative to the working folder) and full name, a file that failed to
// run as a test in error, and the tripwire as every file's runner told it
// (assay_gate_jest_runner.cjs). It returns the results unchanged.
'use strict';

const path = require('node:path');
const gate = require('./assay_gate_js.cjs');

const OUTCOMES = {
  passed: 'passed',
  failed: 'failed',
  pending: 'skipped',
  skipped: 'skipped',
  disabled: 'skipped',
  todo: 'skipped',
  focused: 'passed',
};

module.exports = function assayGateResults(results) {
  const taken = gate.taken();
  if (!taken || taken.runner !== 'jest') return results;
  const tests = {};
  const told = [];
  const files = results.testResults || [];
  for (const file of files) {
    const name = path.relative(process.cwd(), file.testFilePath || '');
    for (const test of file.testResults || []) {
      const id = `${name}::${[...(test.ancestorTitles || []), test.title].join(' > ')}`;
      tests[id] = OUTCOMES[test.status] || 'error';
    }
    if (file.testExecError || (file.failureMessage && !(file.testResults || []).length)) {
      tests[`${name}: failed to run`] = 'error';
    }
    const wire = file.assayGateTripwire;
    if (wire && wire.outcome === 'failed' && String(wire.message).includes(taken.nonce)) {
      told.push(wire.message);
    }
  }
  const tripwire =
    files.length > 0 && told.length === files.length
      ? { outcome: 'failed', message: told.join('\n').slice(-2000) }
      : { outcome: 'not run', message: `${told.length} of ${files.length} test files told it` };
  if (results.runExecError) tests['jest: the run failed'] = 'error';
  gate.write(tests, tripwire);
  return results;
};
