'use strict';
// Machine.beginBatch / commitBatch / rollBackBatch: a harness that owns its log hands a batch
// whose append failed back to the machine, which is then exactly as before it (S5 extended to
// a failed persistence), and goes on.

const test = require('node:test');
const assert = require('node:assert/strict');
const coxswain = require('..');

const { Machine, userMessage, BatchError, UndrainedError } = coxswain;

/** Everything a host can ask the machine. */
function view(machine) {
  return { state: machine.state(), c: machine.remembers('c'), a: machine.remembers('a') };
}

test('a failed append rolls the batch back and the machine goes on', () => {
  const machine = new Machine({ memory: 4 });
  machine.inject(userMessage('c', 'ctx')).persisted();
  const before = view(machine);
  machine.beginBatch();
  assert.equal(machine.batchOpen, true);
  const first = machine.followup(userMessage('a', 'hello'));
  const events = [...first.events];
  first.persisted(); // the harness holds the effects until the append is durable
  const second = machine.steer(userMessage('b', 'more'));
  events.push(...second.events);
  second.persisted();
  assert.equal(events.length, 5, 'a: splice, turn/start, the claims of c (NS) and a (NT); b: splice');
  assert.equal(machine.lastTurn, 1);
  assert.equal(machine.remembers('a'), true);
  // The append was refused: take the whole batch back.
  machine.rollBackBatch();
  assert.equal(machine.batchOpen, false);
  assert.deepEqual(view(machine), before);
  assert.equal(machine.lastTurn, 0);
  // The same input is accepted again, and this time the append works.
  machine.beginBatch();
  machine.followup(userMessage('a', 'hello')).persisted();
  machine.commitBatch();
  assert.equal(machine.lastTurn, 1);
  assert.equal(machine.remembers('a'), true);
});

test('batch calls that do not fit throw BatchError and change nothing', () => {
  const machine = new Machine();
  assert.throws(() => machine.commitBatch(), (e) => e instanceof BatchError && e.kind === 'not-open');
  assert.throws(() => machine.rollBackBatch(), (e) => e instanceof BatchError && e.kind === 'not-open');
  machine.beginBatch();
  assert.throws(() => machine.beginBatch(), (e) => e instanceof BatchError && e.kind === 'already-open');
  machine.commitBatch();
  const pending = machine.followup(userMessage('a', 'hello')); // not persisted yet
  assert.throws(() => machine.beginBatch(), (e) => e instanceof BatchError && e.kind === 'undrained');
  assert.equal(machine.batchOpen, false);
  pending.persisted();
  assert.ok(new BatchError('not-open') instanceof coxswain.CoxswainError);
});

test('a transition left unpersisted goes with the rollback', () => {
  const machine = new Machine();
  machine.beginBatch();
  machine.followup(userMessage('a', 'hello')); // its effects stay queued
  assert.throws(() => machine.steer(userMessage('b', 'x')), UndrainedError);
  machine.rollBackBatch();
  assert.deepEqual(machine.drain().persisted(), []);
  assert.equal(machine.lastTurn, 0);
  assert.equal(machine.followup(userMessage('a', 'hello')).found, true);
});

test('the session layer names host failures and every agent draws its own hash seed', async () => {
  const native = require('../native');
  const codes = ['panicked', 'raised', 'cancelled', 'abandoned', 'invalid-answer'].map(
    (failure) => JSON.parse(native.hostFailure(failure, 'step', '')).code,
  );
  assert.deepEqual(codes, ['host-panicked', 'host-raised', 'host-cancelled', 'host-abandoned', 'host-invalid-answer']);
  assert.deepEqual(JSON.parse(native.hostFailure('raised', 'preStep', 'boom')), {
    message: "the host's preStep call raised: boom",
    code: 'host-raised',
  });
  assert.ok(JSON.parse(native.hostFailure('exploded', 'step', '')).error);
  assert.equal(new native.NativeMachine(0, null).hashSeed(), '0000000000000000');
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-seed-'));
  const seeds = [];
  for (const name of ['a', 'b', 'c']) {
    const log = await coxswain.FileLog.open(path.join(dir, `${name}.jsonl`));
    const { agent } = await coxswain.Agent.open({}, log);
    seeds.push(agent._s.hashSeed);
    await agent.close();
  }
  assert.equal(new Set(seeds).size, 3, seeds.join(' '));
});

// The agent's loop (`session.js` `Loop` over the native `NativeAgent`, the session layer's
// `AgentLoop`): internal since issue 51 (decision 8), tested here through each of its calls.

/** A loop over a fresh machine; `hooks` the host wrote (both, unless told). */
function loopOf(options = {}, hooks = { preStep: true, turnStopping: true }) {
  const { Loop } = require('../session');
  const { agentOptions } = require('../options');
  return new Loop(new Machine({ memory: 4 }), agentOptions(options), hooks, 1);
}

/** A turn as plain data: replies (errors by kind), effects, the append's entry types, quiescent. */
function plain(turn) {
  const outputs = turn.outputs.map((o) => (o.error ? { reply: o.reply, error: o.error.kind } : o));
  const entries = turn.append && Array.from({ length: turn.append.count }, (_, k) => turn.append.entries[k]?.type);
  return JSON.parse(JSON.stringify({ outputs, entries, deadline: turn.deadline, quiescent: turn.quiescent }));
}

test('Loop: a command that crosses without text (a delivery, a word, enter by handle) does what its JSON text does', () => {
  const { ENCODED } = require('../log');
  // The same turn through two loops: one hands each command alone (its fast path), the other
  // beside a stale answer (dropped by the loop), which sends the batch as JSON text.
  const run = (alone) => {
    const loop = loopOf();
    let seq = 1;
    const seen = [];
    const step = (command) => {
      let turn = loop.submit(alone ? [command] : [command, { nothing: ['step', 99, 99] }]);
      seen.push(plain(turn));
      while (turn.append !== null) {
        seen.push(turn.append.entries[ENCODED].lines);
        const { count } = turn.append;
        turn = loop.appended(0, 0, seq, count);
        seq += count;
        seen.push(plain(turn));
      }
      return turn;
    };
    const message = userMessage('m', { parts: ['x'] });
    const request = step({ input: [1, { followup: message }] }).outputs.find((o) => o.request).request.preStep;
    assert.ok(request.messages[0] === message, 'S8: the delivered object');
    step({ answer: ['step', 1, 1, { step: 'completed' }] }); // not outstanding: stale, dropped
    step({ answer: ['preStep', 1, 1, { preStep: { enter: request.messages } }] });
    const next = step({ answer: ['step', 1, 1, { step: 'continue' }] }).outputs.find((o) => o.request).request.preStep;
    assert.equal(next.step, 2);
    step({ answer: ['preStep', 1, 2, { preStep: 'reject' }] });
    return seen;
  };
  const alone = run(true);
  assert.deepEqual(alone, run(false));
  const appends = alone.filter((s) => s.entries).map((s) => [s.entries, s.quiescent]);
  assert.deepEqual(appends, [
    [['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced'], false],
    [['step/start', 'user/message'], false],
    [['step/end'], false],
    [['turn/end'], true], // a pre-step `reject` ends the turn
  ]);
  assert.match(alone.at(-2), /^\{"seq":7,"type":"turn\/end","data":\{"turn":1,"reason":\{"kind":"blocked"\}\}\}\n$/);
});

test('Loop: a failed append fails its members, a held answer is staged again after the pause, the grace, the ending', () => {
  const loop = loopOf({ abortGraceMs: 1000, retryAfterMs: 100 });
  const kinds = (turn) => turn.outputs.filter((o) => o.reply !== undefined).map((o) => [o.reply, o.found ?? o.failed ?? o.error?.kind ?? o.value]);
  let turn = loop.submit([
    { input: [1, { followup: userMessage('a', 'hi') }] },
    { input: [2, { inject: userMessage('b', 'ctx') }] },
    { input: [3, { inject: userMessage('b', 'ctx') }] },
  ]);
  assert.equal(turn.append.count, 4);
  // The write failed (decision 4): every member fails (persistence), the agent goes on.
  turn = loop.appended(1, 0, 0, 0);
  assert.deepEqual(kinds(turn), [[1, 'persistence'], [2, 'persistence'], [3, 'persistence']]);
  assert.equal(loop.state().lastTurn, 0);
  turn = loop.submit([{ input: [4, { followup: userMessage('a', 'hi') }] }, { input: [5, { followup: userMessage('a', 'hi') }] }]);
  turn = loop.appended(0, 0, 1, turn.append.count);
  // The retry was refused against the first, staged before it: claimed, the memory holds it (S52).
  assert.deepEqual(kinds(turn), [[4, true], [5, 'already-delivered']]);
  const request = turn.outputs.find((o) => o.request).request.preStep;
  turn = loop.submit([{ answer: ['preStep', 1, 1, { preStep: { enter: request.messages } }] }]);
  // That write fails at 5 ms: the host will not answer twice, so the loop holds its answer and
  // stages it again after the retry pause (100 ms).
  turn = loop.appended(1, 5, 0, 0);
  assert.deepEqual([turn.outputs, turn.append, turn.deadline], [[], null, 105]);
  assert.equal(loop.timeout(104).append, null);
  turn = loop.timeout(105);
  assert.deepEqual(plain(turn).entries, ['step/start', 'user/message']);
  turn = loop.appended(0, 105, 4, 2);
  assert.deepEqual(turn.outputs.map((o) => Object.keys(o.request ?? {})), [['step']]);
  // Host events outside their step, or of the machine's own type, are refused at once.
  turn = loop.submit([
    { record: [6, 1, 2, [{ type: 'model/output', data: {} }]] },
    { record: [7, 1, 1, [{ type: 'turn/end', data: {} }]] },
    { input: [8, { cancel: { cause: { kind: 'user' } } }] },
  ]);
  // The cancel writes no record: its batch is durable at once (at 105 ms, the clock last told).
  assert.deepEqual(kinds(turn), [[7, 'reserved-type'], [6, 'step-closed'], [8, true]]);
  assert.deepEqual([turn.append, turn.deadline], [null, 1105], 'the abort grace (S38, S39)');
  assert.equal(loop.timeout(1104).append, null);
  turn = loop.timeout(1105);
  assert.deepEqual(plain(turn).outputs, [{ abandoned: true }]);
  assert.deepEqual(turn.append.entries[turn.append.count - 1], {
    type: 'turn/end', data: { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } },
  });
  turn = loop.appended(0, 1105, 6, turn.append.count);
  assert.match(loop.hashSeed, /^[0-9a-f]{16}$/);
  // Close: the loop ends; once the ending is published (`finish`) its caller is answered, and
  // every later command at once (a fate too, S58).
  turn = loop.submit([{ close: 9 }, { fate: [10, 'a'] }]);
  assert.deepEqual(plain(turn).outputs, [{ ended: 'closed', why: 0 }]);
  assert.deepEqual(kinds(loop.finish()), [[9, 'closed'], [10, { claimed: { end: 'aborted', step: 1, turn: 1 } }]]);
  assert.deepEqual(kinds(loop.submit([{ input: [11, { inject: userMessage('c', 'x') }] }])), [[11, 'closed']]);
});

test('Agent.open refuses options out of bounds, naming them (retryAfterMs, as abortGraceMs: decision 6)', async () => {
  const { Agent, MemoryLog, InvalidOptionsError } = coxswain;
  await assert.rejects(Agent.open({}, new MemoryLog(), { maxMessageBytes: 0 }), {
    name: 'InvalidOptionsError', message: 'maxMessageBytes 0 is not an integer within 1..=2^32-1',
  });
  await assert.rejects(Agent.open({}, new MemoryLog(), { retryAfterMs: -1 }), {
    name: 'InvalidOptionsError', message: 'retryAfterMs -1 is not a finite number of milliseconds >= 0',
  });
  await assert.rejects(Agent.open({}, new MemoryLog(), { retryAfterMs: Infinity }), InvalidOptionsError);
  // The defaults are the session layer's (Options::DEFAULT), read from the addon.
  assert.deepEqual({ ...require('../options').DEFAULTS }, {
    abortGraceMs: 5000, retryAfterMs: 100, maxBatch: 64, maxIdBytes: 256, maxMessageBytes: 1048576,
  });
});
