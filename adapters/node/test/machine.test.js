'use strict';
// The Machine class: the core's drain contract, typed rejections, restore (S46–S48), and every
// corpus trace replayed through `handle` + `intoOutputs` (FORMAT.md), compared by JSON value.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const coxswain = require('..');
const { corpus, readTrace } = require('./support/trace');

const { Machine, userMessage } = coxswain;

test('every corpus trace replays through Machine.handle + intoOutputs', async (t) => {
  for (const file of corpus()) {
    await t.test(path.basename(file), () => {
      const trace = readTrace(file);
      const given = trace.given ?? {};
      let machine;
      try {
        machine = Machine.restore(given.log ?? [], { seedLength: given.seedLength, memory: given.memory });
      } catch (error) {
        assert.ok(trace.invalidLog, `restore failed: ${error.message}`);
        assert.ok(error instanceof coxswain.InvalidLogError);
        assert.equal(error.kind, 'invalid-log');
        return;
      }
      assert.ok(!trace.invalidLog, 'S47: restoring must fail');
      for (const step of trace.steps) {
        let actual;
        try {
          actual = { outputs: machine.handle(step.input).intoOutputs() };
        } catch (error) {
          assert.ok(error instanceof coxswain.RejectedError, error.stack);
          actual = { rejected: error.kind };
        }
        assert.deepEqual(actual, step.expected, JSON.stringify(step.input));
      }
    });
  }
});

test('the drain contract: events first, effects once persisted, the next input waits (S1)', () => {
  const machine = new Machine();
  const m1 = userMessage('m1', 'hello');
  const transition = machine.followup(m1);
  assert.equal(transition.found, true);
  assert.deepEqual(transition.events, [
    {
      type: 'agent/inbox/spliced',
      data: { target: 'next-turn', start: 0, inserted: [m1], wakeup: true },
    },
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } },
  ]);
  // Undrained: the core refuses the next input, changing nothing.
  assert.throws(() => machine.steer(userMessage('s1', 'x')), (error) => {
    assert.ok(error instanceof coxswain.UndrainedError);
    assert.equal(error.kind, 'undrained');
    return true;
  });
  // `drain` hands the same transition back.
  const again = machine.drain();
  assert.deepEqual(again.events, transition.events);
  assert.deepEqual(again.persisted(), [
    { notify: { type: 'agent/inbox/inserted', message: m1 } },
    { notify: { type: 'agent/status', status: 'running' } },
    { begin: { turn: 1 } },
    { notify: { type: 'agent/inbox/claimed', message: m1, turn: 1 } },
    { request: { preStep: { turn: 1, step: 1, messages: [m1] } } },
  ]);
  assert.deepEqual(transition.persisted(), [], 'drained once');
  assert.deepEqual(machine.outstanding, { preStep: { turn: 1, step: 1 } });
  assert.equal(machine.status, 'running');
  assert.equal(machine.quiescent, false);

  machine.answerPreStep({ enter: [m1] }).persisted();
  const step = machine.answerStep('completed');
  assert.deepEqual(step.events, [{ type: 'step/end', data: { turn: 1, step: 1 } }]);
  assert.deepEqual(step.persisted(), [{ request: { turnStopping: { turn: 1 } } }]);
  const end = machine.answerTurnStopping('done');
  assert.deepEqual(end.events, [{ type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } }]);
  assert.deepEqual(end.persisted(), [{ notify: { type: 'agent/status', status: 'idle' } }]);
  assert.equal(machine.quiescent, true);
});

test('typed rejections, one Error subclass per kind, each leaving the machine unchanged (S5)', () => {
  const machine = new Machine({ memory: 4 });
  const a = userMessage('a', 'quiet');
  machine.inject(a).persisted();
  const expectReject = (run, Class, kind) =>
    assert.throws(run, (error) => {
      assert.ok(error instanceof Class, `${error.name}: ${error.message}`);
      assert.ok(error instanceof coxswain.RejectedError);
      assert.ok(error instanceof Error);
      assert.equal(error.kind, kind);
      assert.equal(error.name, Class.name);
      return true;
    });
  // S13
  expectReject(() => machine.inject(a), coxswain.AlreadyPendingError, 'already-pending');
  // S4
  expectReject(() => machine.answerStep('completed'), coxswain.UnexpectedCompletionError, 'unexpected-completion');
  expectReject(() => machine.endMaintenance(), coxswain.UnexpectedCompletionError, 'unexpected-completion');
  // S52: removed, so the delivery memory holds it
  const removed = machine.remove('a');
  assert.equal(removed.found, true);
  removed.persisted();
  assert.equal(machine.remembers('a'), true);
  expectReject(() => machine.inject(a), coxswain.AlreadyDeliveredError, 'already-delivered');
  // S43
  machine.followup(userMessage('b', 'go')).persisted();
  expectReject(() => machine.beginMaintenance(), coxswain.BusyError, 'busy');
  // S45
  const disposal = machine.dispose();
  assert.deepEqual(disposal.persisted().at(-1), { request: { abort: { cause: { kind: 'disposed' } } } });
  machine.answerPreStep('reject').persisted();
  assert.equal(machine.disposed, true);
  expectReject(() => machine.followup(userMessage('c', 'late')), coxswain.DisposedError, 'disposed');
  // An input of unknown shape is not a rejection.
  assert.throws(() => new Machine().handle({ bogus: 1 }), coxswain.InvalidInputError);
  // A message nesting deeper than a log record can hold (MAX_MESSAGE_DEPTH 124).
  let deep = 'x';
  for (let i = 0; i < 124; i += 1) deep = [deep]; // the message nests 125 levels
  expectReject(() => new Machine().followup(userMessage('d', deep)), coxswain.TooDeepError, 'too-deep');
  assert.throws(() => new Machine({ memory: -1 }), coxswain.InvalidOptionsError);
});

test('S46–S48: restore parks items without waking; S47 refuses an invalid log', () => {
  const m = userMessage('p', 'parked');
  const machine = Machine.restore(
    [
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } },
      { seq: 3, type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [m], wakeup: true } },
      { type: 'model/output', data: { text: 'a host event' } },
    ],
    { memory: 2 },
  );
  assert.deepEqual(machine.state(), {
    status: 'idle',
    quiescent: true,
    disposed: false,
    maintenance: false,
    cancelRequested: false,
    lastTurn: 1,
    outstanding: null,
    nextTurn: [{ message: m, wakeup: true }],
    nextStep: [],
  });
  assert.throws(
    () => Machine.restore([{ type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 1, inserted: [] } }]),
    (error) => error instanceof coxswain.InvalidLogError && /splice `start`/.test(error.message),
  );
});
