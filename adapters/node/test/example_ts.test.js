'use strict';
// The README's TypeScript example, examples/hello.mts, compiled and run exactly as docs/node.md
// shows it: the commands are read from the doc's `sh no-run` block that runs
// `examples/out/hello.mjs` (the one `/tmp/` of the commands becomes a fresh directory), so the doc
// and this test cannot drift. It imports from 'coxswain' (the package's own name: package.json's
// "exports" make the self-reference resolve, for tsc and for Node). Run twice on one log, the
// second run resumes it and reads every follow-up's retry as success (S52).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { coxswain: cli, ROOT } = require('./support/cli');

const OUT = path.join(ROOT, 'adapters', 'node', 'examples', 'out');

/** The commands of docs/node.md's no-run block that runs the compiled TypeScript example. */
function docCommands() {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'node.md'), 'utf8');
  const blocks = [...doc.matchAll(/```sh no-run\n([\s\S]*?)```/g)].map((m) => m[1]);
  const block = blocks.find((b) => b.includes('examples/out/hello.mjs'));
  assert.ok(block, 'docs/node.md has a `sh no-run` block running examples/out/hello.mjs');
  return block
    .split('\n')
    .map((line) => line.split(' #')[0].trim())
    .filter((line) => line && !line.startsWith('#'));
}

// A new session: the notifications the example prints, m1's retry refused as already delivered
// while turn 2 runs (turn 1's end and turn 2's claim of m2 are one batch: no turn-stopping hook,
// decision 1), then the last line.
const FIRST_RUN = [
  'agent/inbox/inserted',
  'agent/status',
  'agent/inbox/claimed',
  'agent/inbox/inserted',
  'agent/inbox/claimed',
  'already-delivered',
  'agent/status',
  'resumed 0 records; idle after turn 2',
  '',
].join('\n');
const VERIFIED = 'ok (16 events, 2 turns)\n';
// The same log again: all three follow-ups are retries (S52); no turn runs.
const SECOND_RUN = 'already-delivered\n'.repeat(3) + 'resumed 16 records; idle after turn 2\n';

function sh(command) {
  const run = spawnSync('sh', ['-c', command], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  assert.equal(run.status, 0, `${command}\n${run.stdout}${run.stderr}`);
  return run.stdout;
}

test('docs/node.md compiles examples/hello.mts with the package tsc and runs it twice', (t) => {
  const commands = docCommands();
  assert.deepEqual(
    commands.map((c) => c.replace(/\/tmp\/\S*/, 'LOG')),
    [
      'node adapters/node/node_modules/typescript/bin/tsc -p adapters/node/examples',
      'LOG=LOG node adapters/node/examples/out/hello.mjs',
    ],
  );
  const hadOut = fs.existsSync(OUT);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-ts-example-'));
  t.after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    if (!hadOut) fs.rmSync(OUT, { recursive: true, force: true });
  });
  const [compile, run] = commands.map((c) => c.replaceAll('/tmp/', `${dir}/`));
  assert.equal(sh(compile), '');
  assert.ok(fs.existsSync(path.join(OUT, 'hello.mjs')), 'tsc wrote examples/out/hello.mjs');
  const log = /^LOG=(\S+) /.exec(run)[1];
  assert.equal(sh(run), FIRST_RUN);
  const verified = cli('verify', log);
  assert.equal(verified.stdout, VERIFIED);
  assert.equal(verified.status, 0, verified.stderr);
  // Again on the same log: it resumes, and every follow-up is a retry of a delivery already made
  // (S52), which the example reads as success; nothing is written.
  const records = fs.readFileSync(log);
  assert.equal(sh(run), SECOND_RUN);
  assert.deepEqual(fs.readFileSync(log), records);
});
