'use strict';
// The Agent driver: the tokio adapter's semantics over the JSON-lines FileLog, and logs that
// pass `coxswain verify` and resume across Node and Rust in both directions.

const { faults } = require('./support/faults');
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const coxswain = require('..');
const { coxswain: cli, ROOT } = require('./support/cli');

const { Agent, FileLog, MemoryLog, parseLog, userMessage } = coxswain;

function tempLog(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'session.jsonl');
}

function records(file) {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

/** A host whose step records one model output and completes. */
const textHost = {
  async step(cx) {
    await cx.record('model/output', { text: `answer ${cx.turn}.${cx.step}` });
    return 'completed';
  },
};

test('a session on a FileLog: acknowledged once durable, recorded in order, verified by the CLI', async (t) => {
  const file = tempLog(t);
  const { agent, recovery } = await Agent.open(textHost, await FileLog.open(file));
  assert.deepEqual(recovery, {
    records: 0,
    tornTail: null,
    interruptedTurn: null,
    closers: 0,
    redelivered: 0,
    lastTurn: 0,
    pendingNextTurn: 0,
    pendingNextStep: 0,
  });
  const updates = [];
  agent.subscribe((update) => updates.push(update));
  const m1 = userMessage('m1', 'hi');
  await agent.followup(m1);
  // Acknowledged: the splice (and the turn it opened) is in the file already.
  assert.deepEqual(records(file).slice(0, 3).map((r) => [r.seq, r.type]), [
    [1, 'agent/inbox/spliced'],
    [2, 'turn/start'],
    [3, 'agent/inbox/spliced'],
  ]);
  await agent.whenIdle();
  await agent.dispose();
  assert.deepEqual(
    records(file).map((r) => [r.seq, r.type]),
    [
      [1, 'agent/inbox/spliced'],
      [2, 'turn/start'],
      [3, 'agent/inbox/spliced'],
      [4, 'step/start'],
      [5, 'user/message'],
      [6, 'model/output'],
      [7, 'step/end'],
      [8, 'turn/end'],
    ],
  );
  assert.deepEqual(records(file)[5], { seq: 6, type: 'model/output', data: { text: 'answer 1.1' } });
  assert.deepEqual(
    updates.map((u) => (u.recorded ? `${u.recorded.seq} ${u.recorded.entry.type}` : u.notified ? u.notified.type : Object.keys(u)[0])),
    [
      '1 agent/inbox/spliced',
      '2 turn/start',
      '3 agent/inbox/spliced',
      // No pre-step hook: the loop enters the claimed batch inside the delivery's batch (decision 1).
      '4 step/start',
      '5 user/message',
      'agent/inbox/inserted',
      'agent/status',
      'agent/inbox/claimed',
      '6 model/output',
      '7 step/end',
      '8 turn/end',
      'agent/status',
      'ended',
    ],
  );
  assert.deepEqual(updates.at(-1), { ended: { kind: 'disposed' } });
  assert.equal(agent.status, 'idle');
  await assert.rejects(agent.followup(userMessage('late', 'x')), coxswain.DisposedError);
  const late = await new Promise((resolve) => agent.subscribe(resolve));
  assert.deepEqual(late, { ended: { kind: 'disposed' } }, 'a subscriber after the end learns it');
  const verified = cli('verify', file);
  assert.equal(verified.status, 0, verified.stdout + verified.stderr);
});

test('S39/S42: each activity gets its own AbortSignal, aborted by cancel with its cause', async (t) => {
  const file = tempLog(t);
  const signals = [];
  let entered;
  const stepStarted = new Promise((resolve) => {
    entered = resolve;
  });
  const host = {
    async step(cx) {
      signals.push(cx.signal);
      if (cx.turn === 1) {
        entered();
        await new Promise((resolve) => cx.signal.addEventListener('abort', resolve, { once: true }));
      }
      return 'completed';
    },
  };
  const { agent } = await Agent.open(host, await FileLog.open(file));
  await agent.followup(userMessage('a', 'first'));
  await stepStarted;
  await agent.cancel({ kind: 'hook', reason: 'stop' });
  assert.equal(signals[0].aborted, true);
  assert.deepEqual(signals[0].reason, { kind: 'hook', reason: 'stop' });
  await agent.whenIdle();
  await agent.followup(userMessage('b', 'second'));
  await agent.whenIdle();
  assert.equal(signals.length, 2);
  assert.notEqual(signals[1], signals[0], 'S42: a fresh signal per turn');
  assert.equal(signals[1].aborted, false);
  await agent.close();
  const ends = records(file).filter((r) => r.type === 'turn/end').map((r) => r.data);
  assert.deepEqual(ends, [
    { turn: 1, reason: { kind: 'aborted', reason: { kind: 'hook', reason: 'stop' } } },
    { turn: 2, reason: { kind: 'completed' } },
  ]);
  assert.equal(cli('verify', file).status, 0);
});

test('a host with no hooks: the pre-step default enters the batch, a step without a hook fails its call (S38)', async () => {
  const log = new MemoryLog();
  const { agent } = await Agent.open({}, log);
  await agent.followup(userMessage('a', 'hi'));
  await agent.whenIdle();
  await agent.dispose();
  const records = coxswain.parseLog(log.bytes()).records.map((r) => r.type);
  assert.deepEqual(records, [
    'agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'step/start', 'user/message', 'step/end', 'turn/end',
  ]);
  assert.deepEqual(coxswain.parseLog(log.bytes()).records.at(-1).data, {
    turn: 1,
    reason: {
      kind: 'error',
      error: {
        code: 'host-invalid-answer',
        message: "the host's step call gave an invalid answer: it returned nothing",
      },
    },
  });
});

test('S42: a hook context destructured or spread still carries its signal, record and fields', async () => {
  const seen = [];
  const host = {
    preStep(cx) {
      const copy = { ...cx };
      seen.push(['preStep', copy.turn, copy.step, copy.messages.length, copy.signal === cx.signal, copy.signal instanceof AbortSignal]);
      return { enter: cx.messages };
    },
    async step({ turn, step, signal, record }) {
      await record('model/output', { text: 'hi' }); // destructured: still bound to its step
      seen.push(['step', turn, step, signal.aborted]);
      return 'completed';
    },
  };
  const log = new MemoryLog();
  const { agent } = await Agent.open(host, log);
  await agent.followup(userMessage('a', 'first'));
  await agent.whenIdle();
  await agent.dispose();
  assert.deepEqual(seen, [['preStep', 1, 1, 1, true, true], ['step', 1, 1, false]]);
  const recorded = coxswain.parseLog(log.bytes()).records.filter((r) => r.type === 'model/output');
  assert.deepEqual(recorded.map((r) => r.data), [{ text: 'hi' }]);
});

test('S50: a closed agent resumes; the interrupted turn is closed and its torn tail dropped', async (t) => {
  const file = tempLog(t);
  let stepped;
  const inStep = new Promise((resolve) => {
    stepped = resolve;
  });
  const hanging = {
    step(cx) {
      stepped();
      return new Promise((resolve) => cx.signal.addEventListener('abort', () => resolve('completed')));
    },
  };
  const first = await Agent.open(hanging, await FileLog.open(file));
  await first.agent.followup(userMessage('a', 'go'));
  await inStep;
  await first.agent.steer(userMessage('s', 'parked'));
  await first.agent.close();
  assert.deepEqual(await first.agent.finished(), { kind: 'closed' });
  fs.appendFileSync(file, '{"seq":7,"type":"model/out'); // a crash mid-append
  const { agent, recovery } = await Agent.open(textHost, await FileLog.open(file));
  assert.deepEqual(recovery, {
    records: 6,
    tornTail: { line: 7, bytes: 26 },
    interruptedTurn: 1,
    closers: 2,
    redelivered: 0,
    lastTurn: 1,
    pendingNextTurn: 0,
    pendingNextStep: 1,
  });
  assert.deepEqual(await agent.pending(), {
    nextTurn: [],
    nextStep: [{ message: userMessage('s', 'parked'), wakeup: true }],
  });
  await agent.close();
  assert.deepEqual(records(file).slice(5), [
    { seq: 6, type: 'agent/inbox/spliced', data: { target: 'next-step', start: 0, inserted: [userMessage('s', 'parked')], wakeup: true } },
    { seq: 7, type: 'step/end', data: { turn: 1, step: 1 } },
    { seq: 8, type: 'turn/end', data: { turn: 1, reason: { kind: 'interrupted' } } },
  ]);
  assert.equal(cli('verify', file).status, 0);
});

test('a log that S46 refuses is left as it was (CorruptLogError, InvalidLogError)', async (t) => {
  const file = tempLog(t);
  const corrupt = '{"seq":1,"type":"turn/start","data":{"turn":1}}\nnot json\n{"seq":3}\n';
  fs.writeFileSync(file, corrupt);
  await assert.rejects(Agent.open(textHost, await FileLog.open(file)), (error) => {
    assert.ok(error instanceof coxswain.CorruptLogError);
    assert.equal(error.line, 2);
    return true;
  });
  assert.equal(fs.readFileSync(file, 'utf8'), corrupt);
  const invalid = '{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":1,"inserted":[]}}\n';
  fs.writeFileSync(file, invalid);
  await assert.rejects(Agent.open(textHost, await FileLog.open(file)), (error) => {
    assert.ok(error instanceof coxswain.InvalidLogError);
    assert.equal(error.kind, 'invalid'); // the shared file log's kind (coxswain_file_log::LogError::kind)
    assert.equal(error.path, file);
    assert.equal(error.line, 1);
    return true;
  });
  assert.equal(fs.readFileSync(file, 'utf8'), invalid);
});

test('interop: a log written from Node resumes in Rust (`coxswain run --log`), and verifies', async (t) => {
  const file = tempLog(t);
  const { agent } = await Agent.open(textHost, await FileLog.open(file));
  await agent.followup(userMessage('n1', 'from node'));
  await agent.whenIdle();
  await agent.inject(userMessage('ctx', 'parked context'));
  await agent.close();
  const script = path.join(path.dirname(file), 'script.json');
  fs.writeFileSync(
    script,
    JSON.stringify({ stepMs: 1, memory: 256, actions: [{ at: 0, followup: { id: 'r1', content: 'from rust' } }] }),
  );
  const run = cli('run', script, '--log', file);
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const log = records(file);
  assert.deepEqual(log.map((r) => r.seq), log.map((_, i) => i + 1), 'one contiguous seq');
  const turns = log.filter((r) => r.type === 'turn/start').map((r) => r.data.turn);
  assert.deepEqual(turns, [1, 2], 'Rust numbers on from the Node session');
  const entered = log.filter((r) => r.type === 'user/message').map((r) => r.data.id);
  assert.deepEqual(entered, ['n1', 'ctx', 'r1'], 'the parked inject rides with the next step (S20)');
  assert.equal(cli('verify', file).status, 0);
});

test('interop: a log written by Rust (`coxswain run`) resumes in Node, and verifies', async (t) => {
  const file = tempLog(t);
  const run = cli('run', path.join(ROOT, 'examples', 'quickstart.json'), '--log', file);
  assert.equal(run.status, 0, run.stdout + run.stderr);
  const before = records(file).length;
  const { agent, recovery } = await Agent.open(textHost, await FileLog.open(file));
  assert.equal(recovery.records, before);
  assert.equal(recovery.lastTurn, 2);
  assert.equal(recovery.interruptedTurn, null);
  await agent.followup(userMessage('n2', 'from node'));
  await agent.whenIdle();
  await agent.close();
  const added = records(file).slice(before);
  assert.deepEqual(added.map((r) => [r.seq, r.type]), [
    [before + 1, 'agent/inbox/spliced'],
    [before + 2, 'turn/start'],
    [before + 3, 'agent/inbox/spliced'],
    [before + 4, 'step/start'],
    [before + 5, 'user/message'],
    [before + 6, 'model/output'],
    [before + 7, 'step/end'],
    [before + 8, 'turn/end'],
  ]);
  assert.deepEqual(added[1].data, { turn: 3 });
  assert.equal(cli('verify', file).status, 0);
});

/** A MemoryLog that counts appends and can be told to fail. */
class CountingLog extends MemoryLog {
  constructor() {
    super();
    this.appends = [];
    this.fail = false;
  }
  async append(entries) {
    if (this.fail) throw new coxswain.LogIoError('disk full');
    this.appends.push(entries.map((e) => e.type));
    return super.append(entries);
  }
}

test('group commit: deliveries waiting together share one append, acknowledged in order', async () => {
  const log = new CountingLog();
  const { agent } = await Agent.open(textHost, log, { memory: 0 });
  const order = [];
  await Promise.all(
    ['a', 'b', 'c'].map((id) => agent.inject(userMessage(id, id)).then(() => order.push(id))),
  );
  assert.deepEqual(order, ['a', 'b', 'c']);
  assert.deepEqual(log.appends, [['agent/inbox/spliced', 'agent/inbox/spliced', 'agent/inbox/spliced']]);
  assert.deepEqual(
    (await agent.pending()).nextStep.map((p) => p.message.id),
    ['a', 'b', 'c'],
  );
  // A rejected member fails alone; the others of its group land. (The same id for another
  // message is a conflict, S56; for the same message, already pending, S13.)
  const results = await Promise.allSettled([
    agent.inject(userMessage('d', 'd')),
    agent.inject(userMessage('a', 'a')),
    agent.inject(userMessage('a', 'dup')),
  ]);
  assert.equal(results[0].status, 'fulfilled');
  assert.ok(results[1].reason instanceof coxswain.AlreadyPendingError);
  assert.ok(results[2].reason instanceof coxswain.ConflictError);
  await agent.dispose();
});

/** A MemoryLog's bytes as a file `coxswain verify` reads. */
function verifies(t, log) {
  const file = tempLog(t);
  fs.writeFileSync(file, log.bytes());
  const verified = cli('verify', file);
  assert.equal(verified.status, 0, verified.stdout + verified.stderr);
  return records(file);
}

test('a failed append fails only its batch, changing nothing; the agent goes on, the log holds what was acknowledged', async (t) => {
  const log = new CountingLog();
  const { agent } = await Agent.open(textHost, log, { memory: 8 });
  await agent.inject(userMessage('c', 'ctx'));
  const updates = [];
  agent.subscribe((u) => updates.push(u));
  const before = log.bytes();
  log.fail = true;
  const failed = await Promise.allSettled([
    agent.inject(userMessage('a', 'x')),
    agent.followup(userMessage('b', 'y')),
    agent.inject(userMessage('a', 'x')), // refused against the staged `a` only: it fails with the batch
  ]);
  for (const { reason } of failed) {
    assert.ok(reason instanceof coxswain.PersistenceError, String(reason));
    assert.equal(reason.kind, 'persistence');
    assert.ok(reason.cause instanceof coxswain.LogIoError);
    assert.equal(reason.cause.message, 'disk full');
  }
  assert.deepEqual(log.bytes(), before, 'nothing of the batch is in the log');
  assert.deepEqual(updates, [], 'nothing published, nothing carried out');
  assert.equal(agent.ending, null, 'the agent goes on');
  assert.equal(agent.status, 'idle');
  assert.equal(agent.lastTurn, 0, 'the turn b would have opened was rolled back');
  assert.deepEqual((await agent.pending()).nextStep.map((p) => p.message.id), ['c']);
  await agent.whenIdle();
  log.fail = false;
  // Sent again, both are accepted: neither is pending nor remembered (S51), the machine is as before.
  await agent.inject(userMessage('a', 'x'));
  await agent.followup(userMessage('b', 'y'));
  await agent.whenIdle();
  await agent.dispose();
  const log2 = verifies(t, log);
  assert.deepEqual(log2.map((r) => r.seq), log2.map((_, i) => i + 1), 'one contiguous seq');
  const inserted = log2.filter((r) => r.type === 'agent/inbox/spliced').flatMap((r) => r.data.inserted.map((m) => m.id));
  assert.deepEqual(inserted, ['c', 'a', 'b'], 'exactly what was acknowledged, once each');
  assert.deepEqual(log2.filter((r) => r.type === 'turn/start').map((r) => r.data.turn), [1]);
});

test("a failed append holding the host's answer: the answer is staged again and the turn completes", async (t) => {
  const log = new CountingLog();
  let failures = 1;
  const append = log.append.bind(log);
  log.append = async (entries) => {
    if (entries.some((e) => e.type === 'step/end') && failures-- > 0) throw new coxswain.LogIoError('disk full');
    return append(entries);
  };
  const { agent } = await Agent.open(textHost, log);
  await agent.followup(userMessage('a', 'x'));
  await agent.whenIdle();
  await agent.dispose();
  assert.equal(failures, -1, 'the step answer failed once');
  const written = verifies(t, log);
  assert.deepEqual(written.filter((r) => r.type === 'turn/end').map((r) => r.data.reason), [{ kind: 'completed' }]);
  assert.equal(written.filter((r) => r.type === 'model/output').length, 1);
});

test('a failed append holding a maintenance end: the end is staged again after the retry pause, its caller gets the value', async (t) => {
  // Maintenance begin and end write no record (and an empty batch is not appended): the job's
  // follow-up is latched (S25), so the end's batch carries the turn it replays, and fails once.
  const log = new CountingLog();
  const calls = []; // every append: its entries' types, when it was made, whether it went through
  const append = log.append.bind(log);
  log.append = async (entries) => {
    const call = { types: entries.map((e) => e.type), at: performance.now(), done: null };
    calls.push(call);
    if (calls.length === 2) throw new coxswain.LogIoError('disk full'); // 1: the follow-up, 2: the end
    const seq = await append(entries);
    call.done = performance.now();
    return seq;
  };
  const { agent } = await Agent.open(textHost, log);
  const value = await agent.runMaintenance(async () => {
    await agent.followup(userMessage('a', 'x')); // durable, latched: the turn waits for the end
    assert.equal(agent.lastTurn, 0);
    return 42;
  });
  const returned = performance.now();
  assert.equal(value, 42, "the job's value, not a PersistenceError");
  assert.equal(agent.ending, null, 'the agent goes on');
  // No pre-step or turn-stopping hook: the loop answers them inside the batch (decision 1).
  const claim = ['turn/start', 'agent/inbox/spliced', 'step/start', 'user/message'];
  assert.deepEqual(calls.slice(0, 3).map((c) => c.types), [['agent/inbox/spliced'], claim, claim]);
  assert.equal(calls[1].done, null, 'the end failed once');
  assert.ok(calls[2].at - calls[1].at >= 90, `staged again after the retry pause (${calls[2].at - calls[1].at} ms)`);
  assert.ok(calls[2].done !== null && calls[2].done <= returned, 'the caller is answered once the end is durable');
  await agent.whenIdle(); // the replayed turn ran
  assert.equal(agent.ending, null);
  assert.equal(agent.status, 'idle');
  assert.equal(agent.lastTurn, 1);
  const turn = [['model/output'], ['step/end', 'turn/end']];
  assert.deepEqual(calls.map((c) => c.types), [['agent/inbox/spliced'], claim, claim, ...turn]);
  await agent.followup(userMessage('b', 'y')); // quiescent: a follow-up opens a turn of its own
  await agent.whenIdle();
  assert.equal(agent.ending, null);
  assert.equal(agent.lastTurn, 2);
  assert.deepEqual(calls.map((c) => c.types), [
    ['agent/inbox/spliced'], claim, claim, ...turn, ['agent/inbox/spliced', ...claim], ...turn,
  ]);
  await agent.dispose();
  assert.equal(agent.ending.kind, 'disposed');
  const written = verifies(t, log);
  const turnTypes = ['turn/start', 'agent/inbox/spliced', 'step/start', 'user/message', 'model/output', 'step/end', 'turn/end'];
  assert.deepEqual(written.map((r) => r.type), ['agent/inbox/spliced', ...turnTypes, 'agent/inbox/spliced', ...turnTypes]);
  assert.deepEqual(written.map((r) => r.seq), written.map((_, i) => i + 1), 'one contiguous seq');
  assert.deepEqual([written[0].data.inserted.map((m) => m.id), written[8].data.inserted.map((m) => m.id)], [['a'], ['b']]);
  assert.deepEqual(written.filter((r) => r.type === 'turn/start').map((r) => r.data), [{ turn: 1 }, { turn: 2 }]);
  assert.deepEqual(written.filter((r) => r.type === 'turn/end').map((r) => r.data), [
    { turn: 1, reason: { kind: 'completed' } },
    { turn: 2, reason: { kind: 'completed' } },
  ]);
});

test('an indeterminate append stops the agent: its callers are told once it has ended', async () => {
  const log = new CountingLog();
  const { agent } = await Agent.open(textHost, log);
  log.append = async () => {
    throw new coxswain.IndeterminateError('the batch may or may not be in the log');
  };
  await assert.rejects(agent.inject(userMessage('a', 'x')), (error) => {
    assert.ok(error instanceof coxswain.IndeterminateError);
    assert.equal(agent.ending && agent.ending.kind, 'stopped', 'ended by the time the caller is told');
    return true;
  });
  const ending = await agent.finished();
  assert.equal(ending.kind, 'stopped');
  assert.ok(ending.error instanceof coxswain.IndeterminateError);
  await assert.rejects(agent.followup(userMessage('b', 'y')), coxswain.StoppedError);
  await assert.rejects(agent.whenIdle(), coxswain.StoppedError);
});

test('S38/S39: an aborted call that ignores its signal is abandoned after the abort grace (host-abandoned)', async (t) => {
  const file = tempLog(t);
  let late;
  let entered;
  const inStep = new Promise((resolve) => { entered = resolve; });
  const host = {
    step(cx) {
      if (cx.turn > 1) return 'completed';
      entered();
      return new Promise((resolve) => { late = () => resolve('completed'); }); // ignores cx.signal
    },
  };
  const { agent } = await Agent.open(host, await FileLog.open(file), { abortGraceMs: 50 });
  await agent.followup(userMessage('a', 'go'));
  await inStep;
  const started = performance.now();
  await agent.cancel({ kind: 'user' });
  await agent.whenIdle();
  assert.ok(performance.now() - started >= 45, 'not before the grace ran out');
  late(); // the dropped call's late answer is not fed
  await agent.followup(userMessage('b', 'next'));
  await agent.whenIdle();
  await agent.close();
  const ends = records(file).filter((r) => r.type === 'turn/end').map((r) => r.data);
  assert.deepEqual(ends, [
    { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } },
    { turn: 2, reason: { kind: 'completed' } },
  ]);
  assert.equal(cli('verify', file).status, 0);
  await assert.rejects(Agent.open(host, new MemoryLog(), { abortGraceMs: -1 }), coxswain.InvalidOptionsError);
});

test('admission is the session layer\'s: ids and messages within maxIdBytes and maxMessageBytes', async () => {
  const { agent } = await Agent.open(textHost, new MemoryLog(), { maxIdBytes: 4, maxMessageBytes: 64 });
  await assert.rejects(agent.inject(userMessage('m12345', 'x')), (error) => {
    assert.ok(error instanceof coxswain.IdTooLongError);
    assert.deepEqual([error.kind, error.bytes, error.max, error.wasDelivered], ['id-too-long', 6, 4, false]);
    return true;
  });
  await assert.rejects(agent.remove('m12345'), coxswain.IdTooLongError);
  await assert.rejects(agent.inject(userMessage('m1', 'x'.repeat(64))), (error) => {
    assert.ok(error instanceof coxswain.MessageTooLargeError);
    assert.deepEqual([error.kind, error.max], ['message-too-large', 64]);
    return true;
  });
  await agent.inject(userMessage('m1', 'x'));
  assert.deepEqual((await agent.pending()).nextStep.map((p) => p.message.id), ['m1']);
  await agent.dispose();
  await assert.rejects(Agent.open(textHost, new MemoryLog(), { maxIdBytes: 0 }), coxswain.InvalidOptionsError);
});

test('host events: inside their step only, never a machine type; hooks that throw fail the turn (S38)', async () => {
  const log = new CountingLog();
  let late;
  const host = {
    async step(cx) {
      await assert.rejects(cx.record('turn/end', {}), coxswain.ReservedTypeError);
      late = cx;
      if (cx.turn === 2) throw new Error('model unavailable');
      return 'completed';
    },
  };
  const { agent } = await Agent.open(host, log);
  const updates = [];
  agent.subscribe((u) => updates.push(u));
  await agent.followup(userMessage('a', 'x'));
  await agent.whenIdle();
  await assert.rejects(late.record('model/output', {}), coxswain.StepClosedError);
  await agent.followup(userMessage('b', 'y'));
  await agent.whenIdle();
  const errorsSeen = updates.filter((u) => u.notified && u.notified.type === 'agent/error');
  assert.deepEqual(errorsSeen.map((u) => u.notified), [
    {
      type: 'agent/error',
      turn: 2,
      step: 1,
      error: { message: "the host's step call raised: model unavailable", code: 'host-raised' },
    },
  ]);
  await agent.dispose();
});

test('maintenance (S43): resolves with the job value; busy while running; S51 retries are refused', async () => {
  const log = new CountingLog();
  const { agent } = await Agent.open(textHost, log, { memory: 8 });
  const signals = [];
  assert.equal(await agent.runMaintenance(async (signal) => { signals.push(signal); return 42; }), 42);
  assert.equal(signals[0].aborted, false);
  await agent.followup(userMessage('a', 'x'));
  await assert.rejects(agent.runMaintenance(async () => 0), coxswain.BusyError);
  await agent.whenIdle();
  // S52: `a` was claimed, the delivery memory holds it: a retry is refused, not run twice.
  await assert.rejects(agent.followup(userMessage('a', 'x')), coxswain.AlreadyDeliveredError);
  await agent.dispose();
});

test('S45: dispose while a step runs aborts it, waits for its answer, then ends the agent', async (t) => {
  const file = tempLog(t);
  let stepped;
  const inStep = new Promise((resolve) => {
    stepped = resolve;
  });
  const seen = [];
  const host = {
    step(cx) {
      stepped();
      return new Promise((resolve) =>
        cx.signal.addEventListener('abort', () => {
          seen.push(cx.signal.reason);
          resolve('completed');
        }),
      );
    },
  };
  const { agent } = await Agent.open(host, await FileLog.open(file));
  await agent.followup(userMessage('a', 'go'));
  await inStep;
  await agent.dispose();
  assert.deepEqual(seen, [{ kind: 'disposed' }]);
  assert.deepEqual(await agent.finished(), { kind: 'disposed' });
  await agent.whenIdle(); // resolves once disposed
  await assert.rejects(agent.dispose(), coxswain.DisposedError);
  assert.deepEqual(records(file).at(-1), {
    seq: 7,
    type: 'turn/end',
    data: { turn: 1, reason: { kind: 'aborted', reason: { kind: 'disposed' } } },
  });
  assert.equal(cli('verify', file).status, 0);
});

test('one writer per log: FileLog holds the flock the Rust FileLog takes', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  await assert.rejects(FileLog.open(file), (error) => {
    assert.ok(error instanceof coxswain.LockedError);
    assert.equal(error.kind, 'locked');
    return true;
  });
  const script = path.join(path.dirname(file), 'script.json');
  fs.writeFileSync(script, JSON.stringify({ actions: [{ followup: { id: 'r', content: 'x' } }] }));
  const run = cli('run', script, '--log', file);
  assert.notEqual(run.status, 0, 'the Rust FileLog refuses a log Node holds');
  assert.match(run.stderr + run.stdout, /locked/);
  await log.close();
  const again = await FileLog.open(file);
  await again.close();
});

test('S15 through the agent: remove/replace resolve found, prepend and clear; options are checked', async () => {
  const log = new CountingLog();
  const { agent } = await Agent.open(textHost, log, { memory: 0 });
  await agent.inject(userMessage('a', 'one'));
  await agent.send(userMessage('b', 'two'), 'next-turn', false);
  await agent.prepend('next-step', userMessage('p', 'first'));
  assert.equal(await agent.replace('a', userMessage('a', 'ONE')), true);
  assert.equal(await agent.replace('zz', userMessage('zz', 'x')), false);
  assert.equal(await agent.remove('b'), true);
  assert.equal(await agent.remove('b'), false);
  assert.deepEqual(await agent.pending(), {
    nextTurn: [],
    nextStep: [
      { message: userMessage('p', 'first'), wakeup: false },
      { message: userMessage('a', 'ONE'), wakeup: false },
    ],
  });
  await agent.clear();
  assert.deepEqual(await agent.pending(), { nextTurn: [], nextStep: [] });
  assert.equal(agent.status, 'idle');
  await agent.close();
  assert.deepEqual(await agent.finished(), { kind: 'closed' });
  await assert.rejects(agent.inject(userMessage('c', 'late')), coxswain.ClosedError);
  await assert.rejects(Agent.open(textHost, new MemoryLog(), { maxBatch: 0 }), coxswain.InvalidOptionsError);
  await assert.rejects(Agent.open(textHost, new MemoryLog(), { memory: 1.5 }), coxswain.InvalidOptionsError);
});

test('sync policies: every-append syncs each append, per-turn only a turn/end, never only at the end', async (t) => {
  const counts = {};
  for (const sync of ['every-append', 'per-turn', 'never']) {
    const file = tempLog(t);
    const log = await FileLog.open(file, { sync });
    // The syncs (`fdatasync`) the shared Rust log did to the file (src/filelog.rs counts them).
    const syncs = () => faults(log).fileOperations()[0];
    const { agent } = await Agent.open(textHost, log);
    await agent.followup(userMessage('a', 'x'));
    await agent.whenIdle();
    const beforeEnd = syncs();
    await agent.close(); // the final sync
    counts[sync] = [beforeEnd, syncs()];
    assert.equal(cli('verify', file).status, 0);
  }
  // One session: 3 appends (the follow-up with the pre-step the loop answers in its batch, the
  // host event, the step's answer with the turn-stopping the loop answers, decision 1), one of
  // them with the turn/end.
  assert.deepEqual(counts, { 'every-append': [3, 4], 'per-turn': [1, 2], never: [0, 1] });
  await assert.rejects(FileLog.open(tempLog(t), { sync: 'sometimes' }), coxswain.InvalidOptionsError);
});

// ---- SPEC §12 through the agent: guards (S54), the bound (S55), conflicts (S56) --------------

test('S54: guarded sends join their turn or reject with TurnMismatchError, changing nothing', async () => {
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  let started;
  const running = new Promise((resolve) => { started = resolve; });
  const host = {
    async step(cx) {
      if (cx.step === 1) {
        started();
        await gate;
      }
      return 'completed';
    },
  };
  const log = new CountingLog();
  const { agent } = await Agent.open(host, log);
  assert.equal(agent.lastTurn, 0);
  await assert.rejects(agent.followupIfIdleAfter(1, userMessage('a', 'a')), (error) => {
    assert.ok(error instanceof coxswain.TurnMismatchError);
    assert.deepEqual(error.expect, { idleAfter: 1 });
    assert.equal(error.wasDelivered, false);
    return true;
  });
  await agent.followupIfIdleAfter(0, userMessage('a', 'a'));
  await running;
  assert.equal(agent.lastTurn, 1);
  assert.equal(agent.status, 'running');
  const s = userMessage('s', 'look');
  await agent.steerExpecting(1, s);
  await assert.rejects(agent.steerExpecting(2, userMessage('x', 'x')), coxswain.TurnMismatchError);
  await assert.rejects(agent.steerExpecting(2, s), (error) => {
    assert.ok(error instanceof coxswain.AlreadyPendingError, 'identity first (S13, S54)');
    assert.equal(error.wasDelivered, true);
    return true;
  });
  release();
  await agent.whenIdle();
  await assert.rejects(agent.steerExpecting(1, userMessage('late', 'late')), coxswain.TurnMismatchError);
  await agent.send(userMessage('q', 'q'), 'next-turn', false, { expect: { idleAfter: 1 } });
  assert.deepEqual((await agent.pending()).nextTurn.map((p) => p.message.id), ['q']);
  await agent.dispose();
  const spliced = log.appends.flat().filter((type) => type === 'agent/inbox/spliced').length;
  // a in, a claimed, s in, s claimed, q in, q cleared at dispose: nothing from the refusals.
  assert.equal(spliced, 6);
});

test('S55: maxPending is the core admission bound (FullError), default 10,000, null unbounded', async () => {
  const { agent } = await Agent.open(textHost, new MemoryLog(), { maxPending: 1 });
  await agent.inject(userMessage('a', 'a'));
  await assert.rejects(agent.inject(userMessage('b', 'b')), (error) => {
    assert.ok(error instanceof coxswain.FullError);
    assert.equal(error.target, 'next-step');
    assert.equal(error.maxPending, 1);
    assert.equal(error.message, 'the next-step list is full (1 items pending)');
    return true;
  });
  await agent.dispose();
  const unbounded = (await Agent.open(textHost, new MemoryLog(), { maxPending: null })).agent;
  for (const id of ['a', 'b', 'c']) await unbounded.inject(userMessage(id, id));
  await unbounded.dispose();
  await assert.rejects(Agent.open(textHost, new MemoryLog(), { maxPending: 0 }), coxswain.InvalidOptionsError);
});

test('S56: an id reused for another message rejects with ConflictError, never success', async () => {
  const { agent } = await Agent.open(textHost, new MemoryLog());
  const a = userMessage('a', 'hi');
  await agent.followup(a);
  await agent.whenIdle();
  await assert.rejects(agent.followup(userMessage('a', 'something else')), (error) => {
    assert.ok(error instanceof coxswain.ConflictError);
    assert.equal(error.id, 'a');
    assert.equal(error.wasDelivered, false);
    return true;
  });
  await assert.rejects(agent.followup(a), (error) => {
    assert.ok(error instanceof coxswain.AlreadyDeliveredError);
    assert.equal(error.wasDelivered, true);
    return true;
  });
  await agent.dispose();
});

test('a follow-up, steer or inject of no message object is refused alone, and nothing is logged (InvalidInputError)', async () => {
  // Alone in its batch it crosses as its message's own text (src/session.rs `stage_deliver`).
  const log = new MemoryLog();
  const { agent } = await Agent.open({ step: () => 'completed' }, log);
  for (const deliver of ['followup', 'steer', 'inject']) {
    for (const notMessage of [5, 'text', null, { id: 7 }]) {
      await assert.rejects(agent[deliver](notMessage), (error) => error instanceof coxswain.InvalidInputError
        && error.message.startsWith('unknown input: '), `${deliver}(${JSON.stringify(notMessage)})`);
      await agent.whenIdle();
    }
  }
  assert.equal(log.bytes().length, 0);
  const ok = userMessage('ok', 'go');
  await agent.followup(ok);
  await agent.whenIdle();
  const records = parseLog(log.bytes()).records;
  assert.deepEqual(records.map((record) => [record.seq, record.type]), [
    [1, 'agent/inbox/spliced'], [2, 'turn/start'], [3, 'agent/inbox/spliced'], [4, 'step/start'],
    [5, 'user/message'], [6, 'step/end'], [7, 'turn/end'],
  ]);
  assert.deepEqual(records[0].data, { target: 'next-turn', start: 0, inserted: [ok], wakeup: true });
  assert.deepEqual(records[6].data, { turn: 1, reason: { kind: 'completed' } });
  await agent.dispose();
});

test('a command of unknown shape is refused alone in its batch; a hook answer of unknown shape is host-invalid-answer (decision 3)', async () => {
  const host = { step: (cx) => (cx.turn === 1 ? 'bogus' : 'completed') };
  const log = new MemoryLog();
  const { agent } = await Agent.open(host, log);
  // One batch, as JSON text: the cancel of unknown cause is refused alone, the inject is durable.
  const [cancel, inject] = await Promise.allSettled([
    agent.cancel({ kind: 'bogus' }),
    agent.inject(userMessage('a', 'ok')),
  ]);
  assert.equal(cancel.reason.kind, 'invalid-input');
  assert.equal(
    cancel.reason.message,
    'unknown input: unknown variant `bogus`, expected one of `user`, `parent`, `hook`, `disposed`',
  );
  assert.equal(inject.status, 'fulfilled');
  // The step's answer is no answer: the session answers `fail` on the host's behalf; the agent goes on.
  await agent.followup(userMessage('b', 'go'));
  await agent.whenIdle();
  const end = parseLog(log.bytes()).records.at(-1);
  assert.deepEqual(end.data.reason.error, {
    message: "the host's step call gave an invalid answer: not an answer: unknown variant `bogus`, expected one of `completed`, `max-tokens`, `continue`, `fail`",
    code: 'host-invalid-answer',
  });
  assert.equal(agent.ending, null);
  await agent.followup(userMessage('c', 'again'));
  await agent.whenIdle();
  assert.deepEqual(parseLog(log.bytes()).records.at(-1).data, { turn: 2, reason: { kind: 'completed' } });
  await agent.dispose();
});

test('a value JSON cannot hold is refused alone; its batch goes on (InvalidInputError, host-invalid-answer)', async () => {
  const host = { step: (cx) => (cx.turn === 1 ? { fail: { message: 'x', code: 2n ** 70n } } : 'completed') };
  const { agent } = await Agent.open(host, new MemoryLog());
  const ends = [];
  agent.subscribe((u) => u.recorded && u.recorded.entry.type === 'turn/end' && ends.push(u.recorded.entry.data));
  const results = await Promise.allSettled([
    agent.inject(userMessage('a', 'ok')),
    agent.inject(userMessage('b', 2n ** 70n)),
    agent.followup(userMessage('c', 'ok')),
  ]);
  assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.ok(results[1].reason instanceof coxswain.InvalidInputError);
  await agent.whenIdle(); // the step's answer could not be encoded: the call failed (S38)
  await agent.followup(userMessage('d', 'ok'));
  await agent.whenIdle();
  assert.equal(ends.length, 2);
  assert.equal(ends[0].reason.error.code, 'host-invalid-answer');
  assert.deepEqual(ends[1], { turn: 2, reason: { kind: 'completed' } });
  await agent.dispose();
});
