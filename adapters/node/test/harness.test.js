'use strict';
// A harness that owns its log (issue 54): `new Machine({ implicitBatch: true })` runs each
// accepted input in a batch of its own (the core's `Machine::set_implicit_batches`), so
// `rollBack()` takes back the last input when its append failed, with one N-API crossing per
// input; and a message whose `source` is any plain object of strings crosses as its strings
// (`fieldsOf`), the very message its JSON text makes.

const test = require('node:test');
const assert = require('node:assert/strict');
const coxswain = require('..');
const { fieldsOf, plainFields } = require('../machine');
const { Loop } = require('../session');
const { agentOptions } = require('../options');

const { Machine, userMessage, BatchError, InvalidOptionsError, InvalidInputError } = coxswain;

/** Everything a host can ask the machine. */
function view(machine) {
  return { state: machine.state(), a: machine.remembers('a'), c: machine.remembers('c') };
}

/** Appends a transition's events to `log` (the harness's own log: one JSON line each), then persists it. */
function append(log, transition) {
  for (const event of transition.events) log.push(JSON.stringify(event));
  return transition.persisted();
}

test('implicitBatch: rollBack() takes back the last input, and only it; the machine goes on', () => {
  const machine = new Machine({ memory: 4, implicitBatch: true });
  const plain = new Machine({ memory: 4 });
  assert.equal(machine.implicitBatch, true);
  assert.equal(plain.implicitBatch, false);
  assert.equal(machine.batchOpen, false, 'the first input opens the first batch');
  const [log, plainLog] = [[], []];
  append(log, machine.inject(userMessage('c', 'ctx')));
  append(plainLog, plain.inject(userMessage('c', 'ctx')));
  assert.equal(machine.batchOpen, true, "the inject's batch, open until the next input");
  const effects = append(log, machine.followup(userMessage('a', 'hello')));
  append(plainLog, plain.followup(userMessage('a', 'hello')));
  const batch = effects[effects.length - 1].request.preStep.messages;
  append(log, machine.answerPreStep({ enter: batch }));
  append(plainLog, plain.answerPreStep({ enter: batch }));
  const before = view(machine);
  const lines = log.length;
  // The step's append fails: the harness takes that input back.
  const step = machine.answerStep('completed');
  assert.deepEqual(step.events.map((event) => event.type), ['step/end']);
  machine.rollBack();
  assert.equal(machine.batchOpen, false);
  assert.deepEqual(view(machine), before);
  assert.deepEqual(machine.outstanding, { step: { turn: 1, step: 1 } });
  assert.deepEqual(step.persisted(), [], 'a rolled-back transition has no effects to carry out');
  assert.throws(() => machine.rollBack(), (e) => e instanceof BatchError && e.kind === 'not-open');
  assert.equal(log.length, lines);
  // Fed again, appended: the turn goes on, and the log is the one a machine without the mode wrote.
  append(log, machine.answerStep('completed'));
  append(log, machine.answerTurnStopping('done'));
  append(plainLog, plain.answerStep('completed'));
  append(plainLog, plain.answerTurnStopping('done'));
  assert.deepEqual(log, plainLog);
  assert.deepEqual(log, [
    '{"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"c","source":{"kind":"user"},"content":"ctx"}]}}',
    '{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a","source":{"kind":"user"},"content":"hello"}],"wakeup":true}}',
    '{"type":"turn/start","data":{"turn":1}}',
    '{"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"removedCount":1,"inserted":[]}}',
    '{"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}',
    '{"type":"step/start","data":{"turn":1,"step":1}}',
    '{"type":"user/message","data":{"id":"c","source":{"kind":"user"},"content":"ctx"}}',
    '{"type":"user/message","data":{"id":"a","source":{"kind":"user"},"content":"hello"}}',
    '{"type":"step/end","data":{"turn":1,"step":1}}',
    '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}',
  ]);
  assert.deepEqual(view(machine), view(plain));
});

test('implicitBatch: a rejected input changes nothing, its batch included: rollBack() takes back the input before', () => {
  const machine = new Machine({ memory: 4, implicitBatch: true });
  const before = view(machine);
  machine.followup(userMessage('a', 'hello')).persisted();
  assert.equal(machine.lastTurn, 1);
  assert.throws(() => machine.answerStep('completed'), coxswain.UnexpectedCompletionError);
  assert.throws(() => machine.followup(userMessage('a', 'hello')), coxswain.AlreadyDeliveredError);
  machine.rollBack();
  assert.deepEqual(view(machine), before);
  assert.equal(machine.lastTurn, 0);
  // A transition not persisted goes with the rollback; the next input is accepted.
  const dropped = machine.followup(userMessage('a', 'hello'));
  machine.rollBack();
  assert.deepEqual(dropped.persisted(), []);
  assert.deepEqual(view(machine), before);
  machine.followup(userMessage('a', 'hello')).persisted();
  assert.equal(machine.lastTurn, 1);
});

test('implicitBatch: commitBatch() keeps the last input; beginBatch() refuses while its batch is open', () => {
  const machine = new Machine({ implicitBatch: true });
  assert.throws(() => machine.rollBack(), (e) => e instanceof BatchError && e.kind === 'not-open');
  machine.inject(userMessage('a', 'x')).persisted();
  assert.throws(() => machine.beginBatch(), (e) => e instanceof BatchError && e.kind === 'already-open');
  machine.commitBatch();
  assert.throws(() => machine.rollBack(), (e) => e instanceof BatchError && e.kind === 'not-open');
  assert.equal(machine.state().nextStep.length, 1);
  // Without the mode, `rollBack()` is `rollBackBatch()`: the whole explicit batch.
  const plain = new Machine();
  plain.beginBatch();
  plain.inject(userMessage('a', 'x')).persisted();
  plain.inject(userMessage('b', 'y')).persisted();
  plain.rollBack();
  assert.equal(plain.state().nextStep.length, 0);
});

test('implicitBatch: one N-API crossing per input, the persisted word and the commit ride along', () => {
  const machine = new Machine({ implicitBatch: true });
  const calls = [];
  const count = (name, fn) => (...args) => {
    calls.push(name);
    return fn(...args);
  };
  for (const [name, fn] of Object.entries(machine._hot)) machine._hot[name] = count(name, fn);
  machine._fields = machine._fields.map((fn, k) => count(`fields${k}`, fn));
  machine._sourced = machine._sourced.map((fn, k) => count(`sourced${k}`, fn));
  const inner = machine._inner;
  machine._inner = new Proxy(inner, {
    get: (target, name) => (typeof target[name] === 'function' ? count(String(name), target[name].bind(target)) : target[name]),
  });
  const effects = machine.followup(userMessage('m', 'hi')).persisted();
  machine.answerPreStep({ enter: effects[effects.length - 1].request.preStep.messages }).persisted();
  machine.answerStep('completed').persisted();
  machine.answerTurnStopping('done').persisted();
  machine.followup({ id: 'p', source: { kind: 'plugin', name: 'x' }, content: 'c' }).persisted();
  assert.deepEqual(calls, ['fields0', 'enterOne', 'answer', 'answer', 'sourced0']);
  machine.rollBack();
  assert.deepEqual(calls.slice(5), ['ack', 'rollBackBatch']);
});

test('implicitBatch is a boolean option: anything else is refused, naming it; restore and repair take it', () => {
  for (const [value, shown] of [['yes', '"yes"'], [1, '1'], [null, 'null'], [{}, 'an object']]) {
    assert.throws(
      () => new Machine({ implicitBatch: value }),
      (e) => e instanceof InvalidOptionsError && e.message === `implicitBatch ${shown} is not a boolean`,
    );
  }
  assert.equal(new Machine({ implicitBatch: false }).implicitBatch, false);
  assert.equal(new Machine().implicitBatch, false);
  const log = [{ type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [userMessage('a', 'x')] } }];
  const restored = Machine.restore(log, { implicitBatch: true });
  assert.equal(restored.implicitBatch, true);
  restored.inject(userMessage('b', 'y')).persisted();
  restored.rollBack();
  assert.deepEqual(restored.state().nextStep.map((item) => item.message.id), ['a']);
  assert.equal(Machine.repair(log, { implicitBatch: true }).machine.implicitBatch, true);
  assert.equal(Machine.restore(log).implicitBatch, false);
});

test('fieldsOf: a source that is a plain object of strings crosses as its pairs, in its order', () => {
  assert.deepEqual(fieldsOf(userMessage('m', 'hello')), ['m', 'user', 'hello']);
  assert.deepEqual(fieldsOf({ id: 'i', source: { kind: 'plugin', name: 'x' }, content: 'c' }), [
    'i', 'c', 'kind', 'plugin', 'name', 'x',
  ]);
  assert.deepEqual(fieldsOf({ id: 'i', source: { kind: 'plugin', plugin: 'p', id: 'q' }, content: 'c' }), [
    'i', 'c', 'kind', 'plugin', 'plugin', 'p', 'id', 'q',
  ]);
  assert.deepEqual(fieldsOf({ content: 'c', source: { name: 'x', kind: 'k' }, id: 'i' }), ['i', 'c', 'name', 'x', 'kind', 'k']);
  assert.deepEqual(fieldsOf({ id: 'i', source: {}, content: 'c' }), ['i', 'c']);
  assert.deepEqual(fieldsOf({ id: 'i', source: { name: 'x' }, content: 'c' }), ['i', 'c', 'name', 'x']);
  const bare = Object.assign(Object.create(null), { kind: 'k', via: 'v' });
  assert.deepEqual(fieldsOf({ id: 'i', source: bare, content: 'c' }), ['i', 'c', 'kind', 'k', 'via', 'v']);
  const eight = Object.fromEntries([...'abcdefgh'].map((key) => [key, key]));
  assert.equal(fieldsOf({ id: 'i', source: eight, content: 'c' }).length, 18);
  // `plainFields` stays the three strings of `{kind}` alone.
  assert.equal(plainFields({ id: 'i', source: { kind: 'plugin', name: 'x' }, content: 'c' }), undefined);
  class Source {
    constructor() {
      this.kind = 'k';
    }
  }
  const hiddenJson = Object.defineProperty({ kind: 'k', name: 'x' }, 'toJSON', { value: () => ({}), enumerable: false });
  for (const source of [
    { kind: 'k', count: 7 }, // a value not a string
    { kind: 'k', nested: { a: 'b' } },
    { kind: 'k', gone: undefined },
    { kind: 'k', name: 'lone \ud800' },
    { kind: 'k', ['lone \udc00']: 'x' },
    { ...eight, i: 'i' }, // nine fields
    new Source(), // not plain
    ['kind', 'k'],
    null,
    hiddenJson,
  ]) {
    assert.equal(fieldsOf({ id: 'i', source, content: 'c' }), undefined, String(source));
  }
  // An enumerable inherited field (a polluted prototype) is not in JSON text: the text crosses.
  Object.prototype.polluted = 'x'; // eslint-disable-line no-extend-native
  try {
    assert.equal(fieldsOf({ id: 'i', source: { kind: 'k', name: 'x' }, content: 'c' }), undefined);
  } finally {
    delete Object.prototype.polluted;
  }
});

/** The native messages of a machine's next-step list, as the session that takes the machine reads them. */
function nativeMessages(machine) {
  const loop = new Loop(machine, agentOptions({}), { preStep: true, turnStopping: true }, 1);
  return loop.state().nextStep.map((item) => JSON.stringify(item.message));
}

test('a source of strings crosses as them and is the message its JSON text makes: events, state, fingerprint, errors', () => {
  const sources = [
    { kind: 'plugin', name: 'x' },
    { kind: 'plugin', plugin: 'p', id: 'q' },
    { name: 'x', kind: 'k' },
    Object.assign(Object.create(null), { kind: 'k', via: 'v' }),
    {},
    { kind: 'k', count: 7 }, // the text path: not all strings
    { kind: 'k', quote: 'é "q" \\ 😀\n' },
  ];
  const fast = new Machine({ memory: 8 });
  const text = new Machine({ memory: 8 });
  sources.forEach((source, k) => {
    const message = { id: `s${k}`, source, content: `c${k}` };
    const viaFast = fast.inject(message);
    const viaText = text.handle({ inject: message }); // JSON text, always
    assert.equal(viaFast.events[0].data.inserted[0], message, 'S8: the caller’s object');
    assert.deepEqual(JSON.stringify(viaFast.events), JSON.stringify(viaText.events));
    viaFast.persisted();
    viaText.persisted();
  });
  const expected = [
    '{"content":"c0","id":"s0","source":{"kind":"plugin","name":"x"}}',
    '{"content":"c1","id":"s1","source":{"id":"q","kind":"plugin","plugin":"p"}}',
    '{"content":"c2","id":"s2","source":{"kind":"k","name":"x"}}',
    '{"content":"c3","id":"s3","source":{"kind":"k","via":"v"}}',
    '{"content":"c4","id":"s4","source":{}}',
    '{"content":"c5","id":"s5","source":{"count":7,"kind":"k"}}',
    '{"content":"c6","id":"s6","source":{"kind":"k","quote":"é \\"q\\" \\\\ 😀\\n"}}',
  ];
  // The fingerprint (S56): the same message through the other path is the same; another source is not.
  for (const machine of [fast, text]) {
    const errors = [];
    for (const message of [
      { id: 's0', source: { name: 'x', kind: 'plugin' }, content: 'c0' },
      { id: 's1', source: { kind: 'plugin', plugin: 'p', id: 'q', extra: 7 }, content: 'c1' },
      { id: 's1', source: { kind: 'plugin', plugin: 'p', id: 'other' }, content: 'c1' },
    ]) {
      try {
        machine === fast ? machine.inject(message) : machine.handle({ inject: message });
        errors.push('accepted');
      } catch (error) {
        errors.push(`${error.constructor.name}: ${error.message}`);
      }
    }
    assert.deepEqual(errors, [
      'AlreadyPendingError: message `s0` is already pending',
      'ConflictError: message id `s1` is already used by a different message',
      'ConflictError: message id `s1` is already used by a different message',
    ]);
  }
  // What JSON cannot carry crosses as text and is refused there, as before, changing nothing.
  assert.throws(
    () => fast.inject({ id: 's7', source: { kind: 'k', name: 'lone \ud800' }, content: 'c' }),
    (e) => e instanceof InvalidInputError && e.message === 'unknown input: unexpected end of hex escape at line 1 column 52',
  );
  assert.throws(
    () => fast.inject({ id: 's7', source: { kind: 'k', n: NaN }, content: 'c' }),
    (e) => e instanceof InvalidInputError && e.message === 'not JSON: NaN is not a JSON number (at "n")',
  );
  // The native messages (read once: the session takes the machine).
  assert.deepEqual(nativeMessages(fast), expected);
  assert.deepEqual(nativeMessages(text), expected);
});

test('the native sourced call refuses fields that are not key-value pairs, or too many, changing nothing', () => {
  const machine = new Machine();
  const refused = (...fields) =>
    assert.throws(
      () => machine._transition(machine._hot.sourced0(false, 'i', 'c', ...fields), []),
      (e) =>
        e instanceof InvalidInputError &&
        e.message === `unknown input: a source given as ${fields.length} strings, not up to 8 key-value pairs`,
    );
  refused('kind');
  refused(...[...'abcdefghi'].flatMap((key) => [key, key]));
  assert.deepEqual(machine.state().nextTurn, []);
  const eight = Object.fromEntries([...'abcdefgh'].map((key) => [key, key]));
  const message = { id: 'i', source: eight, content: 'c' };
  machine._transition(machine._hot.sourced0(false, 'i', 'c', ...Object.entries(eight).flat()), [message]).persisted();
  assert.equal(machine.lastTurn, 1);
});

test('index.d.ts types the implicit batches: the option, rollBack(), the getter', (t) => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { spawnSync } = require('node:child_process');
  const PACKAGE = path.resolve(__dirname, '..');
  const TSC = path.join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-ts-harness-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PACKAGE, path.join(dir, 'node_modules', 'coxswain'), 'dir');
  fs.symlinkSync(path.join(PACKAGE, 'node_modules', '@types'), path.join(dir, 'node_modules', '@types'), 'dir');
  const source = `
import { Machine, userMessage } from 'coxswain';
const machine = new Machine({ memory: 4, implicitBatch: true });
const on: boolean = machine.implicitBatch;
machine.followup({ id: 'a', source: { kind: 'plugin', plugin: 'p', id: 'q' }, content: 'hi' });
machine.rollBack();
const restored = Machine.restore([], { implicitBatch: true });
const repaired = Machine.repair([], { implicitBatch: true }).machine;
// @ts-expect-error the option is a boolean
new Machine({ implicitBatch: 'yes' });
// @ts-expect-error the getter is read-only
machine.implicitBatch = false;
console.log(on, restored, repaired, userMessage('m', 'x'));
`;
  fs.writeFileSync(path.join(dir, 'harness.mts'), source);
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', types: ['node'] },
      files: ['harness.mts'],
    }),
  );
  const tsc = spawnSync(process.execPath, [TSC, '-p', dir], { encoding: 'utf8' });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});
