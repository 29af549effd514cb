'use strict';
// index.d.ts type-checks (tsc --strict), and the README's "Node.js" TypeScript example compiles
// against it and runs: it writes a session log that `coxswain verify` accepts, and run again on
// that log it resumes, its retries refused as already delivered.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { coxswain: cli, ROOT } = require('./support/cli');

const PACKAGE = path.resolve(__dirname, '..');
const TSC = path.join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');

/** The ```ts block of the README's "## Node.js" section. */
function readmeExample() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Node.js'));
  assert.ok(section, 'README.md has a "## Node.js" section');
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  assert.ok(match, 'the section has a ```ts example');
  return match[1];
}

test('the README example is at most 20 lines, type-checks against index.d.ts, and runs twice', (t) => {
  const example = readmeExample();
  assert.ok(example.trimEnd().split('\n').length <= 20, 'a 20-line example');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-ts-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PACKAGE, path.join(dir, 'node_modules', 'coxswain'), 'dir');
  fs.symlinkSync(
    path.join(PACKAGE, 'node_modules', '@types'),
    path.join(dir, 'node_modules', '@types'),
    'dir',
  );
  fs.writeFileSync(path.join(dir, 'example.mts'), example);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        types: ['node'],
        outDir: 'out',
      },
      files: ['example.mts'],
    }),
  );
  const tsc = spawnSync(process.execPath, [TSC, '-p', dir], { encoding: 'utf8' });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  const log = path.join(dir, 'session.jsonl');
  const run = spawnSync(process.execPath, [path.join(dir, 'out', 'example.mjs')], {
    encoding: 'utf8',
    cwd: dir,
    env: { ...process.env, LOG: log },
  });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /idle after turn 2/);
  const verified = cli('verify', log);
  assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  // Run again on the same log: it resumes, and every follow-up is a retry of a delivery already
  // made (S52), which the example treats as success; nothing is written.
  const records = fs.readFileSync(log);
  const again = spawnSync(process.execPath, [path.join(dir, 'out', 'example.mjs')], {
    encoding: 'utf8',
    cwd: dir,
    env: { ...process.env, LOG: log },
  });
  assert.equal(again.status, 0, again.stdout + again.stderr);
  const lines = records.toString('utf8').trimEnd().split('\n').length;
  assert.equal(
    again.stdout,
    'already-delivered\n'.repeat(3) + `resumed ${lines} records; idle after turn 2\n`,
  );
  assert.deepEqual(fs.readFileSync(log), records);
});

test('index.d.ts is strict-clean and names every export of index.js', () => {
  const tsc = spawnSync(
    process.execPath,
    [TSC, '--noEmit', '--strict', '--types', 'node', path.join(PACKAGE, 'index.d.ts')],
    { encoding: 'utf8', cwd: PACKAGE },
  );
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  const declared = fs.readFileSync(path.join(PACKAGE, 'index.d.ts'), 'utf8');
  for (const name of Object.keys(require('..'))) {
    assert.match(declared, new RegExp(`export (declare )?(class|function) ${name}\\b`), name);
  }
});

test('index.d.ts types §13: resume (S57), fate (S58), repair and its allowance (S59)', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-ts13-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PACKAGE, path.join(dir, 'node_modules', 'coxswain'), 'dir');
  fs.symlinkSync(path.join(PACKAGE, 'node_modules', '@types'), path.join(dir, 'node_modules', '@types'), 'dir');
  const source = `
import { Agent, Machine, MemoryLog, InvalidRedeliveryError, type Fate, type MachineEvent } from 'coxswain';
const { machine, appended }: { machine: Machine; appended: MachineEvent[] } = Machine.repair([], { redelivery: 1, memory: 'unbounded' });
machine.resume();
const fate: Fate = machine.fate('a');
if (typeof fate === 'object' && 'claimed' in fate) {
  const turn: number = fate.claimed.turn;
  const end: 'completed' | 'max-tokens' | 'blocked' | 'aborted' | 'error' | 'interrupted' | undefined = fate.claimed.end;
  console.log(turn, end);
}
const restored = Machine.restore(appended, { memory: 'unbounded' });
// @ts-expect-error a fate is never a bare target
const wrong: Fate = 'next-turn';
// @ts-expect-error the allowance is a number
Machine.repair([], { redelivery: '1' });
const { agent, recovery } = await Agent.open({ step: () => 'completed' }, new MemoryLog(), { redelivery: 1, resumeOnOpen: true, memory: 'unbounded' });
const redelivered: number = recovery.redelivered;
await agent.resume();
const later: Fate = await agent.fate('a');
const value: unknown = new InvalidRedeliveryError().value;
console.log(restored, wrong, redelivered, later, value);
`;
  fs.writeFileSync(path.join(dir, 'section13.mts'), source);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', types: ['node'] },
      files: ['section13.mts'],
    }),
  );
  const tsc = spawnSync(process.execPath, [TSC, '-p', dir], { encoding: 'utf8' });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});
