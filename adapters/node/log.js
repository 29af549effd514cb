'use strict';
// The durable log behind a Node agent: the JSON-lines file of adapters/tokio's `FileLog`, one
// `{seq, type, data}` record per line. The record format has one owner, the Rust crate
// coxswain-log (`encodeRecords`, `parseLog`, and the reader behind `Machine` resume); the file
// IO is here, with fs/promises: one write per append, then `datasync()` before the append
// resolves (under the default policy), and a failed write cut back (never extending the file)
// before the error is thrown.
//
// As the Rust FileLog does, it checks before every append, and again before acknowledging it
// (and at every sync), that the file is still the one it writes and still ends as it left it: a
// file removed, renamed or replaced (`LogReplacedError`: the path no longer names the open file's
// device and inode, or the file has no link left), cut in place (`copytruncate`, `: > file`:
// `LogTruncatedError`), or appended to or overwritten at its end by a writer that ignores the
// lock (`LogTamperedError`) fails the append instead of acknowledging it. Not detected: bytes
// overwritten in place before the last 32 the log wrote, and a change undone before the next
// check. A failed append whose write was cut back leaves the log as it was, and it takes appends
// again (issue 26: the session layer rolls the batch back and the agent goes on); after an
// indeterminate one (the cut-back failed too) it refuses every append (`LogFailedError`).

const fs = require('node:fs/promises');
const { constants: fsConstants } = require('node:fs');
const path = require('node:path');
const native = require('./native');
const errors = require('./errors');
const { encode, parse } = require('./json');
const { redelivery } = require('./machine');

const POLICIES = ['every-append', 'per-turn', 'never'];
/** The longest line (without its `\n`) a reader takes: the Rust logs' `MAX_LINE_BYTES`. */
const MAX_LINE_BYTES = native.maxLineBytes();
/** How much of the file one read takes: at most the line limit, so only the line a chunk ends inside can pass it. */
const READ_CHUNK = Math.min(1 << 20, MAX_LINE_BYTES);

/** What a file of `stat` is, if not a regular file (in the words of `coxswain_log::NotRegularFile`). */
function notRegular(stat) {
  if (stat.isFile()) return undefined;
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isSocket()) return 'a socket';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  return 'not a file';
}
/** How many of the last bytes it wrote the log compares with the file's own. */
const TAIL = 32;

/** A log error as it is; any other (an fs error) as a `LogIoError`. */
function asLogError(error) {
  if (error instanceof errors.LogIoError) return error;
  return new errors.LogIoError(`log i/o failed: ${error.message}`, { cause: error });
}

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

/** The log lines of `entries` numbered from `firstSeq` (text): their own encoding when it fits. */
function linesOf(firstSeq, entries) {
  const encoded = encodingFrom(firstSeq, entries);
  return encoded !== undefined ? encoded.lines : encodeRecords(firstSeq, entries);
}

/** Whether `entries` end a turn (a `per-turn` log syncs then). */
function endsTurn(entries) {
  const encoded = entries[ENCODED];
  return encoded !== undefined ? encoded.turnEnd : entries.some((entry) => entry.type === 'turn/end');
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

/** The file's exclusive `flock`, the one the Rust FileLog takes (native: the same syscall). */
function lockFile(absolute) {
  try {
    return native.FileLock.acquire(absolute);
  } catch (error) {
    if (error.message.startsWith('locked:')) throw new errors.LockedError(error.message.slice(8));
    throw error;
  }
}

/**
 * A session's log in a JSON-lines file. Open it, hand it to `Agent.open` (which reads it back,
 * repairs its tail and appends crash repair's closers), then the agent is its only writer.
 */
class FileLog {
  constructor(file, lock, filePath, policy, id) {
    this._file = file;
    this._lock = lock;
    /** The file's absolute path. */
    this.path = filePath;
    this._policy = policy;
    /** The file's device and inode when opened. */
    this._id = id;
    /** The length the log left the file at: everything before is acknowledged (or read). */
    this._len = 0;
    /** The last bytes before `_len` once the tail is repaired; `null` before (only the path is checked). */
    this._tail = null;
    this._nextSeq = 1;
    this._failed = false;
    this._longer = false;
  }

  /**
   * Opens (or creates) the log at `filePath`, takes its exclusive `flock` for the log's life (a
   * second writer, in Node or Rust, gets `LockedError`) and syncs its directory. `sync`: `'every-append'`
   * (default: nothing is acknowledged that a power loss can take back), `'per-turn'` or
   * `'never'` (as the tokio adapter's `SyncPolicy`).
   */
  static async open(filePath, options = {}) {
    const policy = options.sync ?? 'every-append';
    if (!POLICIES.includes(policy)) {
      throw new errors.InvalidOptionsError(`sync ${policy} is not one of ${POLICIES.join(', ')}`);
    }
    const absolute = path.resolve(filePath);
    // Only a regular file is a log: what the path names is looked at before it is opened (a
    // FIFO is never opened, which could block), and the file opened is checked again.
    const there = await fs.stat(absolute).catch((error) => {
      if (error.code === 'ENOENT') return undefined; // created below
      throw new errors.LogIoError(`cannot open the log ${absolute}: ${error.message}`, { cause: error });
    });
    const kind = there && notRegular(there);
    if (kind) throw new errors.NotRegularFileError(absolute, kind);
    let file;
    let lock;
    let id;
    try {
      // O_NONBLOCK: a FIFO put there since the check does not block the open either (a regular
      // file ignores it).
      const { O_RDWR, O_CREAT, O_APPEND, O_NONBLOCK } = fsConstants;
      file = await fs.open(absolute, O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK, 0o666);
      const stat = await file.stat({ bigint: true });
      const opened = notRegular(stat);
      if (opened) throw new errors.NotRegularFileError(absolute, opened);
      lock = lockFile(absolute);
      id = [stat.dev, stat.ino];
      const dir = await fs.open(path.dirname(absolute), 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (error) {
      if (lock) lock.release();
      if (file) await file.close().catch(() => {});
      if (error instanceof errors.LockedError || error instanceof errors.NotRegularFileError) throw error;
      throw new errors.LogIoError(`cannot open the log ${absolute}: ${error.message}`, { cause: error });
    }
    return new FileLog(file, lock, absolute, policy, id);
  }

  /**
   * Every byte of the file, read through this log's handle. Changes nothing. Read in chunks of
   * at most the line limit (`MAX_LINE_BYTES`, the Rust logs' own): a line longer than that
   * throws `LineTooLongError` as soon as the read passes the limit, having held no more of it
   * than the limit and one chunk.
   */
  async readAll() {
    const chunks = [];
    let filled = 0;
    // The length of the line being read.
    let current = 0;
    for (;;) {
      let bytesRead;
      const chunk = Buffer.allocUnsafe(READ_CHUNK);
      try {
        ({ bytesRead } = await this._file.read(chunk, 0, READ_CHUNK, filled));
      } catch (error) {
        throw new errors.LogIoError(`cannot read the log: ${error.message}`, { cause: error });
      }
      if (bytesRead === 0) break;
      const read = chunk.subarray(0, bytesRead);
      const first = read.indexOf(10);
      // A chunk is no longer than the limit: only the line it ends inside (or continues,
      // without a `\n`) can pass it.
      if (current + (first < 0 ? bytesRead : first) > MAX_LINE_BYTES) {
        // The line's number: one past the lines complete before it (counted only now).
        let lines = 0;
        for (const before of chunks) {
          for (let at = before.indexOf(10); at >= 0; at = before.indexOf(10, at + 1)) lines += 1;
        }
        throw new errors.LineTooLongError(this.path, lines + 1, MAX_LINE_BYTES);
      }
      current = first < 0 ? current + bytesRead : bytesRead - read.lastIndexOf(10) - 1;
      chunks.push(read);
      filled += bytesRead;
    }
    this._len = filled;
    this._tail = null;
    return Buffer.concat(chunks, filled);
  }

  /**
   * After a read that was accepted: drops a torn tail (S50) or ends an unterminated last record
   * with its `\n`, durable before it resolves; appends then number on from `nextSeq`.
   */
  async repairTail({ completeLen, torn, unterminated, nextSeq }) {
    try {
      // The file as it was read: the same file, the same length.
      await this._check(this._len, Buffer.alloc(0), true);
      if (torn) {
        await this._file.truncate(completeLen);
        await this._file.datasync();
        this._len = completeLen;
      } else if (unterminated) {
        await this._write(Buffer.from('\n'));
        await this._file.datasync();
        this._len += 1;
      }
      this._tail = await this._readTail(this._len);
    } catch (error) {
      this._failed = true;
      if (error instanceof errors.LogIoError) throw error;
      throw new errors.LogIoError(`cannot repair the log's tail: ${error.message}`, { cause: error });
    }
    this._nextSeq = nextSeq;
  }

  /**
   * Appends `entries` (`{type, data}` each) as one write, the records taking the next `seq`
   * numbers, synced as the policy says; resolves with the first one's `seq`. Checks first that
   * the file still ends as this log left it (`LogTruncatedError`, `LogTamperedError`: nothing
   * is written), and after the write (and sync) that it is still the log's file
   * (`LogReplacedError`, checked before the write too) and ends in the batch. A failure after the
   * write began is cut back (and the cut synced) before the error is thrown: the batch is not in
   * the log, which takes appends again. If the cut fails too, or the file is shorter than the log
   * (a cut never extends it): `IndeterminateError`, and the log takes no more appends.
   */
  async append(entries) {
    if (this._failed) throw new errors.LogFailedError();
    if (entries.length === 0) return this._nextSeq;
    const bytes = Buffer.from(linesOf(this._nextSeq, entries), 'utf8');
    const sync = this._policy === 'every-append' || (this._policy === 'per-turn' && endsTurn(entries));
    const tail = this._tail ?? Buffer.alloc(0);
    const after = Buffer.concat([tail, bytes]);
    const afterTail = after.subarray(Math.max(0, after.length - TAIL));
    try {
      // Still the log's file (its path names it, it is linked) and as the log left it.
      await this._check(this._len, tail, true);
    } catch (error) {
      throw asLogError(error); // nothing written
    }
    try {
      await this._write(bytes);
      if (sync) await this._file.datasync();
      await this._check(this._len + bytes.length, afterTail, true);
    } catch (error) {
      await this._cutBack(error, tail);
    }
    this._len += bytes.length;
    this._tail = Buffer.from(afterTail);
    const first = this._nextSeq;
    this._nextSeq += entries.length;
    return first;
  }

  /** Cuts a failed append back to `_len` (never extending the file), syncs the cut, and throws. */
  async _cutBack(error, tail) {
    try {
      const { size } = await this._file.stat();
      if (size < this._len) throw new errors.LogTruncatedError(this.path, this._len, size);
      await this._file.truncate(this._len);
      await this._file.datasync();
      await this._check(this._len, tail, false);
    } catch (undo) {
      // Replaced: the path's file never held the batch, and every later append is refused.
      if (error instanceof errors.LogReplacedError) throw error;
      // This log's own bytes may follow `_len` from now on: a sync checks what precedes them.
      this._longer = true;
      this._failed = true;
      throw new errors.IndeterminateError(
        `log i/o failed (${error.message}) and undoing the partial write failed too ` +
          `(${undo.message}): the batch may or may not be in the log`,
        { cause: error, undo },
      );
    }
    throw asLogError(error);
  }

  /**
   * The file is `len` bytes long (`longer`: at least) and ends in `tail` there
   * (`LogTruncatedError`, `LogTamperedError`); with `named`, the path still names it
   * (`LogReplacedError`).
   */
  async _check(len, tail, named, longer = false) {
    const stat = await this._file.stat({ bigint: true });
    if (named) {
      let there = null;
      try {
        there = await fs.stat(this.path, { bigint: true });
      } catch (error) {
        if (error.code !== 'ENOENT') throw error;
      }
      if (stat.nlink === 0n || !there || there.dev !== this._id[0] || there.ino !== this._id[1]) {
        throw new errors.LogReplacedError(this.path);
      }
    }
    const found = Number(stat.size);
    if (found < len) throw new errors.LogTruncatedError(this.path, len, found);
    if ((found > len && !longer) || (tail.length > 0 && !(await this._readTail(len, tail.length)).equals(tail))) {
      throw new errors.LogTamperedError(this.path, len, found);
    }
  }

  /** The `want` (at most `TAIL`) bytes before `end`. */
  async _readTail(end, want = Math.min(end, TAIL)) {
    const bytes = Buffer.alloc(want);
    let filled = 0;
    while (filled < want) {
      const { bytesRead } = await this._file.read(bytes, filled, want - filled, end - want + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return bytes.subarray(0, filled);
  }

  /**
   * Makes everything appended so far durable (`datasync`), whatever the policy, and checks the
   * file is still the log's and ends as it left it.
   */
  async sync() {
    try {
      await this._file.datasync();
    } catch (error) {
      throw new errors.LogIoError(`log sync failed: ${error.message}`, { cause: error });
    }
    if (this._tail === null) return; // not repaired yet: the log's end is not known
    try {
      await this._check(this._len, this._tail, true, this._longer);
    } catch (error) {
      throw asLogError(error);
    }
  }

  /** Releases the file and its lock. */
  async close() {
    await this._file.close().catch(() => {});
    this._lock.release();
  }

  async _write(bytes) {
    let written = 0;
    while (written < bytes.length) {
      const { bytesWritten } = await this._file.write(bytes, written, bytes.length - written);
      written += bytesWritten;
    }
  }
}

/**
 * Carries out the session layer's resume plan for `log` (`NativeMachine.resume`: the Rust
 * `ResumePlan`, which restores `machine`, S46–S48): a log it rejects is left as it was
 * (`CorruptLogError`, `InvalidLogError`); else its torn tail is dropped or its last record ended,
 * and the closers of an interrupted turn appended, with the redelivery splices of what that
 * turn claimed unseen within the allowance `redelivery` (S59, default 0), then synced (S50).
 * An allowance that is not an integer within 0..=1000 throws `InvalidRedeliveryError` before
 * anything is read. Resolves with what it did and found (`Agent.open`'s `Recovery`) and the
 * `seq` the next record takes.
 */
async function resume(log, machine, allowance = 0) {
  const redeliver = redelivery(allowance);
  const reply = JSON.parse(machine.resume(await log.readAll(), redeliver));
  const { ok: plan, corrupt, invalidLog: invalid } = reply;
  if (reply.redelivery !== undefined) throw new errors.InvalidRedeliveryError(redeliver, reply.redelivery);
  if (corrupt) throw new errors.CorruptLogError(`corrupt log: ${corrupt.message}`, corrupt.line);
  if (invalid) throw new errors.InvalidLogError(`the log cannot be repaired: ${invalid.message}`, invalid.line);
  await log.repairTail(plan);
  if (plan.closers.length > 0) await log.append(plan.closers);
  if (plan.torn || plan.unterminated || plan.closers.length > 0) await log.sync();
  const { lastTurn, nextTurn, nextStep } = parse(machine.state());
  const recovery = {
    records: plan.records,
    tornTail: plan.torn,
    interruptedTurn: plan.interrupted,
    closers: plan.closers.length,
    redelivered: plan.redelivered,
    lastTurn,
    pendingNextTurn: nextTurn.length,
    pendingNextStep: nextStep.length,
  };
  return { recovery, nextSeq: plan.nextSeq + plan.closers.length };
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
