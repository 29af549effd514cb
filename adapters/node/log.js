'use strict';
// The durable log behind a Node agent: the JSON-lines file every coxswain runtime writes, one
// `{seq, type, data}` record per line. It is the one Rust file log (`coxswain-file-log`, which
// the tokio and threads drivers, Python and `coxswain run --log` use too), behind
// src/filelog.rs: its IO runs on libuv's thread pool (each call a napi `AsyncTask`), and its
// durability rules live there alone — the `flock`, the regular-file check, the identity, length
// and last-bytes checks around every append, the cut-back of a failed append (never extending
// the file), the sync policies and the one resume path (`FileLog::resume`). This module only
// hands it bytes and turns its failures into the error classes of errors.js (`logError`, by the
// Rust error's kind).
//
// A file removed, renamed or replaced (`LogReplacedError`), cut in place (`copytruncate`,
// `: > file`: `LogTruncatedError`), or appended to or overwritten at its end by a writer that
// ignores the lock (`LogTamperedError`) fails the append instead of acknowledging it. A failed
// append whose write was cut back leaves the log as it was, and it takes appends again (issue
// 26: the session layer rolls the batch back and the agent goes on); after an indeterminate one
// (the cut-back failed too) it refuses every append (`LogFailedError`).

const path = require('node:path');
const native = require('./native');
const errors = require('./errors');
const { encode, parse } = require('./json');
const { redelivery } = require('./machine');

const POLICIES = ['every-append', 'per-turn', 'never'];
/** The longest line (without its `\n`) a reader takes: the Rust logs' `MAX_LINE_BYTES`. */
const MAX_LINE_BYTES = native.maxLineBytes();
const SETTLED = Promise.resolve();

/**
 * Where an entries array may carry its own encoding (`{seq, lines, bytes, writeInto}`:
 * `Session.stage` encodes a sealed batch in Rust as it seals it, session.js `HeldLines`): a log
 * whose next record takes `seq` writes `lines` as they are (or has them written into its
 * buffer) instead of encoding the entries again.
 */
const ENCODED = Symbol('coxswain.encoded');

/** The encoding `entries` carry when it is numbered from `firstSeq`, else `undefined`. */
function encodingFrom(firstSeq, entries) {
  const encoded = entries[ENCODED];
  return encoded !== undefined && encoded.seq === firstSeq ? encoded : undefined;
}

/** Encodes `entries` (`{type, data}` each) as log lines numbered from `firstSeq`. */
function encodeRecords(firstSeq, entries) {
  try {
    return native.encodeRecords(firstSeq, encode(entries));
  } catch (error) {
    const deep = /^too-deep:(\d+):(\d+):(.*)$/s.exec(error.message);
    if (deep) throw new errors.TooDeepError(deep[3], { depth: Number(deep[1]), max: Number(deep[2]) });
    throw new errors.EncodeError(error.message);
  }
}

/** Reads a log's bytes: `{records, completeLen, torn, unterminated, nextSeq}`. */
function parseLog(bytes) {
  const parsed = parse(native.parseLog(Buffer.from(bytes)));
  if (parsed.corrupt) throw new errors.CorruptLogError(parsed.corrupt.message, parsed.corrupt.line);
  return parsed;
}

/**
 * A session's log in a JSON-lines file. Open it, hand it to `Agent.open` (which resumes it: the
 * shared log reads it back, repairs its tail and appends crash repair's closers), then the agent
 * is its only writer. Its calls run one at a time, in the order they were made (a call made
 * while another runs waits for it).
 */
class FileLog {
  constructor(inner) {
    /** The shared Rust log (src/filelog.rs `NativeFileLog`). */
    this._native = inner;
    /** The file's absolute path. */
    this.path = inner.path;
    /** Whether the log was read back and its tail repaired (appends go after a complete line). */
    this._ready = false;
    this._running = 0;
    this._last = SETTLED;
  }

  /**
   * Opens (or creates) the log at `filePath` on libuv's pool, takes its exclusive `flock` for
   * the log's life (a second writer, in Node, Python or Rust, gets `LockedError`) and syncs its
   * directory. A FIFO, a directory, a socket or a device is refused before it is opened
   * (`NotRegularFileError`). `sync`: `'every-append'` (default: nothing is acknowledged that a
   * power loss can take back), `'per-turn'` or `'never'` (`coxswain_file_log::SyncPolicy`).
   */
  static async open(filePath, options = {}) {
    const policy = options.sync ?? 'every-append';
    if (!POLICIES.includes(policy)) {
      throw new errors.InvalidOptionsError(`sync ${policy} is not one of ${POLICIES.join(', ')}`);
    }
    const absolute = path.resolve(filePath);
    try {
      return new FileLog(await native.openFileLog(absolute, policy));
    } catch (error) {
      throw errors.logError(error, absolute);
    }
  }

  /** The `seq` the next appended record takes (1 before the log was read back). */
  get nextSeq() { return this._native.nextSeq; }

  /** Runs `call` (an async function of the native log) after the calls before it, its failure a log error. */
  _serial(call) {
    const run = async () => {
      try {
        return await call(this._native);
      } catch (error) {
        throw errors.logError(error, this.path);
      }
    };
    const result = this._running === 0 ? run() : this._last.then(run);
    this._running += 1;
    const done = () => { this._running -= 1; };
    this._last = result.then(done, done);
    return result;
  }

  /**
   * Resumes the session the file holds into `machine` (a `NativeMachine`, whose delivery memory,
   * admission bound and hash seed restore it), with the redelivery allowance `redeliver` (S59,
   * checked): the shared log's `FileLog::resume`. The plan as `resume` below resolves it.
   */
  _resume(machine, redeliver) {
    return this._serial(async (inner) => {
      const plan = JSON.parse(await inner.resume(machine, redeliver));
      machine.adoptResumed(inner);
      this._ready = true;
      return plan;
    });
  }

  /**
   * Appends `entries` (`{type, data}` each) as one write, the records taking the next `seq`
   * numbers, synced as the policy says; resolves with the first one's `seq`. A log not resumed
   * yet is read back and its tail repaired first. The shared log checks first that the file
   * still ends as it left it (`LogTruncatedError`, `LogTamperedError`: nothing is written), and
   * after the write (and sync) that the path still names the file (`LogReplacedError`) and that
   * it ends in the batch. A failure after the write began is cut back
   * (and the cut synced) before the error is thrown: the batch is not in the log, which takes
   * appends again. If the cut fails too, or the file is shorter than the log (a cut never
   * extends it): `IndeterminateError`, and the log takes no more appends (`LogFailedError`).
   */
  append(entries) {
    return this._serial(async (inner) => {
      if (!this._ready) {
        await inner.prepare();
        this._ready = true;
      }
      const first = inner.nextSeq;
      if (entries.length === 0) return first;
      const encoded = encodingFrom(first, entries);
      if (encoded === undefined) {
        const bytes = Buffer.from(encodeRecords(first, entries), 'utf8');
        return inner.appendEncoded(first, bytes, entries.length, entries.some((entry) => entry.type === 'turn/end'));
      }
      // The session's sealed lines, copied into the buffer the log writes: no string is made.
      const bytes = Buffer.allocUnsafe(encoded.bytes);
      const written = encoded.writeInto(bytes, 0);
      return inner.appendEncoded(first, bytes.subarray(0, written), entries.length, encoded.turnEnd);
    });
  }

  /**
   * Makes everything appended so far durable (`fdatasync`), whatever the policy, and checks the
   * file is still the log's and ends as it left it.
   */
  sync() { return this._serial((inner) => inner.sync()); }

  /** Releases the file and its lock; every later call but `close` rejects with `ClosedError`. */
  close() { return this._serial((inner) => inner.close()); }
}

/**
 * Resumes the session `log` holds into `machine` (S46–S50, S57, S59). A `FileLog` resumes in
 * the shared Rust log (`FileLog::resume`, one task on libuv's pool). Any other log (a
 * `MemoryLog`, a host's own `DurableLog`) is read whole and carried out here by the session
 * layer's resume plan (`NativeMachine.resume`: the Rust `ResumePlan`, which restores `machine`,
 * S46–S48). Either way a log it rejects is left as it was
 * (`CorruptLogError`, `InvalidLogError`); else its torn tail is dropped or its last record ended,
 * and the closers of an interrupted turn appended, with the redelivery splices of what that
 * turn claimed unseen within the allowance `redelivery` (S59, default 0), then synced (S50).
 * An allowance that is not an integer within 0..=1000 throws `InvalidRedeliveryError` before
 * anything is read. Resolves with what it did and found (`Agent.open`'s `Recovery`) and the
 * `seq` the next record takes.
 */
async function resume(log, machine, allowance = 0) {
  const redeliver = redelivery(allowance);
  if (log instanceof FileLog) return recovered(await log._resume(machine, redeliver), machine);
  const reply = JSON.parse(machine.resume(await log.readAll(), redeliver));
  const { ok: plan, corrupt, invalidLog: invalid } = reply;
  if (reply.redelivery !== undefined) throw new errors.InvalidRedeliveryError(redeliver, reply.redelivery);
  if (corrupt) throw new errors.CorruptLogError(`corrupt log: ${corrupt.message}`, corrupt.line);
  if (invalid) throw new errors.InvalidLogError(`the log cannot be repaired: ${invalid.message}`, invalid.line);
  await log.repairTail(plan);
  if (plan.closers.length > 0) await log.append(plan.closers);
  if (plan.torn || plan.unterminated || plan.closers.length > 0) await log.sync();
  const closers = plan.closers.length;
  return recovered({ ...plan, closers, nextSeq: plan.nextSeq + closers }, machine);
}

/** What a resume did and found (`Recovery`), and the `seq` the next record takes. */
function recovered(plan, machine) {
  const { lastTurn, nextTurn, nextStep } = parse(machine.state());
  const recovery = {
    records: plan.records,
    tornTail: plan.torn,
    interruptedTurn: plan.interrupted,
    closers: plan.closers,
    redelivered: plan.redelivered,
    lastTurn,
    pendingNextTurn: nextTurn.length,
    pendingNextStep: nextStep.length,
  };
  return { recovery, nextSeq: plan.nextSeq };
}

/** The size of a `MemoryLog`'s buffers (a batch that needs more gets a buffer of its own size). */
const CHUNK = 64 * 1024;

/**
 * A log in memory, in the same record format (for tests and benches): nothing is durable. Its
 * bytes are kept in buffers outside the JS heap, filled in turn (held as strings, a log costs
 * the collector a trace and copies of every one: a fifth of an agent's turn, measured), and
 * the session's encoded lines are copied into them with no string made (`HeldLines`).
 */
class MemoryLog {
  constructor(bytes = Buffer.alloc(0)) {
    /** The log's bytes: the full buffers, then the first `_len` bytes of `_chunk`. */
    this._chunks = [Buffer.from(bytes)];
    this._chunk = Buffer.allocUnsafe(CHUNK);
    this._len = 0;
    this._nextSeq = 1;
  }
  /** The log's bytes (a copy). */
  bytes() {
    return Buffer.concat([...this._chunks, this._chunk.subarray(0, this._len)]);
  }
  async readAll() { return this.bytes(); }
  async repairTail({ completeLen, torn, unterminated, nextSeq }) {
    if (torn) {
      this._chunks = [this.bytes().subarray(0, completeLen)];
      this._len = 0;
    } else if (unterminated) {
      this._write('\n');
    }
    this._nextSeq = nextSeq;
  }
  async append(entries) {
    return this._appendNow(entries);
  }
  /** `append`, done at once: the first record's `seq` (the agent's loop calls it so, `appendTo`). */
  _appendNow(entries) {
    if (entries.length === 0) return this._nextSeq;
    const encoded = encodingFrom(this._nextSeq, entries);
    if (encoded !== undefined) {
      this._room(encoded.bytes);
      this._len += encoded.writeInto(this._chunk, this._len);
    } else {
      this._write(encodeRecords(this._nextSeq, entries));
    }
    const first = this._nextSeq;
    this._nextSeq += entries.length;
    return first;
  }
  /** Appends `text`, UTF-8 encoded (at most 3 bytes a UTF-16 unit). */
  _write(text) {
    this._room(3 * text.length);
    this._len += this._chunk.write(text, this._len, 'utf8');
  }
  /** Room for `bytes` more in `_chunk`: a fresh buffer when it has not that much left. */
  _room(bytes) {
    if (this._len + bytes <= this._chunk.length) return;
    this._chunks.push(this._chunk.subarray(0, this._len));
    this._chunk = Buffer.allocUnsafe(Math.max(CHUNK, bytes));
    this._len = 0;
  }
  async sync() {}
  async close() {}
}

/**
 * Whether `log` appends with this module's own `append` (FileLog's or MemoryLog's, not one a
 * subclass or the host wrote), which writes the lines `Session` encoded: the agent can hand it
 * entries it has not decoded.
 */
function writesEncoded(log) {
  return log.append === FileLog.prototype.append || log.append === MemoryLog.prototype.append;
}

/**
 * Appends `entries` to `log` (`DurableLog.append`): the first record's `seq` at once (a number)
 * when `log` is this module's own MemoryLog (its `append` as written here, which has nothing to
 * wait for: no Promise, no turn of the event loop per batch), else a Promise of it.
 */
function appendTo(log, entries) {
  if (log.append === MemoryLog.prototype.append) return log._appendNow(entries);
  return Promise.resolve(log.append(entries));
}

module.exports = {
  FileLog, MemoryLog, encodeRecords, parseLog, resume, writesEncoded, appendTo, ENCODED, MAX_LINE_BYTES,
};
