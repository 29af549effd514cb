'use strict';
// The example (examples/hello.js, README.md of this package): it runs, writes the 8-record
// session log `coxswain verify` accepts, and runs again in the same directory, resuming the
// session with the follow-up's retry refused as already delivered (S52) and treated as success.
// `wasDelivered` is true for exactly the two rejections that say so.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const coxswain = require('..');
const { coxswain: cli } = require('./support/cli');

const EXAMPLE = path.resolve(__dirname, '..', 'examples', 'hello.js');

const RECORDS = [
  [1, 'agent/inbox/spliced'],
  [2, 'turn/start'],
  [3, 'agent/inbox/spliced'],
  [4, 'step/start'],
  [5, 'user/message'],
  [6, 'model/output'],
  [7, 'step/end'],
  [8, 'turn/end'],
];

/** Runs the example as its README says (`node …/hello.js`, the log in the working directory). */
function runExample(cwd) {
  const run = spawnSync(process.execPath, [EXAMPLE], { cwd, encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.equal(run.stderr, '');
  return run.stdout;
}

function records(log) {
  return fs.readFileSync(log, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line));
}

const FIRST = 'opened: 0 records\nm1: delivered\nidle; steps run: 1\n';
const SECOND = 'opened: 8 records\nm1: already delivered, nothing runs twice\nidle; steps run: 0\n';

test('the example runs twice in the same directory: the second run resumes, nothing runs twice', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-example-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const log = path.join(dir, 'session.jsonl');
  assert.equal(runExample(dir), FIRST);
  const first = fs.readFileSync(log);
  assert.deepEqual(records(log).map((r) => [r.seq, r.type]), RECORDS);
  assert.deepEqual(records(log)[4].data, { id: 'm1', source: { kind: 'user' }, content: 'hi' });
  assert.equal(runExample(dir), SECOND);
  // The retry was refused before anything was written: the log is the first run's.
  assert.deepEqual(fs.readFileSync(log), first);
  const verified = cli('verify', log);
  assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  assert.equal(verified.stdout, 'ok (8 events, 1 turns)\n');
});

test("this package's README shows the example's command and both runs' output", () => {
  const readme = fs.readFileSync(path.resolve(__dirname, '..', 'README.md'), 'utf8');
  assert.ok(readme.includes('node adapters/node/examples/hello.js\n'));
  assert.ok(readme.includes('```text\n' + FIRST + '```'), 'the first run');
  assert.ok(readme.includes('```text\n' + SECOND + '```'), 'the second run');
});

test('wasDelivered is true for AlreadyDeliveredError and AlreadyPendingError only', () => {
  assert.equal(new coxswain.AlreadyDeliveredError('m1 was already delivered').wasDelivered, true);
  assert.equal(new coxswain.AlreadyPendingError('m1 is pending').wasDelivered, true);
  for (const error of [
    new coxswain.BusyError('x'),
    new coxswain.DisposedError('x'),
    new coxswain.UndrainedError('x'),
    new coxswain.UnexpectedCompletionError('x'),
    new coxswain.TooDeepError('x'),
  ]) {
    assert.equal(error.wasDelivered, false, error.name);
  }
  // Not a rejection: no such property, so `error?.wasDelivered` is falsy.
  for (const error of [new coxswain.PersistenceError('x'), new coxswain.ClosedError()]) {
    assert.equal(error.wasDelivered, undefined, error.name);
  }
});

const HARNESS = path.resolve(__dirname, '..', 'examples', 'harness.js');
const HARNESS_OUTPUT =
  'append refused: rolled back\nm1 pending: false, remembered: false\nidle after turn 1; 10 events in the log\n';

test('the harness example: a refused append is rolled back, and the same id then runs its turn', () => {
  const run = spawnSync(process.execPath, [HARNESS], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.equal(run.stderr, '');
  assert.equal(run.stdout, HARNESS_OUTPUT);
});

test("this package's README shows the harness example whole, with its output", () => {
  const readme = fs.readFileSync(path.resolve(__dirname, '..', 'README.md'), 'utf8');
  const example = fs.readFileSync(HARNESS, 'utf8');
  assert.ok(example.trimEnd().split('\n').length <= 35, 'a 30-line example, its header aside');
  assert.ok(readme.includes('```js\n' + example + '```'), 'the example, whole');
  assert.ok(readme.includes('```text\n' + HARNESS_OUTPUT + '```'), 'its output');
});
