'use strict';
// Issue 30: a log file changed behind its writer's back (cut in place as `copytruncate` or
// `: > session.jsonl` do, appended to or overwritten at its end by a writer that ignores the
// lock, removed or replaced) is detected before anything more is acknowledged; a cut-back never
// extends the file and one that finds it shorter is indeterminate. Issue 26: a failed append
// fails only its batch and the agent goes on (every later append fails as long as the file is
// not the log's); only an indeterminate one stops it, its error thrown only once `ending` and
// `whenIdle()` say it stopped, and the log then refuses every append.

const { faults } = require('./support/faults');
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const coxswain = require('..');

const { Agent, FileLog, userMessage } = coxswain;

/** The history's length: `followup(a)`'s turn (7 records) and `inject(b)`. */
const HISTORY = 736;

function tempLog(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, 'session.jsonl');
}

const host = { async step() { return 'completed'; } };

/** The steps 1 and 2: `followup(a)`, `whenIdle()`, `inject(b)`. */
async function history(file) {
  const log = await FileLog.open(file);
  const { agent } = await Agent.open(host, log);
  await agent.followup(userMessage('a', 'hi'));
  await agent.whenIdle();
  await agent.inject(userMessage('b', 'hi'));
  assert.equal(fs.statSync(file).size, HISTORY);
  return { agent, log };
}

/** The agent goes on after a failed append: not ended, idle, and the next append fails the same way. */
async function goesOn(agent, Kind) {
  assert.equal(agent.ending, null);
  await agent.whenIdle();
  const again = refused(await rejection(agent.inject(userMessage('d', 'hi'))));
  assert.ok(again instanceof Kind, String(again));
  assert.equal(agent.ending, null);
}

/** `ending` says stopped, and `whenIdle()` rejects with `StoppedError`, in the same tick. */
async function stoppedAtOnce(agent) {
  assert.equal(agent.ending && agent.ending.kind, 'stopped');
  let settled = null;
  agent.whenIdle().then(
    () => { settled = 'resolved'; },
    (error) => { settled = error; },
  );
  await null;
  await null;
  assert.ok(settled instanceof coxswain.StoppedError, String(settled));
  return agent.ending.error;
}

/** The log error behind a `PersistenceError`. */
function refused(error) {
  assert.ok(error instanceof coxswain.PersistenceError, String(error));
  return error.cause;
}

async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('resolved');
}

test('truncated to 0 through another handle: nothing more is acknowledged', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  fs.truncateSync(file, 0);
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.kind, error.path, error.expected, error.found], ['truncated', file, HISTORY, 0]);
  assert.equal(error.message, `the log file ${file} was truncated: it holds 0 bytes where this log wrote ${HISTORY}`);
  await goesOn(agent, coxswain.LogTruncatedError);
  const closed = await rejection(agent.close());
  assert.ok(closed instanceof coxswain.FinalSyncError);
  assert.ok(closed.cause instanceof coxswain.LogTruncatedError);
  assert.deepEqual([closed.cause.expected, closed.cause.found], [HISTORY, 0]);
  assert.equal(fs.statSync(file).size, 0);
});

test('truncated to 300 bytes: the same, and the file keeps its 300 bytes', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  fs.truncateSync(file, 300);
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.expected, error.found], [HISTORY, 300]);
  await goesOn(agent, coxswain.LogTruncatedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
  assert.equal(fs.statSync(file).size, 300);
});

test('appended to by another writer: nothing more is acknowledged, the foreign line left', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  fs.appendFileSync(file, 'hello\n'); // echo hello >> session.jsonl
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogTamperedError);
  assert.deepEqual([error.kind, error.expected, error.found], ['tampered', HISTORY, HISTORY + 6]);
  assert.equal(
    error.message,
    `the log file ${file} was written by another writer: it holds ${HISTORY + 6} bytes where this log wrote ${HISTORY}`,
  );
  await goesOn(agent, coxswain.LogTamperedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
  assert.equal(fs.statSync(file).size, HISTORY + 6);
});

test('overwritten at its end (the same length): found by its last bytes', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  const fd = fs.openSync(file, 'r+');
  fs.writeSync(fd, 'XX', HISTORY - 4);
  fs.closeSync(fd);
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogTamperedError);
  assert.deepEqual([error.expected, error.found], [HISTORY, HISTORY]);
  assert.match(error.message, /its last bytes are not the ones this log wrote \(736 bytes\)/);
  await goesOn(agent, coxswain.LogTamperedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
});

test('replaced (renamed over): LogReplacedError, nothing written to either file', async (t) => {
  const file = tempLog(t);
  const { agent, log } = await history(file);
  const old = fs.openSync(file, 'r'); // the log's own inode, unlinked by the rename
  fs.writeFileSync(`${file}.other`, '');
  fs.renameSync(`${file}.other`, file);
  const writes = writesOf(log);
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogReplacedError);
  assert.deepEqual([error.kind, error.path], ['replaced', file]);
  assert.equal(error.message, `the log file ${file} was removed or replaced`);
  assert.equal(writesOf(log), writes, 'found before the write');
  assert.equal(fs.fstatSync(old).size, HISTORY);
  fs.closeSync(old);
  await goesOn(agent, coxswain.LogReplacedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
  assert.equal(fs.statSync(file).size, 0);
});

test('removed (unlinked): LogReplacedError at every append, and the file is not made again', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  fs.unlinkSync(file);
  const error = refused(await rejection(agent.inject(userMessage('c', 'hi'))));
  assert.ok(error instanceof coxswain.LogReplacedError);
  await goesOn(agent, coxswain.LogReplacedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
  assert.equal(fs.existsSync(file), false);
});

test('an overwrite in the middle is not detected (as docs/tokio.md says): the next open finds it', async (t) => {
  const file = tempLog(t);
  const { agent } = await history(file);
  const fd = fs.openSync(file, 'r+');
  fs.writeSync(fd, 'XX', 0);
  fs.closeSync(fd);
  await agent.inject(userMessage('c', 'hi'));
  await agent.close();
  const reopened = await rejection(Agent.open(host, await FileLog.open(file)));
  assert.ok(reopened instanceof coxswain.CorruptLogError);
  assert.equal(reopened.line, 1);
});

// A write that another writer races: the shared log's file operations, faulted (src/filelog.rs). --

/** How many writes the shared Rust log made to its file. */
function writesOf(log) {
  return faults(log).fileOperations()[1];
}

/** A FileLog holding the history, read back and repaired as an agent opens it (an empty append does that). */
async function opened(file) {
  const { agent } = await history(file);
  await agent.close();
  const log = await FileLog.open(file);
  assert.equal(await log.append([]), 9);
  return log;
}

/**
 * The log's next write first sets the file to `size` bytes (another writer's truncation or
 * append landing after the log's check), then writes `budget` bytes and fails (`null`: all).
 */
function racing(log, file, size, budget) {
  assert.equal(log.path, file);
  faults(log).raceNextWrite(size, budget ?? undefined);
}

const entries = [{ type: 'model/output', data: { n: 0 } }];

test("the issue's step 5: a failing append after a truncation writes nothing, never extends the file", async (t) => {
  const file = tempLog(t);
  const log = await opened(file);
  fs.truncateSync(file, 0);
  const writes = writesOf(log);
  racing(log, file, 0, 0); // a write, if one were made, would fail
  const error = await rejection(log.append(entries));
  assert.ok(error instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.expected, error.found], [HISTORY, 0]);
  assert.equal(writesOf(log), writes);
  assert.equal(fs.statSync(file).size, 0);
  // Not latched: the next append is checked again, and refused again.
  await assert.rejects(log.append(entries), coxswain.LogTruncatedError);
  assert.equal(writesOf(log), writes);
  await log.close();
});

test('a cut-back after a truncation is indeterminate and never extends the file', async (t) => {
  const file = tempLog(t);
  const log = await opened(file);
  racing(log, file, 0, 10);
  const error = await rejection(log.append(entries));
  assert.ok(error instanceof coxswain.IndeterminateError);
  assert.equal(error.cause.message, 'write failed (injected)');
  assert.ok(error.undo instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.undo.expected, error.undo.found], [HISTORY, 10]);
  assert.equal(fs.readFileSync(file, 'utf8'), '{"seq":9,"');
  // Indeterminate: the log refuses every append from now on.
  await assert.rejects(log.append(entries), coxswain.LogFailedError);
  await log.close();
});

test('a truncation during an append is found before it is acknowledged', async (t) => {
  const file = tempLog(t);
  const log = await opened(file);
  racing(log, file, 0, null);
  const error = await rejection(log.append(entries));
  const written = fs.statSync(file).size;
  assert.equal(written, 47);
  assert.ok(error instanceof coxswain.IndeterminateError);
  assert.ok(error.cause instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.cause.expected, error.cause.found], [HISTORY + written, written]);
  assert.ok(error.undo instanceof coxswain.LogTruncatedError);
  assert.deepEqual([error.undo.expected, error.undo.found], [HISTORY, written]);
  await log.close();
});

test('another writer racing an append is cut back with it: the batch is not in the log', async (t) => {
  const file = tempLog(t);
  const log = await opened(file);
  const before = fs.readFileSync(file);
  racing(log, file, HISTORY + 5, null);
  const error = await rejection(log.append(entries));
  assert.ok(error instanceof coxswain.LogTamperedError);
  assert.deepEqual([error.expected, error.found], [HISTORY + 47, HISTORY + 52]);
  assert.deepEqual(fs.readFileSync(file), before);
  await log.sync();
  // Cut back cleanly: the log takes appends again, numbering on from where it was.
  assert.equal(await log.append(entries), 9);
  assert.equal(fs.statSync(file).size, HISTORY + 47);
  assert.deepEqual(coxswain.parseLog(fs.readFileSync(file)).records.at(-1), { seq: 9, ...entries[0] });
  await log.close();
});

test('a failed sync is cut back: the caller gets the persistence error, the agent goes on, the log holds what was acknowledged', async (t) => {
  const file = tempLog(t);
  const { agent, log } = await history(file);
  faults(log).failSyncs(1);
  const error = await rejection(agent.inject(userMessage('c', 'hi')));
  assert.ok(error instanceof coxswain.PersistenceError);
  assert.equal(error.cause.kind, 'io');
  assert.equal(error.cause.message, `${file}: log i/o failed: sync failed (injected)`);
  assert.equal(fs.statSync(file).size, HISTORY, 'cut back');
  assert.equal(agent.ending, null, 'the agent goes on');
  assert.deepEqual((await agent.pending()).nextStep.map((p) => p.message.id), ['b'], 'c was rolled back');
  await agent.inject(userMessage('c', 'hi')); // sent again: acknowledged
  await agent.followup(userMessage('e', 'hi'));
  await agent.whenIdle();
  await agent.close();
  const written = coxswain.parseLog(fs.readFileSync(file)).records;
  assert.deepEqual(written.map((r) => r.seq), written.map((_, i) => i + 1));
  const inserted = written.filter((r) => r.type === 'agent/inbox/spliced').flatMap((r) => r.data.inserted.map((m) => m.id));
  assert.deepEqual(inserted, ['a', 'b', 'c', 'e'], 'exactly what was acknowledged');
  const again = await FileLog.open(file); // released
  await again.close();
});

test('an indeterminate append stops the agent once its log is released; the log refuses every append', async (t) => {
  const file = tempLog(t);
  const { agent, log } = await history(file);
  racing(log, file, 0, 10); // another writer cuts the file, the write fails: the cut-back cannot be made
  const error = await rejection(agent.inject(userMessage('c', 'hi')));
  assert.ok(error instanceof coxswain.IndeterminateError, String(error));
  assert.equal(await stoppedAtOnce(agent), error);
  await assert.rejects(agent.followup(userMessage('d', 'hi')), coxswain.StoppedError);
  await assert.rejects(log.append(entries), coxswain.LogFailedError);
  await assert.rejects(agent.close(), coxswain.FinalSyncError);
});
