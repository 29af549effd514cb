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
      const options = { seedLength: given.seedLength, memory: given.memory, maxPending: given.maxPending };
      let machine;
      try {
        if (given.repair === undefined) {
          machine = Machine.restore(given.log ?? [], options);
        } else {
          // S50, S59: crash repair with the trace's allowance, then restore.
          const repaired = Machine.repair(given.log ?? [], { ...options, redelivery: given.repair.redeliver });
          machine = repaired.machine;
          assert.deepEqual(repaired.appended.map((event) => ({ event })), trace.repaired, 'the events repair appended');
        }
      } catch (error) {
        assert.ok(trace.invalidLog, `restore failed: ${error.message}`);
        assert.ok(error instanceof coxswain.InvalidLogError);
        assert.equal(error.kind, 'invalid-log');
        return;
      }
      assert.ok(!trace.invalidLog, 'S47: restoring must fail');
      for (const step of trace.steps) {
        if (step.fate !== undefined) {
          assert.deepEqual(machine.fate(step.fate), step.is, `fate(${JSON.stringify(step.fate)}) (S58)`);
          continue;
        }
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
  // A follow-up, steer or inject crosses as its message's own text (src/machine.rs `deliver`):
  // one that is no message object is of unknown shape too, and changes nothing (S5).
  const shapeless = new Machine();
  for (const deliver of ['followup', 'steer', 'inject']) {
    for (const notMessage of [5, 'text', null, [], { source: { kind: 'user' } }, { id: 7 }]) {
      assert.throws(() => shapeless[deliver](notMessage), coxswain.InvalidInputError, `${deliver}(${JSON.stringify(notMessage)})`);
    }
  }
  assert.deepEqual(shapeless.state().nextTurn, []);
  assert.deepEqual(shapeless.state().nextStep, []);
  const ok = userMessage('ok', 'go');
  const accepted = shapeless.followup(ok);
  assert.deepEqual(accepted.events, [
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [ok], wakeup: true } },
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } },
  ]);
  accepted.persisted();
  // Each preset is its own input: a steer joins the running turn's next step, an inject rides along quietly.
  const [steered, injected] = [userMessage('s', 'steer'), userMessage('i', 'inject')];
  const steer = shapeless.steer(steered);
  assert.deepEqual(steer.events, [
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [steered], wakeup: true } },
  ]);
  steer.persisted();
  assert.deepEqual(shapeless.inject(injected).events, [
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 1, inserted: [injected] } },
  ]);
  // A message nesting deeper than a log record can hold (MAX_MESSAGE_DEPTH 124) is the log's
  // to refuse (the agent's admission): a bare Machine has no depth limit (decision 8).
  let deep = 'x';
  for (let i = 0; i < 124; i += 1) deep = [deep]; // the message nests 125 levels
  assert.equal(new Machine().followup(userMessage('d', deep)).events[0].type, 'agent/inbox/spliced');
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

// ---- SPEC §12: guards (S54), the admission bound (S55), conflicts (S56) ----------------------

/** Asserts `run` throws an error of `Class` and returns it. */
function rejects(run, Class) {
  let caught;
  assert.throws(run, (error) => {
    assert.ok(error instanceof Class, `${error.name}: ${error.message}`);
    assert.ok(error instanceof coxswain.RejectedError);
    caught = error;
    return true;
  });
  return caught;
}

test('S54: a steer expecting the running turn joins it; one for a turn that ended is refused', () => {
  const machine = new Machine();
  const a = userMessage('a', 'hi');
  const s = userMessage('s', 'look at the tests too');
  machine.followup(a).persisted();
  assert.equal(machine.lastTurn, 1);
  const steer = machine.steerExpecting(1, s);
  assert.deepEqual(steer.events, [
    { type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [s], wakeup: true } },
  ]);
  assert.deepEqual(steer.persisted(), [{ notify: { type: 'agent/inbox/inserted', message: s } }]);
  const mismatch = rejects(() => machine.steerExpecting(2, userMessage('x', 'x')), coxswain.TurnMismatchError);
  assert.equal(mismatch.kind, 'turn-mismatch');
  assert.deepEqual(mismatch.expect, { turn: 2 });
  assert.equal(mismatch.message, 'the send expected turn 2 running, which does not hold');
  assert.equal(mismatch.wasDelivered, false);
  // The identity check comes first: the retry of the accepted steer is a delivery.
  const retry = rejects(() => machine.steerExpecting(2, s), coxswain.AlreadyPendingError);
  assert.equal(retry.wasDelivered, true);
  assert.equal(retry.id, 's');
  machine.answerPreStep({ enter: [a] }).persisted();
  machine.answerStep('completed').persisted();
  machine.answerPreStep({ enter: [s] }).persisted();
  machine.answerStep('completed').persisted();
  machine.answerTurnStopping('done').persisted();
  assert.equal(machine.status, 'idle');
  const late = rejects(() => machine.steerExpecting(1, userMessage('late', 'late')), coxswain.TurnMismatchError);
  assert.deepEqual(late.expect, { turn: 1 });
  // Idle after turn 1: only `idleAfter: 1` holds.
  rejects(() => machine.followupIfIdleAfter(0, userMessage('b', 'b')), coxswain.TurnMismatchError);
  const quiet = machine.send(userMessage('q', 'q'), 'next-turn', false, { expect: { idleAfter: 1 } });
  assert.equal(quiet.events.length, 1);
  quiet.persisted();
  const next = machine.followupIfIdleAfter(1, userMessage('b', 'b'));
  assert.deepEqual(next.events[1], { type: 'turn/start', data: { turn: 2 } });
});

test('S55: maxPending refuses a delivery into a full list; a restored longer list is kept', () => {
  const machine = new Machine({ maxPending: 1 });
  assert.equal(machine.maxPending, 1);
  assert.equal(new Machine().maxPending, null);
  machine.inject(userMessage('a', 'a')).persisted();
  const full = rejects(() => machine.inject(userMessage('b', 'b')), coxswain.FullError);
  assert.equal(full.kind, 'full');
  assert.equal(full.target, 'next-step');
  assert.equal(full.maxPending, 1);
  assert.equal(full.message, 'the next-step list is full (1 items pending)');
  assert.equal(full.wasDelivered, false);
  rejects(() => machine.prepend('next-step', userMessage('b', 'b')), coxswain.FullError);
  // Identity before the bound (S54's order); a replace keeps the length.
  rejects(() => machine.inject(userMessage('a', 'a')), coxswain.AlreadyPendingError);
  assert.equal(machine.replace('a', userMessage('a2', 'x')).found, true);
  assert.throws(() => new Machine({ maxPending: 0 }), coxswain.InvalidOptionsError);
  assert.throws(() => new Machine({ maxPending: 1.5 }), coxswain.InvalidOptionsError);
  const log = [];
  const plain = new Machine();
  for (const id of ['t1', 't2']) {
    const sent = plain.send(userMessage(id, id), 'next-turn', false);
    log.push(...sent.events);
    sent.persisted();
  }
  const restored = Machine.restore(log, { maxPending: 1 });
  assert.deepEqual(restored.state().nextTurn.map((p) => p.message.id), ['t1', 't2']);
  rejects(() => restored.send(userMessage('t3', 't3'), 'next-turn', false), coxswain.FullError);
});

test('S56: an id reused for another message is a conflict, never success', () => {
  const machine = new Machine({ memory: 2 });
  const counted = { id: 'n', source: { kind: 'user' }, content: { count: 1, text: 'x' } };
  machine.inject(counted).persisted();
  const conflict = rejects(() => machine.inject(userMessage('n', 'other')), coxswain.ConflictError);
  assert.equal(conflict.kind, 'conflict');
  assert.equal(conflict.id, 'n');
  assert.equal(conflict.wasDelivered, false);
  assert.equal(conflict.message, 'message id `n` is already used by a different message');
  rejects(() => machine.followup({ ...counted, source: { kind: 'plugin' } }), coxswain.ConflictError);
  // The same JSON value, keys in another order, is a retry.
  const same = { content: { text: 'x', count: 1 }, source: { kind: 'user' }, id: 'n' };
  assert.equal(rejects(() => machine.steer(same), coxswain.AlreadyPendingError).wasDelivered, true);
  machine.remove('n').persisted();
  rejects(() => machine.inject(userMessage('n', 'other')), coxswain.ConflictError);
  assert.equal(rejects(() => machine.inject(same), coxswain.AlreadyDeliveredError).wasDelivered, true);
});

test('intoOutputs({begin: true}): each begin where its activity begins; without it, FORMAT.md order', () => {
  const a = userMessage('a', 'hi');
  const spliced = { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [a], wakeup: true } } };
  const start = { event: { type: 'turn/start', data: { turn: 1 } } };
  const claim = { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } } };
  const rest = [
    { notify: { type: 'agent/inbox/claimed', message: a, turn: 1 } },
    { request: { preStep: { turn: 1, step: 1, messages: [a] } } },
  ];
  const head = [
    spliced,
    { notify: { type: 'agent/inbox/inserted', message: a } },
    { notify: { type: 'agent/status', status: 'running' } },
    start,
  ];
  assert.deepEqual(new Machine().followup(a).intoOutputs({ begin: true }), [...head, { begin: { turn: 1 } }, claim, ...rest]);
  assert.deepEqual(new Machine().followup(a).intoOutputs(), [...head, claim, ...rest]);
  const idle = new Machine();
  assert.deepEqual(idle.beginMaintenance().intoOutputs({ begin: true }), [{ begin: { maintenance: {} } }]);
  assert.deepEqual(idle.endMaintenance().intoOutputs({ begin: true }), []);
});
