// The gate's preload for jest's and vitest's command-line processes (`--require` in
// NODE_OPTIONS, so it reaches them through npm, npx, make or a shell).
//
// In any other node process it does nothing and leaves the gate's variable alone (a test
// runner started further down still needs it). In the runner's own process, which loads no
// code under test before it forks its workers, it takes the report folder and nonce out of
// the environment (neither the workers nor the tests find them there), marks the start,
// and adds what makes the runner report to the gate:
//
// - jest: `--testRunner` (assay_gate_jest_runner.cjs wraps jest-circus in each test file's
//   worker and adds the tripwire), `--testResultsProcessor` (assay_gate_jest_results.cjs
//   writes the report once the run is over) and `--outputFile`, which without `--json`
//   only carries the folder and nonce to the workers in jest's own configuration;
// - vitest: `--config` (assay_gate_vitest.config.mjs: the project's configuration, found as
//   vitest finds it, with the gate's setup file and reporter added) read natively, and the
//   gate's reporter again when the row names reporters of its own (they replace the
//   configuration's).
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const REPORT_ENV = 'ASSAY_GATE_REPORT';
const STASH = Symbol.for('assay.gate.vitest');
const VITEST_CONFIGS = ['vitest.config', 'vite.config'].flatMap((stem) =>
  ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'].map((ext) => stem + ext),
);

function mainScript() {
  try {
    return fs.realpathSync(process.argv[1] || '');
  } catch {
    return '';
  }
}

function runnerOf(script) {
  if (/[\\/]jest(?:-cli)?[\\/]bin[\\/]jest\.js$/.test(script)) return 'jest';
  if (/[\\/]vitest[\\/]vitest\.mjs$/.test(script)) return 'vitest';
  return null;
}

// The value of `names` in argv (`--name VALUE`, `--name=VALUE`), removed from it.
function takeOption(argv, names) {
  for (let i = 2; i < argv.length; i += 1) {
    const word = argv[i];
    if (word === '--') break;
    for (const name of names) {
      if (word === name && i + 1 < argv.length) return argv.splice(i, 2)[1];
      if (word.startsWith(`${name}=`)) return argv.splice(i, 1)[0].slice(name.length + 1);
    }
  }
  return null;
}

function optionValue(argv, names) {
  return takeOption([...argv], names);
}

function vitestConfig(argv) {
  const root = path.resolve(optionValue(argv, ['--root', '-r']) || '.');
  const named = takeOption(argv, ['--config', '-c']);
  if (named) return path.resolve(root, named);
  for (let dir = root; ; dir = path.dirname(dir)) {
    const found = VITEST_CONFIGS.map((name) => path.join(dir, name)).find((f) => fs.existsSync(f));
    if (found) return found;
    if (path.dirname(dir) === dir) return null;
  }
}

// `words` added to this process's arguments, before a `--` (what follows one is the row's).
function addArguments(...words) {
  const end = process.argv.indexOf('--', 2);
  process.argv.splice(end < 0 ? process.argv.length : end, 0, ...words);
}

function jest(taken) {
  addArguments(
    `--testRunner=${path.join(__dirname, 'assay_gate_jest_runner.cjs')}`,
    `--testResultsProcessor=${path.join(__dirname, 'assay_gate_jest_results.cjs')}`,
    `--outputFile=${path.join(taken.folder, `jest-${taken.nonce}.json`)}`,
  );
}

function vitest(taken, script) {
  const argv = process.argv;
  const reporter = path.join(__dirname, 'assay_gate_vitest_reporter.mjs');
  globalThis[STASH] = {
    nonce: taken.nonce,
    project: vitestConfig(argv),
    setup: path.join(__dirname, 'assay_gate_vitest_setup.mjs'),
    reporter,
    vite: pathToFileURL(require.resolve('vite', { paths: [path.dirname(script)] })).href,
  };
  if (argv.slice(2).some((word) => word === '--reporter' || word.startsWith('--reporter='))) {
    addArguments(`--reporter=${reporter}`); // the row's reporters replace the configuration's
  }
  addArguments(`--config=${path.join(__dirname, 'assay_gate_vitest.config.mjs')}`, '--configLoader=native');
}

let taken = null;
if (process.env[REPORT_ENV]) {
  const script = mainScript();
  const runner = runnerOf(script);
  const [folder, nonce] = process.env[REPORT_ENV].split('\n');
  if (runner && folder && nonce) {
    delete process.env[REPORT_ENV];
    taken = { runner, folder, nonce };
    fs.writeFileSync(path.join(folder, `${runner}-${process.pid}.started`), '');
    if (runner === 'jest') jest(taken);
    else vitest(taken, script);
  }
}

// (runner, folder, nonce) for this process, or null when it is no runner the gate reads.
exports.taken = () => taken;

// One complete report for this process, in the shape of the gate's other reporters
// (assay_gate_report.py): written whole, then renamed into place.
exports.write = (tests, tripwire) => {
  if (!taken) return;
  const report = {
    v: 1,
    runner: taken.runner,
    nonce: taken.nonce,
    pid: process.pid,
    tests,
    tripwire,
    complete: true,
  };
  const random = Math.random().toString(16).slice(2);
  const final = path.join(taken.folder, `${taken.runner}-${process.pid}-${random}.json`);
  fs.writeFileSync(`${final}.part`, JSON.stringify(report));
  fs.renameSync(`${final}.part`, final);
};

// How the tripwire's failure is reported with the gate's nonce in it, for the runner's
// modules (the nonce itself: runners shorten long strings in their messages).
exports.TRIPWIRE = 'assay_gate_tripwire';
