'use strict';
// Hostile input (issue 49): a log path that is not a regular file is refused at open, promptly
// (a FIFO is never opened); a log line longer than `MAX_LINE_BYTES` is refused as the read
// passes the limit, naming the path and the line; too deep for a log record is `TooDeepError`
// with the Rust `TooDeep`'s text in every layer, and serde_json's recursion limit decides
// nothing; a 1 MiB id is never printed whole.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const coxswain = require('..');

const { MAX_LINE_BYTES } = require('../log');

const { Agent, FileLog, Machine, MemoryLog } = coxswain;

function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-hostile-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A value nesting `levels` arrays. */
function nested(levels) {
  let value = 0;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

/** A message nesting `depth` levels, its own object included. */
function deepMessage(id, depth) {
  return { id, source: { kind: 'user' }, content: nested(depth - 1) };
}

/** What `FileLog.open(file)` rejects with; it must settle at once (no hang). */
async function refusedAtOpen(file) {
  const started = Date.now();
  const settled = await Promise.race([
    FileLog.open(file).then(
      () => assert.fail('opened'),
      (error) => error,
    ),
    new Promise((resolve) => setTimeout(() => resolve('hung'), 5000).unref()),
  ]);
  assert.notEqual(settled, 'hung', `${file}: FileLog.open did not return`);
  assert.ok(Date.now() - started < 5000);
  return settled;
}

// ----- a log path that is not a regular file -----

test('a FIFO, a directory or a socket is refused at open with NotRegularFileError', async (t) => {
  const dir = tempDir(t);
  const fifo = path.join(dir, 'fifo');
  const directory = path.join(dir, 'dir');
  const socket = path.join(dir, 'sock');
  execFileSync('mkfifo', [fifo]);
  fs.mkdirSync(directory);
  const server = net.createServer();
  await new Promise((resolve) => server.listen(socket, resolve));
  t.after(() => server.close());
  for (const [file, kind] of [[fifo, 'a FIFO'], [directory, 'a directory'], [socket, 'a socket']]) {
    const error = await refusedAtOpen(file);
    assert.ok(error instanceof coxswain.NotRegularFileError, `${kind}: ${error}`);
    assert.ok(error instanceof coxswain.LogIoError && error instanceof coxswain.CoxswainError);
    assert.equal(error.message, `${file}: not a regular file (${kind})`);
    assert.equal(error.name, 'NotRegularFileError');
    assert.equal(error.kind, 'not-regular'); // the shared file log's kind
    assert.equal(error.path, file);
    assert.equal(error.fileType, kind);
  }
  // A symlink to the FIFO is the FIFO; nothing was created.
  const link = path.join(dir, 'link');
  fs.symlinkSync(fifo, link);
  assert.equal((await refusedAtOpen(link)).message, `${link}: not a regular file (a FIFO)`);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['dir', 'fifo', 'link', 'sock']);
});

// ----- a line longer than the limit -----

test('the line limit is the Rust logs\' own', () => {
  assert.equal(MAX_LINE_BYTES, 2 * 1024 * 1024);
});

test('a line longer than the limit is refused naming the path and the line, the file left as it was', async (t) => {
  const dir = tempDir(t);
  const head = coxswain.encodeRecords(1, [{ type: 'x/y', data: 1 }, { type: 'x/y', data: 2 }]);
  const long = 'a'.repeat(MAX_LINE_BYTES + 1);
  for (const [tail, line] of [[long, 3], [`${long}\n`, 3], ['a'.repeat(3 * MAX_LINE_BYTES), 3]]) {
    const file = path.join(dir, 'long.jsonl');
    fs.writeFileSync(file, head + tail);
    await assert.rejects(Agent.open({}, await FileLog.open(file)), (error) => {
      assert.ok(error instanceof coxswain.LineTooLongError, String(error));
      assert.ok(error instanceof coxswain.CorruptLogError);
      assert.equal(
        error.message,
        `${file}: line ${line} is longer than ${MAX_LINE_BYTES} bytes (the longest record a session writes)`,
      );
      assert.deepEqual([error.line, error.path, error.max, error.kind], [line, file, MAX_LINE_BYTES, 'line-too-long']);
      return true;
    });
    assert.equal(fs.readFileSync(file, 'latin1'), head + tail, 'a refused log is left as it was');
  }
  // A first line past the limit is line 1; one of exactly the limit is read (and refused as
  // the line it is, not for its length).
  const file = path.join(dir, 'first.jsonl');
  fs.writeFileSync(file, ' '.repeat(MAX_LINE_BYTES + 1));
  await assert.rejects(Agent.open({}, await FileLog.open(file)), (error) => error.line === 1 && error.kind === 'line-too-long');
  fs.writeFileSync(file, `${'a'.repeat(MAX_LINE_BYTES)}\n`);
  await assert.rejects(Agent.open({}, await FileLog.open(file)), (error) => error instanceof coxswain.CorruptLogError && error.kind === 'corrupt' && error.line === 1);
});

test('a record of the limit reads back', async (t) => {
  const dir = tempDir(t);
  const envelope = '{"seq":1,"type":"model/output","data":""}'.length;
  const line = coxswain.encodeRecords(1, [{ type: 'model/output', data: 'a'.repeat(MAX_LINE_BYTES - envelope) }]);
  assert.equal(line.length, MAX_LINE_BYTES + 1);
  const file = path.join(dir, 's.jsonl');
  fs.writeFileSync(file, line);
  const { agent } = await Agent.open({}, await FileLog.open(file));
  await agent.close();
});

// ----- too deep: one name, the Rust text -----

test('a bare Machine has no depth limit (decision 8): past the log depth it accepts, up to what the binding carries', () => {
  const machine = new Machine();
  machine.inject(deepMessage('fits', 124)).persisted(); // MAX_MESSAGE_DEPTH
  for (const depth of [125, 127, 128, 129, 200, 256]) {
    // The depth limit is the log's (the agent's admission, below), never the bare machine's.
    const transition = machine.inject(deepMessage(`d${depth}`, depth));
    assert.deepEqual(transition.events.map((event) => event.type), ['agent/inbox/spliced'], `${depth}`);
    transition.persisted();
  }
  assert.equal(machine.status, 'idle');
  // Past the depth the binding carries a value (257 levels) it is not followed (a cycle).
  assert.throws(() => machine.followup(deepMessage('m', 258)), {
    name: 'InvalidInputError',
    message: 'not JSON: a value nests deeper than 256 levels (or is a cycle) (at "0")',
  });
});

test('the agent refuses a message one past the log depth with TooDeepError, at any depth', async () => {
  const { agent } = await Agent.open({}, new MemoryLog());
  await agent.inject(deepMessage('fits', 124)); // MAX_MESSAGE_DEPTH
  for (const depth of [125, 128, 200, 257]) {
    await assert.rejects(agent.inject(deepMessage(`d${depth}`, depth)), (error) => {
      assert.ok(error instanceof coxswain.TooDeepError, `${depth}: ${error}`);
      assert.equal(error.name, 'TooDeepError');
      assert.equal(error.message, `the value nests ${depth} levels deep; at most 124 fit in a log record`);
      assert.deepEqual([error.kind, error.depth, error.max, error.wasDelivered], ['too-deep', depth, 124, false]);
      return true;
    });
  }
  assert.deepEqual((await agent.pending()).nextStep.map((p) => p.message.id), ['fits']);
  await agent.close();
});

test('a record too deep is TooDeepError everywhere it is written', async () => {
  assert.ok(coxswain.encodeRecords(1, [{ type: 'x/y', data: nested(126) }])); // MAX_DATA_DEPTH
  assert.throws(() => coxswain.encodeRecords(1, [{ type: 'x/y', data: nested(127) }]), (error) => {
    assert.ok(error instanceof coxswain.TooDeepError, String(error));
    assert.equal(error.message, 'the value nests 128 levels deep; at most 127 fit in a log record');
    assert.deepEqual([error.depth, error.max], [128, 127]);
    return true;
  });
  const raised = [];
  const host = {
    async step(cx) {
      await cx.record('x/y', nested(126));
      await cx.record('x/y', nested(127)).catch((error) => raised.push(error));
      return 'completed';
    },
  };
  const { agent } = await Agent.open(host, new MemoryLog());
  await agent.followup({ id: 'm', source: { kind: 'user' }, content: 'go' });
  await agent.whenIdle();
  await agent.close();
  assert.deepEqual(raised.map((error) => [error.name, error.message, error.depth, error.max]), [
    ['TooDeepError', 'the value nests 127 levels deep; at most 126 fit in a log record', 127, 126],
  ]);
});

// ----- a long id is not printed whole -----

test('a 1 MiB id is not printed whole', async () => {
  const long = 'i'.repeat(1 << 20);
  const machine = new Machine();
  machine.inject({ id: long, source: { kind: 'user' }, content: 'a' });
  for (const content of ['a', 'b']) {
    assert.throws(() => machine.inject({ id: long, source: { kind: 'user' }, content }), (error) => {
      assert.ok(error instanceof coxswain.RejectedError, error.message.slice(0, 300));
      assert.ok(error.message.length < 300 && !error.message.includes(long), error.message.slice(0, 300));
      return true;
    });
  }
  const { agent } = await Agent.open({}, new MemoryLog());
  await assert.rejects(agent.inject({ id: long, source: { kind: 'user' }, content: 'a' }), {
    name: 'IdTooLongError',
    message: 'the id is 1048576 bytes long; at most 256 are admitted',
  });
  await agent.close();
});
