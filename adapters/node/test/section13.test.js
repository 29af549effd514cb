'use strict';
// SPEC §13 in the Node binding: `resume` (S57), `fate` (S58) and crash repair's redelivery
// (S59, I16) on the Machine, the Agent over a FileLog, and the allowance checked at every open.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const coxswain = require('..');
const { coxswain: cli } = require('./support/cli');

const { Agent, FileLog, Machine, MemoryLog, userMessage } = coxswain;

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-node-s13-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function records(file) {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

const quiet = { id: 'x', source: { kind: 'plugin', name: 'x' }, content: 'ctx x' };
const a = userMessage('a', 'go');

/** Every output of `transition`, drained (the ports' wire order). */
const outs = (transition) => transition.intoOutputs();

test('S58: fate names how each id left, its first step and its turn end; a query changes nothing', () => {
  const machine = new Machine({ memory: 'unbounded' });
  assert.equal(machine.fate('a'), 'unknown');
  outs(machine.inject(quiet));
  assert.deepEqual(machine.fate('x'), { pending: 'next-step' });
  outs(machine.send(userMessage('q', 'later'), 'next-turn', false));
  assert.deepEqual(machine.fate('q'), { pending: 'next-turn' });
  outs(machine.remove('q'));
  assert.equal(machine.fate('q'), 'discarded');
  // Turn 1 claims x (NS) and a (NT); the host enters only a (S29: x gets no step).
  outs(machine.followup(a));
  assert.deepEqual(machine.fate('a'), { claimed: { turn: 1 } });
  const state = machine.state();
  assert.deepEqual(outs(machine.answerPreStep({ enter: [a] })).length, 3);
  assert.deepEqual(machine.fate('a'), { claimed: { turn: 1, step: 1 } });
  assert.deepEqual(machine.fate('x'), { claimed: { turn: 1 } });
  outs(machine.answerStep('completed'));
  outs(machine.answerTurnStopping('done'));
  assert.deepEqual(machine.fate('a'), { claimed: { turn: 1, step: 1, end: 'completed' } });
  assert.deepEqual(machine.fate('x'), { claimed: { turn: 1, end: 'completed' } });
  assert.equal(state.lastTurn, 1);
  // Disposed: still answered (S58), and resume is rejected (S57, S45).
  outs(machine.inject(userMessage('d', 'dropped')));
  outs(machine.dispose());
  assert.equal(machine.fate('d'), 'discarded');
  assert.deepEqual(machine.fate('a'), { claimed: { turn: 1, step: 1, end: 'completed' } });
  assert.throws(() => machine.resume(), coxswain.DisposedError);
  assert.throws(() => machine.fate(7), {
    name: 'InvalidInputError',
    message: 'fate takes a message id (a string), not 7',
  });
});

test('I15: a machine restored from the log at idle answers fate for every id as the live one', () => {
  const live = new Machine({ memory: 'unbounded' });
  const log = [];
  const run = (transition) => {
    log.push(...transition.events);
    return transition.persisted();
  };
  run(live.inject(quiet));
  run(live.followup(a));
  run(live.answerPreStep({ enter: [a] }));
  run(live.answerStep('completed'));
  run(live.answerTurnStopping('done'));
  run(live.inject(userMessage('c', 'cleared')));
  run(live.clear());
  const restored = Machine.restore(log, { memory: 'unbounded' });
  for (const id of ['x', 'a', 'c', 'never']) assert.deepEqual(restored.fate(id), live.fate(id), id);
  assert.deepEqual(restored.fate('c'), 'discarded');
  // A bounded memory of 1 holds only the last id to leave (S51): the others are unknown.
  const small = Machine.restore(log, { memory: 1 });
  assert.deepEqual([small.fate('x'), small.fate('a'), small.fate('c')], ['unknown', 'unknown', 'discarded']);
});

/** The log of turn 1, cut off while its pre-step request was outstanding: x (NS) and a (NT) claimed unseen. */
function crashedLog() {
  const machine = new Machine();
  const log = [];
  for (const deliver of [() => machine.inject(quiet), () => machine.followup(a)]) {
    const transition = deliver();
    log.push(...transition.events);
    transition.persisted();
  }
  return log;
}

const interrupted = (turn) => ({ type: 'turn/end', data: { turn, reason: { kind: 'interrupted' } } });

test('S59: Machine.repair with A = 1 appends the closers then one redelivery splice per unseen claim, in claim order', () => {
  const log = crashedLog();
  assert.equal(log.length, 5);
  // A = 0 (the default): S50 unchanged, what turn 1 claimed is gone.
  const plain = Machine.repair(log, { memory: 'unbounded' });
  assert.deepEqual(plain.appended, [interrupted(1)]);
  assert.deepEqual(plain.machine.fate('a'), { claimed: { turn: 1, end: 'interrupted' } });
  assert.deepEqual(plain.machine.state().nextTurn, []);
  const { machine, appended } = Machine.repair(log, { redelivery: 1, memory: 'unbounded' });
  assert.deepEqual(appended, [
    interrupted(1),
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [quiet], redelivery: 1 } },
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [a], wakeup: true, redelivery: 1 } },
  ]);
  // I16: pending again, parked (S48) until a resume (S57).
  assert.deepEqual(machine.fate('x'), { pending: 'next-step' });
  assert.deepEqual(machine.fate('a'), { pending: 'next-turn' });
  assert.equal(machine.status, 'idle');
  assert.deepEqual(outs(machine.resume()), [
    { notify: { type: 'agent/status', status: 'running' } },
    { event: { type: 'turn/start', data: { turn: 2 } } },
    { event: { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, removedCount: 1, inserted: [] } } },
    { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } } },
    { notify: { type: 'agent/inbox/claimed', message: quiet, turn: 2 } },
    { notify: { type: 'agent/inbox/claimed', message: a, turn: 2 } },
    { request: { preStep: { turn: 2, step: 1, messages: [quiet, a] } } },
  ]);
  // S57: running, a second resume emits nothing.
  assert.deepEqual(outs(machine.resume()), []);
  // A second crash in turn 2, before its step: the allowance is spent (r = 2 > 1).
  const again = [...log, ...appended, { type: 'turn/start', data: { turn: 2 } },
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, removedCount: 1, inserted: [] } },
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } }];
  const spent = Machine.repair(again, { redelivery: 1, memory: 'unbounded' });
  assert.deepEqual(spent.appended, [interrupted(2)]);
  assert.deepEqual(spent.machine.fate('a'), { claimed: { turn: 2, end: 'interrupted' } });
  // A = 2 puts them back a second time.
  const twice = Machine.repair(again, { redelivery: 2 });
  assert.deepEqual(twice.appended.map((event) => event.data.redelivery), [undefined, 2, 2]);
  // A balanced log: repair appends nothing; a log S46 refuses is InvalidLogError.
  assert.deepEqual(Machine.repair([...log, interrupted(1)], { redelivery: 1 }).appended, []);
  assert.throws(() => Machine.repair([{ type: 'turn/start', data: {} }], { redelivery: 1 }), coxswain.InvalidLogError);
});

/** Each refused allowance with its exact message (S59): the type's, or the core's bound. */
const REFUSED = [
  [-1, 'redelivery -1 is not an integer within 0..=1000 (S59)'],
  [1.5, 'redelivery 1.5 is not an integer within 0..=1000 (S59)'],
  [NaN, 'redelivery NaN is not an integer within 0..=1000 (S59)'],
  [Infinity, 'redelivery Infinity is not an integer within 0..=1000 (S59)'],
  [-Infinity, 'redelivery -Infinity is not an integer within 0..=1000 (S59)'],
  ['1', 'redelivery "1" is not an integer within 0..=1000 (S59)'],
  [true, 'redelivery true is not an integer within 0..=1000 (S59)'],
  [1n, 'redelivery 1n is not an integer within 0..=1000 (S59)'],
  [[1], 'redelivery an array is not an integer within 0..=1000 (S59)'],
  [2 ** 53, 'redelivery 9007199254740992 is not an integer within 0..=1000 (S59)'],
  [1001, 'the redelivery allowance 1001 is above 1000 (S59)'],
  [Number.MAX_SAFE_INTEGER, 'the redelivery allowance 9007199254740991 is above 1000 (S59)'],
];

function refusedAs(value, message) {
  return (error) => {
    assert.ok(error instanceof coxswain.InvalidRedeliveryError, error.stack);
    assert.ok(error instanceof coxswain.InvalidOptionsError);
    assert.equal(error.kind, 'invalid-options');
    assert.equal(error.message, message);
    assert.ok(Object.is(error.value, value) || (Array.isArray(value) && error.value === value));
    return true;
  };
}

test('S59: a bad allowance is refused at Machine.repair with a typed error naming it', () => {
  const log = crashedLog();
  for (const [value, message] of REFUSED) {
    assert.throws(() => Machine.repair(log, { redelivery: value }), refusedAs(value, message), String(value));
  }
  // The bound itself is accepted; absent and null are 0.
  assert.equal(Machine.repair(log, { redelivery: 1000 }).appended.length, 3);
  assert.equal(Machine.repair(log, { redelivery: null }).appended.length, 1);
  assert.equal(Machine.repair(log).appended.length, 1);
});

test('S59: a bad allowance is refused at Agent.open before the log is read or written', async (t) => {
  const file = path.join(tempDir(t), 'session.jsonl');
  const bytes = crashedLog().map((event, k) => JSON.stringify({ seq: k + 1, ...event })).join('\n') + '\n';
  fs.writeFileSync(file, bytes);
  for (const [value, message] of REFUSED) {
    // A log that counts what is asked of it.
    const calls = [];
    const spy = {};
    for (const name of ['readAll', 'repairTail', 'append', 'sync', 'close']) {
      spy[name] = async () => calls.push(name);
    }
    await assert.rejects(Agent.open({ step: () => 'completed' }, spy, { redelivery: value }), refusedAs(value, message));
    assert.deepEqual(calls, [], 'nothing read or written');
    const log = await FileLog.open(file);
    await assert.rejects(Agent.open({ step: () => 'completed' }, log, { redelivery: value }), refusedAs(value, message));
    await log.close();
    assert.equal(fs.readFileSync(file, 'utf8'), bytes, 'the log is unchanged');
  }
  await assert.rejects(Agent.open({ step: () => 'completed' }, new MemoryLog(), { resumeOnOpen: 1 }), {
    name: 'InvalidOptionsError',
    message: 'resumeOnOpen 1 is not a boolean',
  });
  // The module's own resume (used by Agent.open) checks it too, before reading.
  const { resume } = require('../log');
  const calls = [];
  const spy = { readAll: async () => calls.push('readAll') };
  await assert.rejects(resume(spy, null, -1), refusedAs(-1, REFUSED[0][1]));
  assert.deepEqual(calls, []);
});

/** A host whose pre-step never answers until its turn is aborted: the crash point of S59. */
function hangingPreStep(seen) {
  return {
    preStep(cx) {
      seen.push(cx.messages.map((message) => message.id));
      return new Promise((resolve) => cx.signal.addEventListener('abort', () => resolve({ enter: cx.messages })));
    },
    step: () => 'completed',
  };
}

/** Opens an agent with `host` on `file`, waits until its pre-step is outstanding, closes it. */
async function crashInPreStep(file, deliver, options = {}) {
  const seen = [];
  let outstanding;
  const called = new Promise((resolve) => { outstanding = resolve; });
  const host = hangingPreStep(seen);
  const preStep = host.preStep;
  host.preStep = (cx) => { outstanding(); return preStep(cx); };
  const { agent } = await Agent.open(host, await FileLog.open(file), options);
  await deliver(agent);
  await called;
  await agent.close();
  return seen;
}

test('S59, I16: an agent opened with redelivery 1 puts back what the crash cut off; resumeOnOpen runs it', async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'crashed.jsonl');
  const seen = await crashInPreStep(file, async (agent) => {
    await agent.inject(quiet);
    await agent.followup(a);
  });
  assert.deepEqual(seen, [['x', 'a']]);
  const crashed = fs.readFileSync(file);
  assert.equal(records(file).length, 5);
  const copy = (name) => {
    const there = path.join(dir, name);
    fs.writeFileSync(there, crashed);
    return there;
  };
  const [plain, redelivered, resumed] = [copy('plain.jsonl'), copy('redelivered.jsonl'), copy('resumed.jsonl')];

  // Default options: S50 unchanged, nothing is put back and nothing runs.
  const steps = [];
  const host = { step: (cx) => { steps.push(cx.turn); return 'completed'; } };
  let opened = await Agent.open(host, await FileLog.open(plain));
  assert.deepEqual(opened.recovery, {
    records: 5, tornTail: null, interruptedTurn: 1, closers: 1, redelivered: 0,
    lastTurn: 1, pendingNextTurn: 0, pendingNextStep: 0,
  });
  assert.deepEqual(await opened.agent.fate('a'), { claimed: { turn: 1, end: 'interrupted' } });
  assert.deepEqual(await opened.agent.fate('x'), { claimed: { turn: 1, end: 'interrupted' } });
  await opened.agent.close();
  assert.deepEqual(records(plain).slice(5), [{ seq: 6, ...interrupted(1) }]);

  // redelivery 1: the closers, then x and a again, at the front of their lists; parked (S48).
  opened = await Agent.open(host, await FileLog.open(redelivered), { redelivery: 1 });
  assert.deepEqual(opened.recovery, {
    records: 5, tornTail: null, interruptedTurn: 1, closers: 3, redelivered: 2,
    lastTurn: 1, pendingNextTurn: 1, pendingNextStep: 1,
  });
  const expected = [
    { seq: 6, ...interrupted(1) },
    { seq: 7, type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [quiet], redelivery: 1 } },
    { seq: 8, type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [a], wakeup: true, redelivery: 1 } },
  ];
  assert.deepEqual(records(redelivered).slice(5), expected);
  assert.deepEqual(await opened.agent.fate('x'), { pending: 'next-step' });
  assert.deepEqual(await opened.agent.fate('a'), { pending: 'next-turn' });
  await opened.agent.whenIdle();
  assert.equal(opened.agent.status, 'idle');
  assert.deepEqual(steps, [], 'parked: no turn runs without a wake');
  // agent.resume() (S57) starts it.
  await opened.agent.resume();
  await opened.agent.whenIdle();
  assert.deepEqual(steps, [2]);
  assert.deepEqual(await opened.agent.fate('a'), { claimed: { turn: 2, step: 1, end: 'completed' } });
  await opened.agent.close();
  assert.equal(cli('verify', redelivered).status, 0, cli('verify', redelivered).stderr);

  // resumeOnOpen: the redelivered work runs its turn without any send.
  steps.length = 0;
  opened = await Agent.open(host, await FileLog.open(resumed), { redelivery: 1, resumeOnOpen: true });
  await opened.agent.whenIdle();
  assert.deepEqual(steps, [2]);
  assert.deepEqual(await opened.agent.fate('x'), { claimed: { turn: 2, step: 1, end: 'completed' } });
  assert.deepEqual(await opened.agent.fate('a'), { claimed: { turn: 2, step: 1, end: 'completed' } });
  assert.deepEqual(records(resumed).slice(5, 8), expected);
  assert.deepEqual(records(resumed).slice(8, 10), [
    { seq: 9, type: 'turn/start', data: { turn: 2 } },
    { seq: 10, type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, removedCount: 1, inserted: [] } },
  ]);
  // Fate after dispose (S58): answered from the ended agent's records; resume is rejected.
  await opened.agent.inject(userMessage('late', 'never runs'));
  await opened.agent.dispose();
  assert.deepEqual(await opened.agent.fate('late'), 'discarded');
  assert.deepEqual(await opened.agent.fate('a'), { claimed: { turn: 2, step: 1, end: 'completed' } });
  assert.deepEqual(await opened.agent.fate('nobody'), 'unknown');
  await assert.rejects(opened.agent.resume(), coxswain.DisposedError);
  await assert.rejects(opened.agent.fate(null), { name: 'InvalidInputError', message: 'fate takes a message id (a string), not null' });
  assert.equal(cli('verify', resumed).status, 0, cli('verify', resumed).stderr);

  // A disposed log opened with resumeOnOpen: nothing to resume, the agent opens.
  opened = await Agent.open(host, await FileLog.open(resumed), { resumeOnOpen: true });
  assert.equal(await opened.agent.fate('late'), 'discarded');
  await opened.agent.close();
});

test('I16: a second crash before any model call saw them: the allowance is spent, they stay claimed', async (t) => {
  const file = path.join(tempDir(t), 'twice.jsonl');
  await crashInPreStep(file, (agent) => agent.followup(a));
  // Redelivered once, resumed, and cut off again in the same place.
  const seen = await crashInPreStep(file, async () => {}, { redelivery: 1, resumeOnOpen: true });
  assert.deepEqual(seen, [['a']]);
  const { agent, recovery } = await Agent.open({ step: () => 'completed' }, await FileLog.open(file), { redelivery: 1 });
  assert.equal(recovery.interruptedTurn, 2);
  assert.equal(recovery.redelivered, 0);
  assert.deepEqual(await agent.fate('a'), { claimed: { turn: 2, end: 'interrupted' } });
  await agent.close();
  assert.deepEqual(records(file).slice(-1), [{ seq: 8, ...interrupted(2) }]);
});
