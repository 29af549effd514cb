'use strict';
// Issue 52: Node's FileLog is the one Rust file log every runtime writes (coxswain-file-log,
// src/filelog.rs), its IO on libuv's thread pool. Its calls run one at a time, in the order
// made; a closed log refuses every call but `close` (`closed`); its failures are the shared
// vocabulary (`coxswain_file_log::LogError::kind`), mapped to classes by the kind alone, each
// naming the file.

const { faults } = require('./support/faults');
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const coxswain = require('..');
const errors = require('../errors');

const { Agent, FileLog, userMessage } = coxswain;

function tempLog(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-filelog-'));
  t.after(() => {
    fs.chmodSync(dir, 0o700);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return path.join(dir, 'session.jsonl');
}

const host = { async step() { return 'completed'; } };
const entry = (n) => ({ type: 'model/output', data: { n } });

async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('resolved');
}

test('calls made together run one at a time, in the order made', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file, { sync: 'never' });
  assert.equal(log.path, file);
  assert.equal(log.nextSeq, 1);
  const seqs = await Promise.all([
    log.append([entry(1)]),
    log.append([entry(2), entry(3)]),
    log.sync(),
    log.append([entry(4)]),
    log.append([]),
  ]);
  assert.deepEqual(seqs, [1, 2, undefined, 4, 5]);
  assert.equal(log.nextSeq, 5);
  const records = coxswain.parseLog(fs.readFileSync(file)).records;
  assert.deepEqual(records.map((r) => [r.seq, r.data.n]), [[1, 1], [2, 2], [3, 3], [4, 4]]);
  await log.close();
});

test('an append to a log no agent resumed reads it back and drops its torn tail first (S50)', async (t) => {
  const file = tempLog(t);
  const whole = coxswain.encodeRecords(1, [entry(1), entry(2)]);
  fs.writeFileSync(file, `${whole}{"seq":3,"ty`);
  const log = await FileLog.open(file);
  assert.equal(log.nextSeq, 1, 'nothing read at open');
  assert.equal(await log.append([entry(3)]), 3);
  assert.equal(fs.readFileSync(file, 'utf8'), whole + coxswain.encodeRecords(3, [entry(3)]));
  await log.close();
});

test('a closed log refuses every call but close with ClosedError naming the file; its lock is released', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  await log.append([entry(1)]);
  await log.close();
  for (const call of [() => log.append([entry(2)]), () => log.sync()]) {
    const error = await rejection(call());
    assert.ok(error instanceof coxswain.ClosedError, String(error));
    assert.deepEqual([error.kind, error.path, error.message], ['closed', file, `the log file ${file} is closed`]);
  }
  await log.close(); // closing twice does nothing
  const again = await FileLog.open(file);
  assert.equal(await again.append([entry(2)]), 2);
  await again.close();
});

test('a second writer gets LockedError naming the file', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  const error = await rejection(FileLog.open(file));
  assert.ok(error instanceof coxswain.LockedError, String(error));
  assert.deepEqual([error.kind, error.path, error.message], ['locked', file, `the log ${file} is locked by another writer`]);
  await log.close();
});

test('a file the process may not write is LogPermissionDeniedError at open, naming the file', { skip: process.getuid?.() === 0 && 'root may write any file' }, async (t) => {
  const file = tempLog(t);
  fs.writeFileSync(file, '');
  fs.chmodSync(file, 0o444);
  const error = await rejection(FileLog.open(file));
  assert.ok(error instanceof coxswain.LogPermissionDeniedError, String(error));
  assert.ok(error instanceof coxswain.LogIoError);
  assert.deepEqual([error.kind, error.path], ['permission-denied', file]);
  assert.match(error.message, new RegExp(`^the log file ${file}: permission denied \\(`));
  // A directory it may not create the file in: the same.
  const dir = path.dirname(file);
  fs.chmodSync(dir, 0o500);
  const inDir = await rejection(FileLog.open(path.join(dir, 'other.jsonl')));
  assert.ok(inDir instanceof coxswain.LogPermissionDeniedError, String(inDir));
});

test('a write the OS refuses (EACCES, EPERM) is LogPermissionDeniedError; nothing is in the log and the agent goes on', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  const { agent } = await Agent.open(host, log);
  await agent.inject(userMessage('a', 'hi'));
  const size = fs.statSync(file).size;
  for (const errno of [13, 1]) {
    faults(log).failNextWrite(errno);
    const error = await rejection(agent.inject(userMessage('b', 'hi')));
    assert.ok(error instanceof coxswain.PersistenceError, String(error));
    assert.ok(error.cause instanceof coxswain.LogPermissionDeniedError, String(error.cause));
    assert.deepEqual([error.cause.kind, error.cause.path], ['permission-denied', file]);
    assert.match(error.cause.message, new RegExp(`^the log file ${file}: permission denied \\(`));
    assert.equal(fs.statSync(file).size, size);
  }
  await agent.inject(userMessage('b', 'hi'));
  await agent.close();
});

test('a full file system (ENOSPC, EDQUOT) is LogStorageFullError; nothing is in the log and the agent goes on', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  const { agent } = await Agent.open(host, log);
  await agent.inject(userMessage('a', 'hi'));
  const size = fs.statSync(file).size;
  for (const errno of [28, 122]) {
    faults(log).failNextWrite(errno);
    const error = await rejection(agent.inject(userMessage('b', 'hi')));
    assert.ok(error instanceof coxswain.PersistenceError, String(error));
    assert.ok(error.cause instanceof coxswain.LogStorageFullError, String(error.cause));
    assert.ok(error.cause instanceof coxswain.LogIoError);
    assert.deepEqual(
      [error.cause.kind, error.cause.path, error.cause.message],
      ['storage-full', file, `the log file ${file} cannot grow: no space left on its file system`],
    );
    assert.equal(fs.statSync(file).size, size, 'nothing of it is in the log');
    assert.equal(agent.ending, null, 'the agent goes on');
  }
  await agent.inject(userMessage('b', 'hi')); // space again: sent again, acknowledged
  await agent.close();
  const inserted = coxswain.parseLog(fs.readFileSync(file)).records
    .filter((r) => r.type === 'agent/inbox/spliced')
    .flatMap((r) => r.data.inserted.map((m) => m.id));
  assert.deepEqual(inserted, ['a', 'b']);
});

test('another OS error is LogIoError naming the file', async (t) => {
  const file = tempLog(t);
  const log = await FileLog.open(file);
  await log.append([entry(1)]);
  faults(log).failNextWrite(5); // EIO
  const error = await rejection(log.append([entry(2)]));
  assert.equal(error.constructor, coxswain.LogIoError);
  assert.deepEqual([error.kind, error.path], ['io', file]);
  assert.match(error.message, new RegExp(`^${file}: log i/o failed: .*\\(os error 5\\)$`));
  assert.equal(await log.append([entry(2)]), 2, 'cut back: the log takes appends again');
  await log.close();
});

// The mapping: by the kind alone, never by the message's words. ----------------------------------

/** The error `logError` makes of a rejection whose reason is `reason`. */
function mapped(reason) {
  return errors.logError(new Error(JSON.stringify(reason)), '/logs/a.jsonl');
}

test('every kind of the shared log maps to its class, by the kind alone', () => {
  const classes = {
    io: coxswain.LogIoError,
    indeterminate: coxswain.IndeterminateError,
    corrupt: coxswain.CorruptLogError,
    invalid: coxswain.InvalidLogError,
    'not-regular': coxswain.NotRegularFileError,
    'line-too-long': coxswain.LineTooLongError,
    encode: coxswain.EncodeError,
    'too-deep': coxswain.TooDeepError,
    'seq-exhausted': coxswain.EncodeError,
    failed: coxswain.LogFailedError,
    locked: coxswain.LockedError,
    replaced: coxswain.LogReplacedError,
    truncated: coxswain.LogTruncatedError,
    tampered: coxswain.LogTamperedError,
    'storage-full': coxswain.LogStorageFullError,
    'permission-denied': coxswain.LogPermissionDeniedError,
    closed: coxswain.ClosedError,
    'session-open': coxswain.LogIoError,
    'writer-stopped': coxswain.LogIoError,
    fenced: coxswain.LogIoError,
  };
  for (const [kind, Class] of Object.entries(classes)) {
    // A message in another kind's words changes nothing.
    const error = mapped({ kind, message: 'the log file /logs/a.jsonl was truncated: ENOSPC', path: '/logs/a.jsonl' });
    assert.equal(error.constructor, Class, kind);
    assert.deepEqual([error.kind, error.path], [kind, '/logs/a.jsonl'], kind);
    if (!['not-regular', 'line-too-long', 'replaced', 'truncated', 'tampered', 'too-deep'].includes(kind)) {
      assert.equal(error.message, 'the log file /logs/a.jsonl was truncated: ENOSPC', kind);
    }
  }
  // A message that does not name the file gets its path in front.
  assert.equal(mapped({ kind: 'failed', message: 're-open the log', path: '/logs/a.jsonl' }).message, '/logs/a.jsonl: re-open the log');
  // An indeterminate append's cause and undo are mapped too.
  const indeterminate = mapped({
    kind: 'indeterminate',
    message: 'log i/o failed (x) and undoing the partial write failed too (y)',
    path: '/logs/a.jsonl',
    error: { kind: 'io', message: 'write failed', path: '/logs/a.jsonl' },
    undo: { kind: 'truncated', message: 'm', path: '/logs/a.jsonl', expected: 9, found: 3 },
  });
  assert.ok(indeterminate instanceof coxswain.IndeterminateError);
  assert.equal(indeterminate.cause.message, 'write failed');
  assert.ok(indeterminate.undo instanceof coxswain.LogTruncatedError);
  assert.deepEqual([indeterminate.undo.expected, indeterminate.undo.found], [9, 3]);
  // Not a reason at all: a LogIoError naming the file.
  const other = errors.logError(new Error('Something else'), '/logs/a.jsonl');
  assert.equal(other.constructor, coxswain.LogIoError);
  assert.deepEqual([other.kind, other.path, other.message], ['io', '/logs/a.jsonl', '/logs/a.jsonl: Something else']);
});

test("a log's fenced kind stops the agent as fenced (another writer owns the session)", async () => {
  // A host's own log that another writer took the session from (the segment and PostgreSQL logs' kind).
  class Fenced extends coxswain.MemoryLog {
    async append(entries) {
      if (this.fence) throw mapped({ kind: 'fenced', message: 'session s: fenced, epoch 1 was taken over', path: '/logs/a.jsonl' });
      return super.append(entries);
    }
  }
  const log = new Fenced();
  const { agent } = await Agent.open(host, log);
  await agent.inject(userMessage('a', 'hi'));
  log.fence = true;
  // The batch is not in the log (its inputs get `PersistenceError`), and the agent stops.
  const error = await rejection(agent.inject(userMessage('b', 'hi')));
  assert.ok(error instanceof coxswain.PersistenceError, String(error));
  assert.equal(error.cause.kind, 'fenced');
  await agent.finished();
  assert.equal(agent.ending.kind, 'stopped');
  assert.equal(agent.ending.error.kind, 'fenced');
  const later = await rejection(agent.inject(userMessage('c', 'hi')));
  assert.ok(later instanceof coxswain.StoppedError, String(later));
  assert.equal(later.message, 'the agent stopped: another writer owns the session; re-open it from the log');
});
