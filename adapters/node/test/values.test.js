'use strict';
// Values crossing to the core are kept exactly or refused at the call (issue 28, item 2): a value
// JSON cannot carry (NaN, ±Infinity, undefined in an array, a function, a symbol, a BigInt, an
// object that is not plain, a cycle) throws `InvalidInputError` and changes nothing (S5) — on the
// Machine, through the Agent (nothing written to its log), and in recorded host events. A field
// holding `undefined` is absent, as in JSON and TypeScript.

const test = require('node:test');
const assert = require('node:assert/strict');
const coxswain = require('..');

const { Agent, Machine, MemoryLog, userMessage, InvalidInputError } = coxswain;

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
    ['a BigInt', 2n ** 70n, 'a BigInt is not a JSON value here (content integers cross as numbers) (at "content")'],
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
  // The machine was not left undrained: the next input is accepted.
  const next = machine.inject(userMessage('next', { kept: true, absent: undefined }));
  assert.deepEqual(next.events[0].data.inserted, [{ id: 'next', source: { kind: 'user' }, content: { kept: true } }]);
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
