'use strict';
// The hot path's shortcuts, pinned to what the general path does: a message of three strings
// crosses as them (no JSON text) and is the very message its JSON text makes; a batch's log
// lines are copied by the session straight into a MemoryLog's buffers; the agent appends to
// its own MemoryLog at once (no Promise per batch). Each test compares the shortcut with the
// general path, or with the exact records, so a shortcut that changes anything fails here.

const test = require('node:test');
const assert = require('node:assert/strict');
const coxswain = require('..');
const { plainFields } = require('../machine');
const { ENCODED } = require('../log');

const { Agent, Machine, MemoryLog, parseLog, userMessage, InvalidInputError } = coxswain;
const { Loop } = require('../session');
const { agentOptions } = require('../options');

/** `message`'s fields again, with one field holding `undefined`: JSON text is the same, the three-string shortcut is not taken. */
function viaText(message) {
  return { ...message, unused: undefined };
}

/** `object` with a `toJSON` that is not enumerable: JSON text carries what it returns. */
function hidden(object) {
  return Object.defineProperty(object, 'toJSON', { value: () => ({ id: 'other' }), enumerable: false });
}

test('plainFields: only `{id, source: {kind}, content}` of well-formed strings crosses as three strings', () => {
  assert.deepEqual(plainFields(userMessage('m', 'hello')), ['m', 'user', 'hello']);
  assert.deepEqual(plainFields({ content: 'c', id: 'i', source: { kind: 'k' } }), ['i', 'k', 'c']);
  const bare = Object.assign(Object.create(null), { id: 'i', source: { kind: 'k' }, content: 'c' });
  assert.deepEqual(plainFields(bare), ['i', 'k', 'c']);
  const inherited = Object.create({ extra: 1 });
  Object.assign(inherited, { id: 'i', source: { kind: 'k' }, content: 'c' });
  for (const other of [
    viaText(userMessage('m', 'hello')), // a fourth field, even `undefined`
    { id: 'm', source: { kind: 'user' } }, // no content
    { id: 'm', source: { kind: 'user' }, content: ['parts'] }, // content not a string
    { id: 'm', source: { kind: 'user', via: 'x' }, content: 'c' }, // source with more than `kind`
    { id: 'm', source: { kind: 7 }, content: 'c' },
    { id: 7, source: { kind: 'user' }, content: 'c' },
    userMessage('m', 'lone \ud800 surrogate'), // JSON text cannot carry it to the core
    userMessage('m\udc00', 'c'),
    { id: 'm', source: { kind: 'u\ud800' }, content: 'c' },
    inherited, // an enumerable inherited field
    hidden({ id: 'm', source: { kind: 'user' }, content: 'c' }), // a toJSON the loops cannot see
    { id: 'm', source: hidden({ kind: 'user' }), content: 'c' },
    [1, 2, 3],
    'text',
    null,
  ]) {
    assert.equal(plainFields(other), undefined, JSON.stringify(other));
  }
});

test('a message of three strings is the message its JSON text makes: log lines, state, fingerprint', async () => {
  const content = 'héllo "quoted" \\ 😀\n';
  const line = (seq, id) =>
    `{"seq":${seq},"type":"agent/inbox/spliced","data":{"target":"next-step","start":${seq - 1},` +
    `"inserted":[{"id":"${id}","content":"héllo \\"quoted\\" \\\\ 😀\\n","source":{"kind":"user"}}]}}\n`;
  // The agent: the same log lines (the native message serialised), whichever way it crossed.
  const log = new MemoryLog();
  const { agent } = await Agent.open({}, log, { memory: 4 });
  await agent.inject(userMessage('a', content));
  await agent.inject(viaText(userMessage('b', content)));
  assert.equal(log.bytes().toString('utf8'), line(1, 'a') + line(2, 'b'));
  assert.deepEqual(
    (await agent.pending()).nextStep.map((item) => JSON.parse(JSON.stringify(item.message))),
    [{ id: 'a', content, source: { kind: 'user' } }, { id: 'b', content, source: { kind: 'user' } }],
  );
  // What JSON text cannot carry is refused, changing nothing and writing nothing.
  await assert.rejects(agent.inject(userMessage('x', 'lone \ud800')), InvalidInputError);
  assert.equal(log.bytes().toString('utf8'), line(1, 'a') + line(2, 'b'));
  await agent.close();
  // The machine: each preset, then its native state read through a session that takes it.
  const machine = new Machine({ memory: 4 });
  const followed = userMessage('f', content);
  const transition = machine.followup(followed);
  assert.equal(transition.events[0].data.inserted[0], followed, 'S8: the caller’s object');
  transition.persisted();
  machine.steer(userMessage('s', content)).persisted();
  machine.inject(viaText(userMessage('i', content))).persisted();
  // The fingerprint (S56): the same id and content through the other path is the same message.
  assert.throws(() => machine.inject(viaText(userMessage('s', content))), coxswain.AlreadyPendingError);
  assert.throws(() => machine.inject(userMessage('i', content)), coxswain.AlreadyPendingError);
  assert.throws(() => machine.inject(userMessage('i', 'other')), coxswain.ConflictError);
  // What JSON text cannot carry is refused as before, changing nothing.
  assert.throws(() => machine.inject(userMessage('x', 'lone \ud800')), InvalidInputError);
  const taken = new Loop(machine, agentOptions({}), { preStep: true, turnStopping: true }, 1);
  assert.deepEqual(
    taken.state().nextStep.map((item) => item.message),
    [{ id: 's', content, source: { kind: 'user' } }, { id: 'i', content, source: { kind: 'user' } }],
  );
});

/** A MemoryLog whose `append` is its own (a subclass's): the agent awaits it and hands it the lines as text. */
class AwaitedLog extends MemoryLog {
  async append(entries) {
    await undefined;
    return super.append(entries);
  }
}

/** Runs the same turns on `log`: long messages, so the batches cross the MemoryLog's buffers. */
async function turns(log) {
  const { agent } = await Agent.open({ step: () => 'completed' }, log, { memory: 0 });
  const sizes = [10, 40_000, 70_000, 30_000, 5];
  for (const [i, size] of sizes.entries()) {
    await agent.followup(userMessage(`m${i}`, `${i}`.repeat(size)));
    await agent.whenIdle();
  }
  await agent.dispose();
  return { log, sizes };
}

test('a MemoryLog the agent appends to at once holds the bytes of one awaited, across its buffers', async () => {
  const [direct, awaited] = [await turns(new MemoryLog()), await turns(new AwaitedLog())];
  const bytes = direct.log.bytes();
  assert.ok(bytes.length > 2 * 64 * 1024, 'the batches cross buffers');
  assert.deepEqual(bytes, awaited.log.bytes());
  const records = parseLog(bytes).records;
  assert.equal(records.length, 7 * direct.sizes.length);
  assert.deepEqual(records.map((record) => record.seq), records.map((_, i) => i + 1));
  assert.deepEqual(
    records.filter((record) => record.type === 'user/message').map((record) => record.data.content.length),
    direct.sizes,
  );
  // bytes() is a copy; a resumed log reads them back whole.
  bytes[0] = 0;
  assert.equal(direct.log.bytes()[0], '{'.charCodeAt(0));
  const { agent, recovery } = await Agent.open({}, new MemoryLog(direct.log.bytes()), { memory: 0 });
  assert.equal(recovery.records, records.length);
  await agent.dispose();
});

test('MemoryLog: a torn tail is dropped, an unterminated record ended, appends go on after them', async () => {
  const { log } = await turns(new MemoryLog());
  const whole = log.bytes();
  const torn = new MemoryLog(Buffer.concat([whole, Buffer.from('{"seq":36,"ty')]));
  const { agent, recovery } = await Agent.open({ step: () => 'completed' }, torn, { memory: 0 });
  assert.deepEqual(recovery.tornTail, { line: 36, bytes: 13 });
  await agent.followup(userMessage('next', 'after the cut'));
  await agent.whenIdle();
  await agent.dispose();
  const records = parseLog(torn.bytes()).records;
  assert.deepEqual(torn.bytes().subarray(0, whole.length), whole);
  assert.deepEqual(records.slice(35).map((record) => [record.seq, record.type]), [
    [36, 'agent/inbox/spliced'], [37, 'turn/start'], [38, 'agent/inbox/spliced'], [39, 'step/start'],
    [40, 'user/message'], [41, 'step/end'], [42, 'turn/end'],
  ]);
  const unterminated = new MemoryLog(whole.subarray(0, whole.length - 1));
  await (await Agent.open({}, unterminated, { memory: 0 })).agent.dispose();
  assert.deepEqual(unterminated.bytes(), whole);
});

test('a listener that subscribes between turns is shown the next batches decoded', async () => {
  const log = new MemoryLog();
  const { agent } = await Agent.open({ step: () => 'completed' }, log, { memory: 0 });
  await agent.followup(userMessage('quiet', 'no listener'));
  await agent.whenIdle();
  const recorded = [];
  const stop = agent.subscribe((update) => update.recorded && recorded.push(update.recorded));
  await agent.followup(userMessage('heard', 'a listener'));
  await agent.whenIdle();
  stop();
  await agent.followup(userMessage('quiet again', 'no listener'));
  await agent.whenIdle();
  await agent.dispose();
  assert.deepEqual(recorded.map((r) => [r.seq, r.entry.type]), [
    [8, 'agent/inbox/spliced'], [9, 'turn/start'], [10, 'agent/inbox/spliced'], [11, 'step/start'],
    [12, 'user/message'], [13, 'step/end'], [14, 'turn/end'],
  ]);
  assert.deepEqual(recorded[4].entry.data, userMessage('heard', 'a listener'));
  assert.equal(parseLog(log.bytes()).records.length, 21);
});

test("a log of the host's own that keeps the entries for later still has their lines once the batch is persisted", async () => {
  // It acknowledges at once and writes to a MemoryLog later (no durability: a test double).
  const inner = new MemoryLog();
  const kept = [];
  const later = { readAll: async () => Buffer.alloc(0), repairTail: async () => {}, sync: async () => {}, close: async () => {} };
  later.append = async (entries) => {
    kept.push(entries);
    return 1 + kept.slice(0, -1).reduce((n, e) => n + e.length, 0);
  };
  const { agent } = await Agent.open({ step: () => 'completed' }, later, { memory: 0 });
  await agent.followup(userMessage('m', 'hello'));
  await agent.whenIdle();
  await agent.dispose();
  for (const entries of kept) await inner.append(entries);
  const direct = await turnOf(new MemoryLog());
  assert.deepEqual(inner.bytes(), direct.bytes());
});

/** One turn of `userMessage('m', 'hello')` on `log`, disposed: the log. */
async function turnOf(log) {
  const { agent } = await Agent.open({ step: () => 'completed' }, log, { memory: 0 });
  await agent.followup(userMessage('m', 'hello'));
  await agent.whenIdle();
  await agent.dispose();
  return log;
}
