'use strict';
// Typed errors: one Error subclass per kind, each with a stable `kind` string. Rejections use
// the conformance format's rejection kinds (FORMAT.md); a rejected input changed nothing (S5).

/** Base class of every error this package throws. */
class CoxswainError extends Error {
  constructor(kind, message, options) {
    super(message, options);
    this.name = new.target.name;
    /** @type {string} */
    this.kind = kind;
  }
}

/**
 * The core rejected an input; nothing changed (S5). `wasDelivered` tells a retrying caller it
 * may stop: true only for `AlreadyPendingError` and `AlreadyDeliveredError` (the same message is
 * pending or was delivered); a `ConflictError` is a caller bug (S56), never success.
 */
class RejectedError extends CoxswainError {
  /** Whether this very message was delivered already (a retry may stop). */
  get wasDelivered() { return false; }
}

/** The id is already pending in NT or NS, for the same message (S9, S13). */
class AlreadyPendingError extends RejectedError {
  constructor(message, details = {}) {
    super('already-pending', message);
    /** The message id. @type {string | undefined} */
    this.id = details.id;
  }
  get wasDelivered() { return true; }
}
/** The delivery memory holds the id, for the same message: a retry of a delivery already made (S51, S52). */
class AlreadyDeliveredError extends RejectedError {
  constructor(message, details = {}) {
    super('already-delivered', message);
    /** The message id. @type {string | undefined} */
    this.id = details.id;
  }
  get wasDelivered() { return true; }
}
/**
 * The id is pending, or held by the delivery memory, for a *different* message (S56): the caller
 * reused an id. The new message was not delivered (`wasDelivered` is false).
 */
class ConflictError extends RejectedError {
  constructor(message, details = {}) {
    super('conflict', message);
    /** The reused id. @type {string | undefined} */
    this.id = details.id;
  }
}
/**
 * A guarded send's expected-turn guard does not hold (S54): the turn it named ended or was
 * stopped, or a turn started since the caller looked.
 */
class TurnMismatchError extends RejectedError {
  constructor(message, details = {}) {
    super('turn-mismatch', message);
    /** The guard that did not hold: `{turn: n}` or `{idleAfter: n}`. */
    this.expect = details.expect;
  }
}
/** The list the delivery joins (after S18's retargeting) holds `maxPending` items: the admission bound (S55). */
class FullError extends RejectedError {
  constructor(message, details = {}) {
    super('full', message);
    /** The full list. @type {'next-turn' | 'next-step' | undefined} */
    this.target = details.target;
    /** The bound. @type {number | undefined} */
    this.maxPending = details.maxPending;
  }
}
/** An answer to a request that is not outstanding, or `maintenance end` with none active (S4). */
class UnexpectedCompletionError extends RejectedError {
  constructor(message) { super('unexpected-completion', message); }
}
/** Maintenance may only begin while idle (S43). */
class BusyError extends RejectedError {
  constructor(message) { super('busy', message); }
}
/** The machine is disposed and accepts no input (S45). */
class DisposedError extends RejectedError {
  constructor(message) { super('disposed', message); }
}
/** The previous input's outputs were not drained (a host error, never in a trace). */
class UndrainedError extends RejectedError {
  constructor(message) { super('undrained', message); }
}
/**
 * A value nests deeper than a log record can hold it (`coxswain_log::TooDeep`): a message
 * delivered to an agent, a host event's `data`, a record to encode. Nothing changed and nothing
 * was written; the message is the Rust `TooDeep`'s text, as every layer says it.
 */
class TooDeepError extends RejectedError {
  constructor(message, details = {}) {
    super('too-deep', message);
    /** How deep the value nests (arrays and objects, its own included). @type {number | undefined} */
    this.depth = details.depth;
    /** The most it may nest where it is written. @type {number | undefined} */
    this.max = details.max;
  }
}
/** A message id is longer than the agent's `maxIdBytes` (the session layer's admission). */
class IdTooLongError extends RejectedError {
  constructor(message, details = {}) {
    super('id-too-long', message);
    /** Its length in UTF-8 bytes. @type {number | undefined} */
    this.bytes = details.bytes;
    /** The limit. @type {number | undefined} */
    this.max = details.max;
  }
}
/** A message's JSON encoding is larger than the agent's `maxMessageBytes` (the session layer's admission). */
class MessageTooLargeError extends RejectedError {
  constructor(message, details = {}) {
    super('message-too-large', message);
    /** Its size in bytes. @type {number | undefined} */
    this.bytes = details.bytes;
    /** The limit. @type {number | undefined} */
    this.max = details.max;
  }
}

/** An input that is not one of FORMAT.md's shapes, or holds a value JSON cannot carry exactly (NaN, a cycle…); nothing was applied. */
class InvalidInputError extends CoxswainError {
  constructor(message) { super('invalid-input', message); }
}

/** A log the machine cannot be restored from (S46, S47); nothing was restored or written. */
class InvalidLogError extends CoxswainError {
  constructor(message, line) {
    super('invalid-log', message);
    /** 1-based line of the offending record, when read from a file. @type {number | undefined} */
    this.line = line;
  }
}
/** A complete line of a log file that is not a valid record; nothing was written. */
class CorruptLogError extends CoxswainError {
  constructor(message, line) {
    super('corrupt-log', message);
    /** @type {number} */
    this.line = line;
  }
}

/**
 * A line of a log file is longer than the longest record a session writes (`MAX_LINE_BYTES`,
 * the Rust logs' limit): the read stopped there, holding no more of the line than the limit and
 * one chunk. Nothing was restored or written.
 */
class LineTooLongError extends CorruptLogError {
  constructor(filePath, line, max) {
    super(`${filePath}: line ${line} is longer than ${max} bytes (the longest record a session writes)`, line);
    this.kind = 'line-too-long';
    /** @type {string} */
    this.path = filePath;
    /** The limit. @type {number} */
    this.max = max;
  }
}

/**
 * Reading, writing or syncing the log failed. From an append: the batch is not in the log.
 * `kind` is the shared file log's (`coxswain_file_log::LogError::kind`): `io` here, or its
 * subclass's; `path` the file.
 */
class LogIoError extends CoxswainError {
  constructor(message, options, kind = 'io') {
    super(kind, message, options);
    /** The log's file. @type {string | undefined} */
    this.path = options && options.path;
  }
}
/**
 * The file system holding the log is full (`ENOSPC`, or a quota): nothing of the append is in
 * the log (it was cut back). Free space and send again.
 */
class LogStorageFullError extends LogIoError {
  constructor(message, options) { super(message, options, 'storage-full'); }
}
/**
 * The process may not open, write or lock the log's file, or sync its directory (`EACCES`,
 * `EPERM`, a read-only file system): nothing was written.
 */
class LogPermissionDeniedError extends LogIoError {
  constructor(message, options) { super(message, options, 'permission-denied'); }
}
/**
 * The log's path names something that is not a regular file (a FIFO, a directory, a socket, a
 * device): refused at open, before anything is read or written (a FIFO would block a reader).
 */
class NotRegularFileError extends LogIoError {
  constructor(filePath, fileType) {
    super(`${filePath}: not a regular file (${fileType})`, undefined, 'not-regular');
    /** @type {string} */
    this.path = filePath;
    /** What it is, in the Rust logs' words: `a FIFO`, `a directory`, `a socket`, `a character device`, `a block device`, `not a file`. @type {string} */
    this.fileType = fileType;
  }
}
/**
 * The file at the log's path is no longer the one this log writes: it was removed, renamed or
 * replaced. Nothing more is acknowledged; from an append, the batch is not in the log.
 */
class LogReplacedError extends LogIoError {
  constructor(filePath) {
    super(`the log file ${filePath} was removed or replaced`, undefined, 'replaced');
    /** @type {string} */
    this.path = filePath;
  }
}
/**
 * The log's file is shorter than what this log wrote: it was cut in place (a `logrotate` with
 * `copytruncate`, a `: > file`), so records acknowledged before may be gone. Nothing more is
 * acknowledged; from an append, the batch is not in the log.
 */
class LogTruncatedError extends LogIoError {
  constructor(filePath, expected, found) {
    super(
      `the log file ${filePath} was truncated: it holds ${found} bytes where this log wrote ${expected}`,
      undefined,
      'truncated',
    );
    /** @type {string} */
    this.path = filePath;
    /** The file's length as this log left it. @type {number} */
    this.expected = expected;
    /** Its length now. @type {number} */
    this.found = found;
  }
}
/**
 * Another writer wrote to the log's file, ignoring its lock: it is longer than what this log
 * wrote (`found > expected`: appended to), or does not end in the bytes this log wrote last
 * (`found === expected`: overwritten at its end). Nothing more is acknowledged; from an append,
 * the batch is not in the log.
 */
class LogTamperedError extends LogIoError {
  constructor(filePath, expected, found) {
    const what = found === expected
      ? `its last bytes are not the ones this log wrote (${found} bytes)`
      : `it holds ${found} bytes where this log wrote ${expected}`;
    super(`the log file ${filePath} was written by another writer: ${what}`, undefined, 'tampered');
    /** @type {string} */
    this.path = filePath;
    /** The file's length as this log left it. @type {number} */
    this.expected = expected;
    /** Its length now. @type {number} */
    this.found = found;
  }
}
/**
 * An append failed and cutting it back failed too, or was not tried because the file is
 * shorter than the log (a cut-back never extends a file): the batch may or may not be in the
 * log. `cause` is why the append failed, `undo` why the cut-back did (a `LogTruncatedError` for
 * a shorter file).
 */
class IndeterminateError extends CoxswainError {
  constructor(message, options) {
    super('indeterminate', message, options);
    /** @type {Error | undefined} */
    this.undo = options && options.undo;
  }
}
/** A record cannot be encoded (too deep, `seq` exhausted); nothing was written. */
class EncodeError extends CoxswainError {
  constructor(message) { super('encode', message); }
}
/** Another writer holds the log file's `flock` (another FileLog, here, in Python or in Rust). */
class LockedError extends CoxswainError {
  constructor(message, filePath = undefined) {
    super('locked', message);
    /** The log's file. @type {string | undefined} */
    this.path = filePath;
  }
}
/**
 * An earlier append was indeterminate (or the tail repair failed): the log cannot say what it
 * holds and takes no more appends until re-opened.
 */
class LogFailedError extends CoxswainError {
  constructor(message = 'an earlier append was indeterminate; re-open the log') { super('failed', message); }
}

/**
 * Appending the batch that held the input failed (`cause`, the log's error): the input is not in
 * the log and the machine is as if it had not been fed (the session layer rolled the batch back).
 * The agent goes on; the input may be sent again.
 */
class PersistenceError extends CoxswainError {
  constructor(message, options) { super('persistence', message, options); }
}
/** The agent stopped: its log cannot say whether a batch is in it (an indeterminate append). Re-open it. */
class StoppedError extends CoxswainError {
  constructor(message = 'the agent stopped after an indeterminate append; re-open it from the log') {
    super('stopped', message);
  }
}
/**
 * A batch call that does not fit the machine's state; nothing changed. `kind` is
 * `already-open` (`beginBatch` twice), `not-open` (a closer without a batch) or `undrained`
 * (`beginBatch` while a transition waits to be persisted).
 */
class BatchError extends CoxswainError {
  constructor(kind) {
    const why = {
      'already-open': 'a batch is already open',
      'not-open': 'no batch is open',
      undrained: "the previous input's outputs were not drained",
    };
    super(kind, why[kind] ?? kind);
  }
}
/** The agent was closed, or the log (then `path` names its file). */
class ClosedError extends CoxswainError {
  constructor(message = 'the agent is closed') { super('closed', message); }
}
/** A host event was recorded after its step was answered. */
class StepClosedError extends CoxswainError {
  constructor(message = 'the step is closed: host events go inside their step') {
    super('step-closed', message);
  }
}
/** A host event used a type of the machine's own vocabulary. */
class ReservedTypeError extends CoxswainError {
  constructor(type) {
    super('reserved-type', `event type \`${type}\` is reserved for the machine's own events`);
  }
}
/** The final sync failed when the agent ended: lazily synced records may be lost. */
class FinalSyncError extends CoxswainError {
  constructor(message, options) { super('final-sync', message, options); }
}
/** Agent options out of bounds. */
class InvalidOptionsError extends CoxswainError {
  constructor(message) { super('invalid-options', message); }
}
/**
 * A redelivery allowance (S59, the option `redelivery`) that is not an integer within
 * 0..=1000: refused when the log is opened, before anything is read or written.
 */
class InvalidRedeliveryError extends InvalidOptionsError {
  constructor(value, message) {
    super(message);
    /** The refused value, as given. */
    this.value = value;
  }
}

/**
 * The error of the shared file log's failure (src/filelog.rs): a rejection whose message is the
 * JSON text `{kind, message, path, …}`. The class is chosen by `kind` alone
 * (`coxswain_file_log::LogError::kind`, the name every language gives it), never by an errno or
 * the message's words; `kind` and `path` are kept as they came, and a message that does not name
 * the file gets its path in front. Anything else (not such a rejection) is a `LogIoError`
 * naming `filePath`.
 */
function logError(error, filePath) {
  let reason;
  if (typeof error?.message === 'string' && error.message.startsWith('{')) {
    try {
      reason = JSON.parse(error.message);
    } catch {
      reason = undefined;
    }
  }
  if (reason === undefined || typeof reason.kind !== 'string') {
    const message = error instanceof Error ? error.message : String(error);
    return Object.assign(new LogIoError(`${filePath}: ${message}`, { cause: error }), { path: filePath });
  }
  return fromReason(reason, filePath);
}

/** The error of one reason (`{kind, message, path, …}`). */
function fromReason(reason, filePath) {
  const where = reason.path ?? filePath;
  const named = reason.message.includes(where) ? reason.message : `${where}: ${reason.message}`;
  let made;
  switch (reason.kind) {
    case 'replaced': made = new LogReplacedError(where); break;
    case 'truncated': made = new LogTruncatedError(where, reason.expected, reason.found); break;
    case 'tampered': made = new LogTamperedError(where, reason.expected, reason.found); break;
    case 'not-regular': made = new NotRegularFileError(where, reason.fileType); break;
    case 'locked': made = new LockedError(named, where); break;
    case 'storage-full': made = new LogStorageFullError(named); break;
    case 'permission-denied': made = new LogPermissionDeniedError(named); break;
    case 'line-too-long': made = new LineTooLongError(where, reason.line, reason.max); break;
    case 'corrupt': made = new CorruptLogError(named, reason.line); break;
    case 'invalid': made = new InvalidLogError(named, reason.line); break;
    case 'failed': made = new LogFailedError(named); break;
    case 'closed': made = new ClosedError(named); break;
    case 'too-deep': made = new TooDeepError(reason.detail ?? named, { depth: reason.depth, max: reason.max }); break;
    case 'encode':
    case 'seq-exhausted': made = new EncodeError(named); break;
    case 'indeterminate': {
      const cause = nested(reason.error, filePath);
      made = new IndeterminateError(named, { cause, undo: nested(reason.undo, filePath) });
      break;
    }
    default: made = new LogIoError(named); // io, and the segment and PostgreSQL logs' kinds
  }
  made.kind = reason.kind;
  made.path = where;
  if (made.message !== named && reason.kind !== 'too-deep') made.message = named;
  return made;
}

/** An indeterminate append's cause or undo: a log error, or an i/o error in the OS's words. */
function nested(reason, filePath) {
  if (reason === undefined) return undefined;
  if (reason.kind !== 'io') return fromReason(reason, filePath);
  return Object.assign(new LogIoError(reason.message), { path: reason.path ?? filePath });
}

const REJECTIONS = {
  'already-pending': AlreadyPendingError,
  'already-delivered': AlreadyDeliveredError,
  conflict: ConflictError,
  'turn-mismatch': TurnMismatchError,
  full: FullError,
  'unexpected-completion': UnexpectedCompletionError,
  busy: BusyError,
  disposed: DisposedError,
  undrained: UndrainedError,
  'too-deep': TooDeepError,
  'id-too-long': IdTooLongError,
  'message-too-large': MessageTooLargeError,
};

/** The error of a rejection kind the core (or the depth check) named, with its details (`id`, `expect`, `target`, `maxPending`). */
function rejection(kind, message, details = {}) {
  const Class = REJECTIONS[kind];
  return Class ? new Class(message, details) : new RejectedError(kind, message);
}

/** The error of a session layer's refusal (`{rejected: KIND, message, …details}`). */
function refusal(reply) {
  switch (reply.rejected) {
    case 'step-closed':
      return new StepClosedError();
    case 'reserved-type':
      return new ReservedTypeError(reply.type);
    case 'invalid-input':
      return new InvalidInputError(reply.message);
    case 'encode':
      return new EncodeError(reply.message);
    default:
      return rejection(reply.rejected, reply.message, reply);
  }
}

module.exports = {
  CoxswainError,
  RejectedError,
  AlreadyPendingError,
  AlreadyDeliveredError,
  ConflictError,
  TurnMismatchError,
  FullError,
  UnexpectedCompletionError,
  BusyError,
  DisposedError,
  UndrainedError,
  TooDeepError,
  IdTooLongError,
  MessageTooLargeError,
  InvalidInputError,
  InvalidLogError,
  CorruptLogError,
  LineTooLongError,
  LogIoError,
  LogStorageFullError,
  LogPermissionDeniedError,
  NotRegularFileError,
  LogReplacedError,
  LogTruncatedError,
  LogTamperedError,
  IndeterminateError,
  EncodeError,
  LogFailedError,
  LockedError,
  PersistenceError,
  StoppedError,
  ClosedError,
  BatchError,
  StepClosedError,
  ReservedTypeError,
  FinalSyncError,
  InvalidOptionsError,
  InvalidRedeliveryError,
  rejection,
  refusal,
  logError,
};
