'use strict';
// The durable log behind a Node agent: the JSON-lines file of adapters/tokio's `FileLog`, one
// `{seq, type, data}` record per line. The record format has one owner, the Rust crate
// coxswain-log (`encodeRecords`, `parseLog`, and the reader behind `Machine` resume); the file
// IO is here, with fs/promises: one write per append, then `datasync()` before the append
// resolves (under the default policy), and a failed write cut back before the error is thrown.

const fs = require('node:fs/promises');
const path = require('node:path');
const native = require('./native');
const errors = require('./errors');

const POLICIES = ['every-append', 'per-turn', 'never'];

/** Encodes `entries` (`{type, data}` each) as log lines numbered from `firstSeq`. */
function encodeRecords(firstSeq, entries) {
  try {
    return native.encodeRecords(firstSeq, JSON.stringify(entries));
  } catch (error) {
    throw new errors.EncodeError(error.message);
  }
}

/** Reads a log's bytes: `{records, completeLen, torn, unterminated, nextSeq}`. */
function parseLog(bytes) {
  const parsed = JSON.parse(native.parseLog(Buffer.from(bytes)));
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
  constructor(file, lock, filePath, policy) {
    this._file = file;
    this._lock = lock;
    /** The file's absolute path. */
    this.path = filePath;
    this._policy = policy;
    this._len = 0;
    this._nextSeq = 1;
    this._failed = false;
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
    let file;
    let lock;
    try {
      file = await fs.open(absolute, 'a+');
      lock = lockFile(absolute);
      const dir = await fs.open(path.dirname(absolute), 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (error) {
      if (lock) lock.release();
      if (file) await file.close().catch(() => {});
      if (error instanceof errors.LockedError) throw error;
      throw new errors.LogIoError(`cannot open the log ${absolute}: ${error.message}`, { cause: error });
    }
    return new FileLog(file, lock, absolute, policy);
  }

  /** Every byte of the file, read through this log's handle. Changes nothing. */
  async readAll() {
    try {
      const { size } = await this._file.stat();
      const bytes = Buffer.alloc(size);
      let filled = 0;
      while (filled < size) {
        const { bytesRead } = await this._file.read(bytes, filled, size - filled, filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      this._len = filled;
      return bytes.subarray(0, filled);
    } catch (error) {
      throw new errors.LogIoError(`cannot read the log: ${error.message}`, { cause: error });
    }
  }

  /**
   * After a read that was accepted: drops a torn tail (S50) or ends an unterminated last record
   * with its `\n`, durable before it resolves; appends then number on from `nextSeq`.
   */
  async repairTail({ completeLen, torn, unterminated, nextSeq }) {
    try {
      if (torn) {
        await this._file.truncate(completeLen);
        await this._file.datasync();
        this._len = completeLen;
      } else if (unterminated) {
        await this._write(Buffer.from('\n'));
        await this._file.datasync();
      }
    } catch (error) {
      this._failed = true;
      throw new errors.LogIoError(`cannot repair the log's tail: ${error.message}`, { cause: error });
    }
    this._nextSeq = nextSeq;
  }

  /**
   * Appends `entries` (`{type, data}` each) as one write, the records taking the next `seq`
   * numbers, synced as the policy says; resolves with the first one's `seq`. A failed write is
   * cut back (and the cut synced) before `LogIoError` is thrown: the batch is not in the log.
   * If the cut fails too: `IndeterminateError`. After a failure the log takes no more appends.
   */
  async append(entries) {
    if (this._failed) throw new errors.LogFailedError();
    if (entries.length === 0) return this._nextSeq;
    const bytes = Buffer.from(encodeRecords(this._nextSeq, entries), 'utf8');
    const sync =
      this._policy === 'every-append' ||
      (this._policy === 'per-turn' && entries.some((entry) => entry.type === 'turn/end'));
    try {
      await this._write(bytes);
      if (sync) await this._file.datasync();
    } catch (error) {
      this._failed = true;
      try {
        await this._file.truncate(this._len);
        await this._file.datasync();
      } catch (undo) {
        throw new errors.IndeterminateError(
          `log i/o failed (${error.message}) and undoing the partial write failed too ` +
            `(${undo.message}): the batch may or may not be in the log`,
          { cause: error },
        );
      }
      throw new errors.LogIoError(`log i/o failed: ${error.message}`, { cause: error });
    }
    this._len += bytes.length;
    const first = this._nextSeq;
    this._nextSeq += entries.length;
    return first;
  }

  /** Makes everything appended so far durable (`datasync`), whatever the policy. */
  async sync() {
    try {
      await this._file.datasync();
    } catch (error) {
      throw new errors.LogIoError(`log sync failed: ${error.message}`, { cause: error });
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

/** A log in memory, in the same record format (for tests and benches): nothing is durable. */
class MemoryLog {
  constructor(bytes = Buffer.alloc(0)) {
    this._chunks = [Buffer.from(bytes)];
    this._nextSeq = 1;
  }
  /** The log's bytes. */
  bytes() { return Buffer.concat(this._chunks); }
  async readAll() { return this.bytes(); }
  async repairTail({ completeLen, torn, unterminated, nextSeq }) {
    const bytes = this.bytes();
    if (torn) this._chunks = [bytes.subarray(0, completeLen)];
    else if (unterminated) this._chunks = [bytes, Buffer.from('\n')];
    this._nextSeq = nextSeq;
  }
  async append(entries) {
    if (entries.length === 0) return this._nextSeq;
    this._chunks.push(Buffer.from(encodeRecords(this._nextSeq, entries), 'utf8'));
    const first = this._nextSeq;
    this._nextSeq += entries.length;
    return first;
  }
  async sync() {}
  async close() {}
}

module.exports = { FileLog, MemoryLog, encodeRecords, parseLog };
