// The gate's test runner for jest (`--testRunner`, added by assay_gate_js.cjs): jest-circus,
// with the gate's tripwire in every test file, taken out of what jest counts.
//
// jest runs it for each test file, in a worker (or in its own process when it runs in
// band), outside the file's sandboxed context. It adds assay_gate_jest_setup.cjs to the
// file's setup files: the setup defines a test that must fail with the gate's nonce, run
// after every other test of the file whatever the row selected. Once jest-circus has run
// the file, the tripwire is taken out of the file's results (its counts, its failure
// message, its events to jest's reporters), so jest's exit status and output are the real
// tests', and its outcome is carried on the result to assay_gate_jest_results.cjs, which
// reads it in jest's own process.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const TRIPWIRE = 'assay_gate_tripwire';
const MESSAGE = Symbol.for('assay.gate.tripwire');
const SETUP = path.join(__dirname, 'assay_gate_jest_setup.cjs');

function fromJest(name) {
  // jest's own packages, from where jest runs (its bin, or a worker's script)
  const where = path.dirname(fs.realpathSync(process.argv[1] || __filename));
  return require(require.resolve(name, { paths: [where] }));
}

function nonceOf(globalConfig) {
  const found = /^jest-([0-9a-f]+)\.json$/.exec(path.basename(globalConfig.outputFile || ''));
  return found ? found[1] : null;
}

function isTripwire(result) {
  return result && result.title === TRIPWIRE && (result.ancestorTitles || []).length === 0;
}

const COUNTS = {
  passed: 'numPassingTests',
  failed: 'numFailingTests',
  pending: 'numPendingTests',
  skipped: 'numPendingTests',
  disabled: 'numPendingTests',
  todo: 'numTodoTests',
};

module.exports = async function assayGateRunner(
  globalConfig,
  config,
  environment,
  runtime,
  testPath,
  sendMessageToJest,
) {
  const circus = fromJest('jest-circus/runner');
  const run = circus.default || circus;
  const nonce = nonceOf(globalConfig);
  if (!nonce) {
    return run(globalConfig, config, environment, runtime, testPath, sendMessageToJest);
  }
  environment.global[MESSAGE] = nonce;
  const withSetup = { ...config, setupFilesAfterEnv: [...(config.setupFilesAfterEnv || []), SETUP] };
  const quiet =
    typeof sendMessageToJest === 'function'
      ? (event, args) => {
          if (Array.isArray(args) && isTripwire(args[1])) return undefined;
          return sendMessageToJest(event, args);
        }
      : sendMessageToJest;
  const result = await run(globalConfig, withSetup, environment, runtime, testPath, quiet);
  const wires = (result.testResults || []).filter(isTripwire);
  result.testResults = (result.testResults || []).filter((r) => !isTripwire(r));
  for (const wire of wires) {
    const count = COUNTS[wire.status];
    if (count && result[count] > 0) result[count] -= 1;
  }
  if (result.failureMessage && wires.some((w) => w.status === 'failed')) {
    const { formatResultsErrors } = fromJest('jest-message-util');
    const own = formatResultsErrors(wires, config, globalConfig, testPath) || '';
    const rest = result.failureMessage.replace(own, '');
    result.failureMessage = rest.trim() ? rest : null;
  }
  const [wire] = wires;
  result.assayGateTripwire = wire
    ? { outcome: wire.status, message: (wire.failureMessages || []).join('\n').slice(-2000) }
    : { outcome: 'not run', message: '' };
  return result;
};
