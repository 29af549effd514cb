'use strict';
// port.js speaks docs/PORTS.md's line protocol: every trace of the public corpus replayed
// through it as a child process, each reply compared by JSON value (FORMAT.md), as
// `coxswain conform --exec "node adapters/node/port.js"` does.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');
const { corpus, readTrace } = require('./support/trace');

const PORT = path.resolve(__dirname, '..', 'port.js');

/** A port child process: `ask(request)` sends one line and resolves with the parsed reply. */
function startPort(t) {
  const child = spawn(process.execPath, [PORT], { stdio: ['pipe', 'pipe', 'inherit'] });
  const replies = readline.createInterface({ input: child.stdout });
  const waiting = [];
  const raw = [];
  replies.on('line', (line) => {
    raw.push(line);
    const next = waiting.shift();
    if (next) next(line);
  });
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  t.after(() => child.kill());
  return {
    raw,
    exited,
    ask(request) {
      return new Promise((resolve) => {
        waiting.push((line) => resolve(JSON.parse(line)));
        child.stdin.write(`${JSON.stringify(request)}\n`);
      });
    },
    write(text) {
      child.stdin.write(text);
    },
    end() {
      child.stdin.end();
      return exited;
    },
  };
}

test('PORTS.md: every corpus trace replays through port.js, and it exits 0 at EOF', async (t) => {
  const port = startPort(t);
  const hello = await port.ask({ hello: { protocol: 1 } });
  assert.deepEqual(hello, { hello: { protocol: 1, name: 'coxswain-node', version: '0.1.0' } });
  const files = corpus();
  assert.ok(files.length >= 70, `the corpus has ${files.length} traces`);
  for (const file of files) {
    const name = path.basename(file);
    await t.test(name, async () => {
      const trace = readTrace(file);
      const ready = await port.ask({ begin: { trace: name, given: trace.given } });
      if (trace.invalidLog) {
        assert.deepEqual(ready, { rejected: 'invalid-log' }, 'S47: restoring must fail');
      } else {
        const repaired = trace.given?.repair === undefined ? {} : { repaired: trace.repaired };
        assert.deepEqual(ready, { ready: repaired });
        for (const [index, step] of trace.steps.entries()) {
          if (step.fate !== undefined) {
            assert.deepEqual(await port.ask({ fate: { id: step.fate } }), { fate: step.is }, `fate(${step.fate})`);
            continue;
          }
          const reply = await port.ask({ in: step.input });
          assert.deepEqual(reply, step.expected, `input ${index + 1}: ${JSON.stringify(step.input)}`);
        }
      }
      assert.deepEqual(await port.ask({ end: {} }), { ended: {} });
    });
  }
  assert.equal(await port.end(), 0);
  for (const line of port.raw) assert.ok(!line.includes('\n') && JSON.parse(line), 'one JSON object per line');
});

test('PORTS.md: protocol errors are `error` replies, rejections are never errors', async (t) => {
  const port = startPort(t);
  const message = { id: 'a', source: { kind: 'user' }, content: 'hi' };
  assert.deepEqual(await port.ask({ in: { followup: message } }), {
    error: '`in` before `begin` or after `end`',
  });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: null } }), { ready: {} });
  const accepted = await port.ask({ in: { steer: message } });
  assert.equal(accepted.outputs.length, 7, 'S16: an idle steer opens a turn');
  // S13: a duplicate pending id is a rejection, not an error (`b` stays pending: S20).
  const quiet = { ...message, id: 'b' };
  assert.equal((await port.ask({ in: { inject: quiet } })).outputs.length, 2);
  assert.deepEqual(await port.ask({ in: { inject: quiet } }), { rejected: 'already-pending' });
  // S4: an answer to a request that is not outstanding.
  assert.deepEqual(await port.ask({ in: { step: 'completed' } }), { rejected: 'unexpected-completion' });
  const unknown = await port.ask({ in: { bogus: {} } });
  assert.deepEqual(Object.keys(unknown), ['error']);
  assert.deepEqual(Object.keys(await port.ask({ nonsense: 1 })), ['error']);
  assert.deepEqual(Object.keys(await port.ask({ in: {}, end: {} })), ['error']);
  assert.deepEqual(await port.ask({ end: {} }), { ended: {} });
  assert.deepEqual(Object.keys(await port.ask({ in: { clear: {} } })), ['error']);
  // A `given` of the wrong shape is malformed (an error), a log S46 refuses is `invalid-log`.
  assert.deepEqual(Object.keys(await port.ask({ begin: { trace: 't', given: { log: 3 } } })), ['error']);
  assert.deepEqual(
    await port.ask({ begin: { trace: 't', given: { log: [{ type: 'turn/start', data: {} }] } } }),
    { rejected: 'invalid-log' },
  );
  // S51: `given.memory` gives the delivery memory.
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { memory: 1 } } }), { ready: {} });
  await port.ask({ in: { inject: message } });
  await port.ask({ in: { remove: 'a' } });
  assert.deepEqual(await port.ask({ in: { inject: message } }), { rejected: 'already-delivered' });
  // S55: `given.maxPending` bounds the machine; S54: a guard is checked after the identity
  // checks and before the bound; S56: a reused id is a conflict.
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { maxPending: 1 } } }), { ready: {} });
  assert.equal((await port.ask({ in: { inject: message } })).outputs.length, 2);
  assert.deepEqual(await port.ask({ in: { inject: quiet } }), { rejected: 'full' });
  const guarded = (id, expect) => ({
    in: { send: { message: { ...message, id }, target: 'next-turn', wakeup: false, expect } },
  });
  assert.equal((await port.ask(guarded('c', { idleAfter: 0 }))).outputs.length, 2);
  assert.deepEqual(await port.ask(guarded('d', { turn: 0 })), { rejected: 'turn-mismatch' });
  assert.deepEqual(await port.ask(guarded('d', { idleAfter: 0 })), { rejected: 'full' });
  assert.deepEqual(await port.ask({ in: { inject: message } }), { rejected: 'already-pending' });
  assert.deepEqual(await port.ask({ in: { inject: { ...message, content: 'changed' } } }), {
    rejected: 'conflict',
  });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { maxPending: 0 } } }), {
    error: 'given `maxPending` is not a positive integer',
  });
  // A blank line is no request: the next request still gets the next reply.
  port.write('\n');
  assert.deepEqual(await port.ask({ end: {} }), { ended: {} });
  assert.equal(await port.end(), 0);
});

test('FORMAT.md numbers compare as written: an input reaches the core as the runner wrote it (S8, S54)', async (t) => {
  const port = startPort(t);
  assert.deepEqual(await port.ask({ begin: { trace: 'big', given: null } }), { ready: {} });
  // 2^64 - 1 is a u64 to the core, but a float to JSON.parse: sent as text, not re-serialized.
  const max = '18446744073709551615';
  const message = `{"id":"m","source":{"kind":"user"},"content":${max}}`;
  port.write(`{"in":{"send":{"message":${message},"target":"next-step","wakeup":true,"expect":{"turn":${max}}}}}\n`);
  port.write(`{"in":{"inject":${message}}}\n`);
  port.write('{"end":{}}\n');
  assert.equal(await port.end(), 0);
  assert.deepEqual(port.raw.slice(1), [
    '{"rejected":"turn-mismatch"}',
    `{"outputs":[{"event":{"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"m","content":${max},"source":{"kind":"user"}}]}}},{"notify":{"type":"agent/inbox/inserted","message":{"id":"m","content":${max},"source":{"kind":"user"}}}}]}`,
    '{"ended":{}}',
  ]);
});

test('PORTS.md §13: `fate` requests, `resume` inputs and `given.repair` (S57, S58, S59)', async (t) => {
  const port = startPort(t);
  const a = { id: 'a', source: { kind: 'user' }, content: 'go' };
  assert.deepEqual(await port.ask({ fate: { id: 'a' } }), { error: '`fate` before `begin` or after `end`' });
  // A log cut off while turn 1's pre-step request was outstanding: `a` claimed, unseen.
  const log = [
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [a], wakeup: true } },
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } },
  ];
  const closer = { event: { type: 'turn/end', data: { turn: 1, reason: { kind: 'interrupted' } } } };
  // Without `repair` such a log does not restore (S47); with A = 0 it is closed (S50).
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { log } } }), { rejected: 'invalid-log' });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { log, memory: 'unbounded', repair: { redeliver: 0 } } } }), {
    ready: { repaired: [closer] },
  });
  assert.deepEqual(await port.ask({ fate: { id: 'a' } }), { fate: { claimed: { turn: 1, end: 'interrupted' } } });
  assert.deepEqual(await port.ask({ in: { resume: {} } }), { outputs: [] });
  // A = 1: put back at the front of next-turn, parked until `resume`.
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { log, repair: { redeliver: 1 } } } }), {
    ready: {
      repaired: [
        closer,
        { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [a], wakeup: true, redelivery: 1 } } },
      ],
    },
  });
  assert.deepEqual(await port.ask({ fate: { id: 'a' } }), { fate: { pending: 'next-turn' } });
  assert.deepEqual(await port.ask({ fate: { id: 'never' } }), { fate: 'unknown' });
  const resumed = await port.ask({ in: { resume: {} } });
  assert.deepEqual(resumed.outputs.slice(0, 2), [
    { notify: { type: 'agent/status', status: 'running' } },
    { event: { type: 'turn/start', data: { turn: 2 } } },
  ]);
  // A balanced log with `repair`: nothing appended, an empty list.
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { log: [], repair: { redeliver: 1 } } } }), {
    ready: { repaired: [] },
  });
  // Malformed requests and values are `error`s naming what is wrong.
  assert.deepEqual(await port.ask({ fate: { id: 3 } }), { error: '`fate` takes {id: string}' });
  assert.deepEqual(await port.ask({ fate: { id: 'a', is: 'unknown' } }), { error: '`fate` takes {id: string}' });
  assert.deepEqual(await port.ask({ fate: 'a' }), { error: '`fate` takes {id: string}' });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { repair: { redeliver: -1 } } } }), {
    error: 'given `repair` is not {"redeliver": A} with an integer A >= 0',
  });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { repair: 1 } } }), {
    error: 'given `repair` is not {"redeliver": A} with an integer A >= 0',
  });
  assert.deepEqual(await port.ask({ begin: { trace: 't', given: { memory: 'all' } } }), {
    error: 'given `memory` is neither a non-negative integer nor "unbounded"',
  });
  assert.deepEqual(await port.ask({ end: {} }), { ended: {} });
  assert.deepEqual(await port.ask({ fate: { id: 'a' } }), { error: '`fate` before `begin` or after `end`' });
  assert.equal(await port.end(), 0);
});
