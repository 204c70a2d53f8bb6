// The gate's reporter for `node --test` (a `--test-reporter` in NODE_OPTIONS).
//
// It runs in the test runner's own process, which loads no code under test: every test
// file runs in a child (assay_gate_node_child.mjs marks each). It records each test's
// outcome by file (relative to the working folder) and full name, and when the run ends
// writes one complete report in the shape the Python reporters write (assay_gate_report):
// a child that never reached its natural end is a test in error, and the tripwire counts
// as failed only when every test file's child reported it failed with the gate's nonce.
import fs from 'node:fs';
import path from 'node:path';

const REPORT_ENV = 'ASSAY_GATE_REPORT';
const RUNNER = 'node:test';
const [folder, nonce] = (process.env[REPORT_ENV] || '').split('\n');

function relative(file) {
  return file ? path.relative(process.cwd(), file) : '';
}

function readMarks() {
  const done = [];
  const running = [];
  for (const name of fs.readdirSync(folder)) {
    if (!name.startsWith(`${RUNNER}-child-`)) continue;
    const where = path.join(folder, name);
    if (name.endsWith('.done')) {
      try {
        done.push(JSON.parse(fs.readFileSync(where, 'utf8')));
      } catch {
        // an unreadable mark proves nothing: the file's tripwire stays unreported
      }
    } else if (name.endsWith('.running')) {
      running.push(fs.readFileSync(where, 'utf8'));
    }
  }
  return { done, running };
}

function write(tests, files) {
  const { done, running } = readMarks();
  for (const file of running) {
    tests[`${relative(file)}: ended before its tests did`] = 'error';
  }
  const told = done.filter((mark) => String(mark.message).includes(nonce));
  const tripwire =
    files.size > 0 && told.length >= files.size
      ? { outcome: 'failed', message: told.map((mark) => mark.message).join('\n').slice(-2000) }
      : { outcome: 'not run', message: `${told.length} of ${files.size} test files told it` };
  const report = {
    v: 1,
    runner: RUNNER,
    nonce,
    pid: process.pid,
    tests,
    tripwire,
    complete: true,
  };
  const final = path.join(folder, `${RUNNER}-${process.pid}-${Math.random().toString(16).slice(2)}.json`);
  fs.writeFileSync(`${final}.part`, JSON.stringify(report));
  fs.renameSync(`${final}.part`, final);
}

export default async function* gateReporter(source) {
  if (!folder || !nonce || process.env.NODE_TEST_CONTEXT) {
    for await (const _event of source) {
      // the gate asked for nothing here (or this is a test file's process, which reports
      // to the runner's): read the stream to its end and say nothing
    }
    return;
  }
  fs.writeFileSync(path.join(folder, `${RUNNER}-${process.pid}.started`), '');
  const tests = {};
  const files = new Set();
  const names = new Map(); // file -> the names of the tests open at each nesting level
  for await (const event of source) {
    const data = event.data || {};
    const file = data.file || '';
    if (event.type === 'test:enqueue' && data.nesting === 0 && data.name === file) {
      files.add(file);
    } else if (event.type === 'test:start') {
      const open = names.get(file) || [];
      open.length = data.nesting;
      open.push(data.name);
      names.set(file, open);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      if (data.name === file) continue; // the file itself: its tests are told one by one
      const open = (names.get(file) || []).slice(0, data.nesting);
      const id = `${relative(file)}::${[...open, data.name].join(' > ')}`;
      if (data.skip !== undefined || data.todo !== undefined) {
        tests[id] = 'skipped';
      } else {
        tests[id] = event.type === 'test:pass' ? 'passed' : 'failed';
      }
    }
  }
  write(tests, files);
}
