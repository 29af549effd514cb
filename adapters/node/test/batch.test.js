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

test('Session: group commit with rollback, typed refusals, the abort grace (the session layer, sans-IO)', () => {
  const { Session } = coxswain;
  const session = new Session(new Machine({ memory: 4 }), { abortGraceMs: 1000 });
  assert.equal(session.seal(), null);
  assert.equal(session.feed({ followup: userMessage('a', 'hi') }), 0);
  assert.equal(session.feed({ inject: userMessage('b', 'ctx') }), 1);
  // Refused against the staged `b`: the refusal joins the batch, standing only once it is durable.
  assert.equal(session.feed({ inject: userMessage('b', 'ctx') }), 2);
  const first = session.seal();
  assert.equal(first.entries.length, 4);
  assert.throws(() => session.feed({ inject: userMessage('c', 'x') }), (e) => e.kind === 'sealed');
  // The write failed: every member fails and the machine is as before them.
  assert.deepEqual(session.failed(first.batch, 0), { members: [0, 1, 2], held: [] });
  assert.equal(session.state().lastTurn, 0);
  assert.deepEqual(session.pending(), { nextTurn: [], nextStep: [] });
  // Staged again, persisted: each member's effects, then its acknowledgement, in input order.
  session.feed({ followup: userMessage('a', 'hi') });
  session.feed({ followup: userMessage('a', 'hi') });
  const { batch } = session.seal();
  assert.equal(batch, first.batch + 1);
  const released = session.persisted(batch, 0);
  assert.deepEqual(released.filter((r) => r.ack === 0), [{ ack: 0, found: true }]);
  // The retry was refused against the staged first: it was claimed, so the delivery memory holds it (S52).
  assert.equal(released.at(-1).ack, 1);
  assert.ok(released.at(-1).refused instanceof coxswain.AlreadyDeliveredError);
  const request = released.find((r) => r.request).request.preStep;
  assert.throws(() => session.answer('preStep', 9, 1, { preStep: 'reject' }), (e) => e.kind === 'stale');
  assert.equal(session.answer('preStep', 1, 1, { preStep: { enter: request.messages } }), 0);
  // That write fails at 5 ms: the host will not answer twice, so the session holds its answer
  // and stages it again after its retry pause (100 ms), with the held member's batch and ticket.
  const held = session.seal().batch;
  assert.deepEqual(session.failed(held, 5), { members: [], held: [0] });
  assert.deepEqual(session.outstanding, { preStep: { turn: 1, step: 1 } });
  assert.equal(session.pollTimeout(), 105);
  assert.equal(session.handleTimeout(104), null);
  assert.deepEqual(session.handleTimeout(105), { retried: [[held, 0, 0]] });
  session.persisted(session.seal().batch, 105);
  assert.deepEqual(session.outstanding, { step: { turn: 1, step: 1 } });
  assert.throws(() => session.record(1, 2, [{ type: 'model/output', data: {} }]), coxswain.StepClosedError);
  assert.throws(() => session.record(1, 1, [{ type: 'turn/end', data: {} }]), coxswain.ReservedTypeError);
  session.feed({ cancel: { cause: { kind: 'user' } } });
  session.persisted(session.seal().batch, 10);
  assert.equal(session.pollTimeout(), 1010);
  assert.equal(session.handleTimeout(1009), null);
  assert.equal(session.handleTimeout(1010), 0);
  const ended = session.seal().entries.at(-1);
  assert.deepEqual(ended, { type: 'turn/end', data: { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } } });
  assert.match(session.hashSeed, /^[0-9a-f]{16}$/);
  assert.throws(() => new Session(new Machine(), { maxMessageBytes: 0 }), coxswain.InvalidOptionsError);
  assert.throws(() => new Session(new Machine(), { retryAfterMs: -1 }), coxswain.InvalidOptionsError);
});

test('Session.stage: an answer staged alone crosses without text and stages what its JSON text stages', () => {
  const { Session, RejectedError } = coxswain;
  const { ENCODED } = require('../log');
  // The same turn through two sessions: one stages each answer alone (a word, or `enter` by
  // handle: no text crosses), the other with a timeout beside it (not due: it stages nothing),
  // which sends the batch as JSON text. Every reply, entry, log line and release is the same.
  const run = (alone) => {
    const session = new Session(new Machine());
    const seen = [];
    let seq = 1;
    const stage = (command) => {
      const { staged, batch, entries } = session.stage(alone ? [command] : [command, { timeout: 0 }], seq);
      const result = alone ? staged : staged.slice(0, 1);
      if (batch === null) return seen.push({ staged: result });
      const lines = entries[ENCODED].lines;
      seq += entries.length;
      const released = session.persisted(batch, 0);
      seen.push({ staged: result, entries: [...entries], lines, released, quiescent: session.quiescent });
      return released;
    };
    const message = userMessage('m', { parts: ['x'] });
    const request = stage({ feed: { followup: message } }).find((r) => r.request).request.preStep;
    stage({ answer: ['step', 1, 1, { step: 'completed' }] }); // not outstanding: refused, stale
    stage({ answer: ['preStep', 1, 1, { preStep: { enter: request.messages } }] });
    stage({ answer: ['step', 1, 1, { step: 'continue' }] });
    const next = seen.at(-1).released.find((r) => r.request).request.preStep;
    assert.equal(next.step, 2);
    stage({ answer: ['preStep', 1, next.step, { preStep: 'reject' }] });
    stage({ answer: ['turnStopping', 1, 0, { turnStopping: 'done' }] });
    return { seen, message, request };
  };
  const [alone, together] = [run(true), run(false)];
  assert.equal(alone.seen.length, 6);
  assert.ok(alone.seen[1].staged[0] instanceof RejectedError && alone.seen[1].staged[0].kind === 'stale');
  assert.ok(alone.request.messages[0] === alone.message, 'S8: the delivered object');
  const plain = ({ seen }) => JSON.stringify(seen, (key, value) => (value instanceof Error ? [value.name, value.message] : value));
  assert.equal(plain(alone), plain(together));
  assert.deepEqual(
    alone.seen.map((s) => [s.staged[0] instanceof RejectedError ? s.staged[0].kind : s.staged[0], s.entries?.map((e) => e.type), s.quiescent]),
    [
      [0, ['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced'], false],
      ['stale', undefined, undefined],
      [0, ['step/start', 'user/message'], false],
      [0, ['step/end'], false],
      [0, ['turn/end'], true], // a pre-step `reject` ends the turn
      ['stale', undefined, undefined], // no turn-stopping call is outstanding then
    ],
  );
  assert.deepEqual(alone.seen[4].entries[0].data, { turn: 1, reason: { kind: 'blocked' } });
});
