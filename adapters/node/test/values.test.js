'use strict';
// Values crossing to the core are kept exactly or refused at the call (issue 28, item 2): a value
// JSON cannot carry (NaN, ±Infinity, undefined in an array, a function, a symbol, a BigInt beyond
// the 64-bit integers a log holds, an object that is not plain, a cycle) throws
// `InvalidInputError` and changes nothing (S5) — on the Machine, through the Agent (nothing
// written to its log), and in recorded host events. A field holding `undefined` is absent, as
// in JSON and TypeScript. Integers beyond 2^53 round-trip exactly, as `BigInt`, through the
// machine, the log and a resume; a delivered message comes back as the one frozen object (S8).

const test = require('node:test');
const assert = require('node:assert/strict');
const coxswain = require('..');

const { Agent, Machine, MemoryLog, parseLog, userMessage, InvalidInputError } = coxswain;

function refusedValues() {
  const cycle = { name: 'loop' };
  cycle.self = cycle;
  return [
    ['NaN', NaN, 'NaN is not a JSON number (at "content")'],
    ['Infinity', Infinity, 'Infinity is not a JSON number (at "content")'],
    ['-Infinity', { n: -Infinity }, '-Infinity is not a JSON number (at "n")'],
    ['undefined in an array', [1, undefined], 'undefined in an array is not a JSON value (at "1")'],
    ['a function', { f() {} }, 'a function is not a JSON value (at "f")'],
    ['a symbol', Symbol('s'), 'a symbol is not a JSON value (at "content")'],
    ['a BigInt beyond 64 bits', 2n ** 70n, '1180591620717411303424 is beyond the 64-bit integers a log holds (at "content")'],
    ['a BigInt below -2^63', { n: -(2n ** 63n) - 1n }, '-9223372036854775809 is beyond the 64-bit integers a log holds (at "n")'],
    ['a Map', new Map([[1, 2]]), 'a Map object is not a JSON value (at "content")'],
    ['a Date', new Date(0), 'a Date object is not a JSON value (at "content")'],
    ['a cycle', cycle, 'a value nests deeper than 256 levels (or is a cycle) (at "self")'],
  ];
}

test('the Machine refuses each value JSON cannot carry with InvalidInputError, and nothing changes', () => {
  const machine = new Machine({ memory: 8 });
  machine.inject(userMessage('kept', 'context')).persisted();
  const before = machine.state();
  for (const [name, content, why] of refusedValues()) {
    for (const input of [
      () => machine.inject(userMessage('bad', content)),
      () => machine.followup(userMessage('bad', content)),
      () => machine.replace('kept', userMessage('kept', content)),
    ]) {
      assert.throws(input, (error) => error instanceof InvalidInputError && error.message === `not JSON: ${why}`, name);
      assert.deepEqual(machine.state(), before, name);
      assert.equal(machine.remembers('bad'), false, name);
    }
  }
  // The machine was not left undrained: the next input is accepted, the delivered object itself
  // in its outputs (an `undefined` field is absent from what the core holds: its wire form).
  const given = userMessage('next', { kept: true, absent: undefined });
  const next = machine.inject(given);
  assert.equal(next.events[0].data.inserted[0], given);
  assert.ok(Object.isFrozen(given) && Object.isFrozen(given.content));
});

test('S8: a delivered message is one frozen object in every output that carries it', () => {
  const machine = new Machine();
  const given = userMessage('m1', { parts: ['hello'] });
  const followup = machine.followup(given);
  assert.equal(followup.events[0].data.inserted[0], given, 'the splice of its delivery');
  const effects = followup.persisted();
  const carried = effects.flatMap((e) => [e.notify?.message, ...(e.request?.preStep?.messages ?? [])]);
  assert.deepEqual(carried.filter(Boolean).map((m) => m === given), [true, true, true], 'inserted, claimed, the pre-step batch');
  assert.ok(Object.isFrozen(given) && Object.isFrozen(given.content.parts));
  assert.throws(() => { given.content.parts.push('x'); }, TypeError);
  const enter = machine.answerPreStep({ enter: [given] });
  assert.equal(enter.events[1].type, 'user/message');
  assert.equal(enter.events[1].data, given, 'the user/message event');
  enter.persisted();
  // A message restored from a log crosses once: one object however often it comes back.
  const restored = Machine.restore([
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [{ id: 'r', content: 1 }] } },
  ]);
  const [first] = restored.state().nextStep;
  assert.equal(restored.state().nextStep[0].message, first.message);
  assert.ok(Object.isFrozen(first.message));
});

test('integers beyond 2^53 round-trip exactly as BigInt: the machine, the log, a resume', async () => {
  const big = { id: 9007199254740993n, neg: -(2n ** 63n), max: 2n ** 64n - 1n, small: 7, float: 0.5 };
  const machine = new Machine();
  const given = userMessage('m', big);
  const events = machine.inject(given).events;
  assert.equal(events[0].data.inserted[0].content.id, 9007199254740993n);
  const line = coxswain.encodeRecords(1, events).toString('utf8');
  // The record's fields are in the core's order (sorted keys), every integer as written.
  assert.match(line, /"content":\{"float":0\.5,"id":9007199254740993,"max":18446744073709551615,"neg":-9223372036854775808,"small":7\}/);
  const log = new MemoryLog();
  const { agent } = await Agent.open({ step: () => 'completed' }, log);
  await agent.inject(given);
  await agent.close();
  const { agent: resumed } = await Agent.open({ step: () => 'completed' }, new MemoryLog(log.bytes()));
  const { nextStep } = await resumed.pending();
  assert.deepEqual(nextStep[0].message.content, big);
  await resumed.close();
});

test('through the Agent: a refused value fails its call alone, nothing is written, and the agent goes on', async () => {
  const log = new MemoryLog();
  const { agent } = await Agent.open({ async step() { return 'completed'; } }, log);
  await agent.inject(userMessage('first', 'context'));
  const written = log.bytes();
  for (const [name, content, why] of refusedValues()) {
    await assert.rejects(agent.inject(userMessage('bad', content)), (error) => {
      assert.ok(error instanceof InvalidInputError, `${name}: ${error}`);
      assert.equal(error.message, `not JSON: ${why}`, name);
      return true;
    });
  }
  assert.deepEqual(log.bytes(), written, 'nothing written');
  await agent.inject(userMessage('after', [1, 2.5, 'x', null, { y: false }]));
  const last = JSON.parse(log.bytes().toString('utf8').trimEnd().split('\n').pop());
  assert.deepEqual(last.data.inserted[0].content, [1, 2.5, 'x', null, { y: false }]);
  await agent.dispose();
});

test("a host's error object keeps every JSON field it has in agent/error and turn/end", async () => {
  const failure = { message: 'rate limited', code: '429', status: 429, retry: { afterMs: 1500 }, tags: ['upstream'] };
  const machine = new Machine();
  const effects = machine.followup(userMessage('m', 'hi')).persisted();
  machine.answerPreStep({ enter: effects.at(-1).request.preStep.messages }).persisted();
  const failed = machine.answerStep({ fail: failure });
  const notified = failed.persisted().find((e) => e.notify?.type === 'agent/error');
  assert.deepEqual(notified.notify, { type: 'agent/error', turn: 1, step: 1, error: failure });
  const end = failed.events.find((e) => e.type === 'turn/end');
  assert.deepEqual(end.data, { turn: 1, reason: { kind: 'error', error: failure } });
  // Through the agent: the log's turn/end holds the host's error whole.
  const log = new MemoryLog();
  const { agent } = await Agent.open({ step: () => ({ fail: failure }) }, log);
  await agent.followup(userMessage('a', 'hi'));
  await agent.whenIdle();
  const records = log.bytes().toString('utf8').trimEnd().split('\n').map((line) => JSON.parse(line));
  const logged = records.find((r) => r.type === 'turn/end');
  assert.deepEqual(logged.data.reason, { kind: 'error', error: failure });
  await agent.dispose();
});

test('a superseded transition releases nothing: drain() handed its effects out again', () => {
  const machine = new Machine();
  const first = machine.inject(userMessage('a', 'x'));
  assert.throws(() => machine.inject(userMessage('b', 'y')), coxswain.UndrainedError);
  const again = machine.drain();
  assert.deepEqual(again.events, first.events);
  assert.ok(again.persisted().length > 0);
  const next = machine.inject(userMessage('b', 'y'));
  assert.deepEqual(first.persisted(), [], 'the superseded transition releases nothing');
  assert.ok(next.persisted().length > 0, 'and its persisted word is not taken for the next one');
  assert.ok(machine.inject(userMessage('c', 'z')).persisted().length > 0);
});

test('S8 through the agent: the host hooks and the subscribers see the delivered object', async () => {
  const given = userMessage('m', { parts: ['x'] });
  let seen = null;
  const host = {
    preStep(cx) {
      seen = cx.messages[0];
      return { enter: cx.messages };
    },
    step: () => 'completed',
  };
  const { agent } = await Agent.open(host, new MemoryLog());
  const notified = [];
  agent.subscribe((update) => update.notified?.message && notified.push(update.notified.message));
  await agent.followup(given);
  await agent.whenIdle();
  assert.equal(seen, given);
  assert.equal(notified.length, 2, 'inserted, claimed');
  assert.ok(notified.every((message) => message === given));
  assert.ok(Object.isFrozen(given.content.parts));
  await agent.dispose();
});

test('S8 through an agent nobody subscribes to: its entries are not decoded, its hooks still get the delivered objects', async () => {
  // With no listener the agent leaves a batch's entries encoded (the log writes their lines):
  // the messages of its inputs are still bound to the caller's objects, never copied.
  const [first, second] = [userMessage('a', { parts: ['x'] }), userMessage('b', 'y')];
  const seen = [];
  const host = {
    preStep(cx) {
      seen.push(...cx.messages);
      return { enter: cx.messages };
    },
    step: () => 'completed',
  };
  const log = new MemoryLog();
  const { agent } = await Agent.open(host, log);
  await Promise.all([agent.followup(first), agent.steer(second)]);
  await agent.whenIdle();
  // The follow-up starts turn 1 and is claimed at once (S28); the steer joins NS and is claimed at step 2.
  assert.deepEqual(seen.map((message) => message.id), ['a', 'b']);
  assert.ok(seen[0] === first && seen[1] === second, 'the delivered objects themselves');
  assert.ok(Object.isFrozen(first.content.parts));
  const { nextTurn, nextStep } = await agent.pending();
  assert.deepEqual([nextTurn.length, nextStep.length], [0, 0]);
  await agent.dispose();
  const types = parseLog(log.bytes()).records.map((record) => record.type);
  assert.deepEqual(types, [
    'agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'agent/inbox/spliced', 'step/start', 'user/message',
    'step/end', 'agent/inbox/spliced', 'step/start', 'user/message', 'step/end', 'turn/end',
  ]);
});
