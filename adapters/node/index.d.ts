// Types of the coxswain Node binding (hand-written; the shapes are docs/FORMAT.md's).
/// <reference types="node" />

// ---- values (FORMAT.md "Values") ------------------------------------------------------------

/**
 * Any JSON value. An integer beyond 2^53 is a `bigint` (written as its digits; one beyond the
 * 64-bit integers a log holds, -2^63 .. 2^64-1, is refused with `InvalidInputError`).
 */
export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

/** A message: a caller-minted `id`, a `source` with a string `kind`, any `content`; other keys are carried verbatim. */
export interface Message {
  id: string;
  source?: { kind: string; [key: string]: Json };
  content?: Json;
  [key: string]: Json | undefined;
}
/** An error: `{message, code}` and any other field a host's error carries, kept whole. */
export interface ErrorInfo {
  message: string;
  code: string;
  [key: string]: Json;
}
/** A cancel cause. */
export type CancelCause =
  | { kind: 'user' }
  | { kind: 'parent' }
  | { kind: 'hook'; reason: string }
  | { kind: 'disposed' };
/** A pending list: the next turn (NT) or the next step (NS). */
export type Target = 'next-turn' | 'next-step';
/** An expected-turn guard on a send (S54): while turn `n` runs and was not stopped, or while idle with no turn since `n`. */
export type Expect = { turn: number } | { idleAfter: number };
/** Why a turn ended. */
export type TurnEndReason =
  | { kind: 'completed' }
  | { kind: 'max-tokens' }
  | { kind: 'blocked' }
  | { kind: 'aborted'; reason: CancelCause }
  | { kind: 'error'; error: ErrorInfo }
  | { kind: 'interrupted' };

// ---- inputs (FORMAT.md "Inputs") ------------------------------------------------------------

export type PreStepAnswer = { enter: Message[] } | 'reject' | { fail: ErrorInfo };
export type StepAnswer = 'completed' | 'max-tokens' | 'continue' | { fail: ErrorInfo };
export type TurnStoppingAnswer = 'done' | { fail: ErrorInfo };

/** One input, as a trace's `"in"` value. */
export type Input =
  | { send: { message: Message; target: Target; wakeup: boolean; expect?: Expect } }
  | { followup: Message }
  | { steer: Message }
  | { inject: Message }
  | { remove: string }
  | { replace: { id: string; message: Message } }
  | { prepend: { target: Target; message: Message } }
  | { clear: Record<string, never> }
  | { cancel: { cause: CancelCause; keepInbox?: boolean } }
  | { maintenance: 'begin' | 'end' }
  | { dispose: Record<string, never> }
  | { resume: Record<string, never> }
  | { preStep: PreStepAnswer }
  | { step: StepAnswer }
  | { turnStopping: TurnStoppingAnswer };

// ---- outputs (FORMAT.md "Outputs") ----------------------------------------------------------

export interface SpliceData {
  target: Target;
  start: number;
  removedCount?: number;
  inserted: Message[];
  outcome?: 'canceled';
  wakeup?: true;
  /** On a splice crash repair appended to redeliver a message (S59): how many times its id has been redelivered, this time included. */
  redelivery?: number;
}
/** A durable event of the machine: `{type, data}`, as appended to the log. */
export type MachineEvent =
  | { type: 'agent/inbox/spliced'; data: SpliceData }
  | { type: 'turn/start'; data: { turn: number } }
  | { type: 'step/start'; data: { turn: number; step: number } }
  | { type: 'user/message'; data: Message }
  | { type: 'step/end'; data: { turn: number; step: number } }
  | { type: 'turn/end'; data: { turn: number; reason: TurnEndReason } };
/** A host event (model output, tool calls…): any type but the machine's own. */
export interface HostEvent {
  type: string;
  data: Json;
}
/** One log record's entry. */
export type Entry = MachineEvent | HostEvent;

/** A live, non-durable notification. */
export type Notification =
  | { type: 'agent/inbox/inserted'; message: Message }
  | { type: 'agent/inbox/discarded'; message: Message }
  | { type: 'agent/inbox/claimed'; message: Message; turn: number }
  | { type: 'agent/status'; status: Status }
  | { type: 'agent/error'; turn: number; step: number; error: ErrorInfo };
/** Asynchronous work the machine asks of the host, or the abort signal (S39). */
export type Request =
  | { preStep: { turn: number; step: number; messages: Message[] } }
  | { step: { turn: number; step: number } }
  | { turnStopping: { turn: number } }
  | { abort: { cause: CancelCause } };
/** One output in wire order, as a trace's `"out"` value. */
export type Output =
  | { event: MachineEvent }
  | { notify: Notification }
  | { request: Request }
  | { disposed: Record<string, never> };
/** What the host carries out once an input's events are durable, in order. `begin` starts an activity (a turn or a maintenance job): make its cancellation scope then (S42). */
export type Effect =
  | { notify: Notification }
  | { begin: { turn: number } | { maintenance: Record<string, never> } }
  | { request: Request }
  | { disposed: Record<string, never> };

export type Status = 'running' | 'idle';
/** The request the machine waits on (S4). */
export type Outstanding =
  | { preStep: { turn: number; step: number } }
  | { step: { turn: number; step: number } }
  | { turnStopping: { turn: number } };
export interface Pending {
  message: Message;
  /** Delivered with `wakeup` (S19). */
  wakeup: boolean;
}
export interface PendingLists {
  nextTurn: Pending[];
  nextStep: Pending[];
}
export interface MachineState extends PendingLists {
  status: Status;
  quiescent: boolean;
  disposed: boolean;
  maintenance: boolean;
  cancelRequested: boolean;
  /** The last turn opened (0 before the first), the running one while running: what a guarded send names (S54). */
  lastTurn: number;
  outstanding: Outstanding | null;
}

// ---- errors ---------------------------------------------------------------------------------

/** Every error of this package: an `Error` with a stable `kind`. */
export class CoxswainError extends Error {
  readonly kind: string;
}
/** The core rejected an input; nothing changed (S5). */
export class RejectedError extends CoxswainError {
  /** Whether this very message was delivered already, so a retry may stop: true only for `AlreadyPendingError` and `AlreadyDeliveredError`; never for a `ConflictError` (S56). */
  readonly wasDelivered: boolean;
}
/** The id is pending for the same message (S13). */
export class AlreadyPendingError extends RejectedError { readonly kind: 'already-pending'; readonly id?: string; readonly wasDelivered: true; }
/** The delivery memory holds the id for the same message (S52). */
export class AlreadyDeliveredError extends RejectedError { readonly kind: 'already-delivered'; readonly id?: string; readonly wasDelivered: true; }
/** The id is pending or held for a different message: a reused id, never success (S56). */
export class ConflictError extends RejectedError { readonly kind: 'conflict'; readonly id?: string; readonly wasDelivered: false; }
/** A guarded send's guard does not hold (S54). */
export class TurnMismatchError extends RejectedError { readonly kind: 'turn-mismatch'; readonly expect?: Expect; readonly wasDelivered: false; }
/** The list the delivery joins (after S18) holds `maxPending` items (S55). */
export class FullError extends RejectedError { readonly kind: 'full'; readonly target?: Target; readonly maxPending?: number; readonly wasDelivered: false; }
export class UnexpectedCompletionError extends RejectedError { readonly kind: 'unexpected-completion'; }
export class BusyError extends RejectedError { readonly kind: 'busy'; }
export class DisposedError extends RejectedError { readonly kind: 'disposed'; }
export class UndrainedError extends RejectedError { readonly kind: 'undrained'; }
/** A batch call that does not fit the machine's state; nothing changed. */
export class BatchError extends CoxswainError { readonly kind: 'already-open' | 'not-open' | 'undrained'; }
/**
 * A value nests deeper than a log record can hold it (`coxswain_log::TooDeep`: a message delivered
 * to an agent, a host event's `data`, a record to encode); nothing changed, nothing was written.
 * Its message is the Rust `TooDeep`'s text: `the value nests 125 levels deep; at most 124 fit in a
 * log record`.
 */
export class TooDeepError extends RejectedError { readonly kind: 'too-deep'; readonly depth?: number; readonly max?: number; readonly wasDelivered: false; }
/** A message id is longer than `maxIdBytes` (the session layer's admission); nothing changed. */
export class IdTooLongError extends RejectedError { readonly kind: 'id-too-long'; readonly bytes?: number; readonly max?: number; readonly wasDelivered: false; }
/** A message's JSON encoding is larger than `maxMessageBytes` (the session layer's admission); nothing changed. */
export class MessageTooLargeError extends RejectedError { readonly kind: 'message-too-large'; readonly bytes?: number; readonly max?: number; readonly wasDelivered: false; }
export class InvalidInputError extends CoxswainError { readonly kind: 'invalid-input'; }
/** A log the machine cannot be restored from (S46, S47); nothing was restored or written. From a `FileLog`: the kind `invalid` (the shared file log's) and `path`. */
export class InvalidLogError extends CoxswainError { readonly kind: 'invalid-log' | 'invalid'; readonly line?: number; readonly path?: string; }
/** A complete line of a log that is not a valid record; nothing was written. From a `FileLog`: the kind `corrupt` (the shared file log's) and `path`. */
export class CorruptLogError extends CoxswainError { readonly kind: 'corrupt-log' | 'corrupt' | 'line-too-long'; readonly line: number; readonly path?: string; }
/** A line of the log file is longer than the longest record a session writes (`{path}: line {line} is longer than {max} bytes (the longest record a session writes)`): the read stopped there. */
export class LineTooLongError extends CorruptLogError { readonly kind: 'line-too-long'; readonly path: string; /** The limit: the Rust logs' `MAX_LINE_BYTES` (2 MiB). */ readonly max: number; }
/**
 * The kinds of the shared file log's errors (`coxswain_file_log::LogError::kind`): the one name
 * every language gives each, and the `kind` of the error a `FileLog` rejects with.
 */
export type LogErrorKind =
  | 'io' | 'indeterminate' | 'corrupt' | 'invalid' | 'not-regular' | 'line-too-long' | 'encode' | 'too-deep'
  | 'seq-exhausted' | 'failed' | 'locked' | 'replaced' | 'truncated' | 'tampered' | 'storage-full'
  | 'permission-denied' | 'closed' | 'session-open' | 'writer-stopped' | 'fenced';
/** Reading, writing or syncing the log failed (`{path}: …`); from an append, the batch is not in the log. `kind` is `io` here, its subclass's, or another log's (`session-open`, `writer-stopped`, `fenced`). */
export class LogIoError extends CoxswainError { readonly kind: 'io' | 'replaced' | 'truncated' | 'tampered' | 'not-regular' | 'storage-full' | 'permission-denied' | 'session-open' | 'writer-stopped' | 'fenced'; readonly path?: string; }
/** The log's file system is full (`ENOSPC`, a quota): nothing of the append is in the log (it was cut back); free space and send again. */
export class LogStorageFullError extends LogIoError { readonly kind: 'storage-full'; readonly path: string; }
/** The process may not open, write or lock the log's file, or sync its directory (`EACCES`, `EPERM`, a read-only file system): nothing was written. */
export class LogPermissionDeniedError extends LogIoError { readonly kind: 'permission-denied'; readonly path: string; }
/** The log's path names a FIFO, a directory, a socket or a device (`{path}: not a regular file (a FIFO)`): refused at open, never opened blocking, nothing read or written. */
export class NotRegularFileError extends LogIoError { readonly kind: 'not-regular'; readonly path: string; readonly fileType: string; }
/** The file at the log's path was removed, renamed or replaced; nothing more is acknowledged. */
export class LogReplacedError extends LogIoError { readonly kind: 'replaced'; readonly path: string; }
/** The log's file is shorter than what this log wrote (cut in place: `copytruncate`, `: > file`); nothing more is acknowledged. */
export class LogTruncatedError extends LogIoError { readonly kind: 'truncated'; readonly path: string; readonly expected: number; readonly found: number; }
/** Another writer appended to the log's file (`found > expected`) or overwrote its end (`found === expected`); nothing more is acknowledged. */
export class LogTamperedError extends LogIoError { readonly kind: 'tampered'; readonly path: string; readonly expected: number; readonly found: number; }
/** An append failed and its cut-back failed too or was not tried (the file was shorter than the log: `undo` is a `LogTruncatedError`); the batch may or may not be in the log. `cause` is why the append failed. */
export class IndeterminateError extends CoxswainError { readonly kind: 'indeterminate'; readonly undo?: Error; readonly path?: string; }
/** A record cannot be encoded (`seq-exhausted`: no record may take `seq` 2^64 - 1); nothing was written. */
export class EncodeError extends CoxswainError { readonly kind: 'encode' | 'seq-exhausted'; readonly path?: string; }
/** An earlier append was indeterminate: the log takes no more appends until re-opened. */
export class LogFailedError extends CoxswainError { readonly kind: 'failed'; readonly path?: string; }
/** Another writer holds the log file's `flock` (another FileLog, here, in Python or in Rust): `the log {path} is locked by another writer`. */
export class LockedError extends CoxswainError { readonly kind: 'locked'; readonly path?: string; }
/** The append of the input's batch failed (`cause`: the log's error): the input is not in the log, the machine is as if it had not been fed, the agent goes on; send it again. */
export class PersistenceError extends CoxswainError { readonly kind: 'persistence'; readonly cause: unknown; }
/** The agent stopped after an indeterminate append (the log could not say whether a batch is in it): re-open it from its log. */
export class StoppedError extends CoxswainError { readonly kind: 'stopped'; }
/** The agent was closed, or the log (`the log file {path} is closed`: then `path` names its file). */
export class ClosedError extends CoxswainError { readonly kind: 'closed'; readonly path?: string; }
export class StepClosedError extends CoxswainError { readonly kind: 'step-closed'; }
export class ReservedTypeError extends CoxswainError { readonly kind: 'reserved-type'; }
export class FinalSyncError extends CoxswainError { readonly kind: 'final-sync'; }
export class InvalidOptionsError extends CoxswainError { readonly kind: 'invalid-options'; }
/**
 * A redelivery allowance (`redelivery`, S59) that is not an integer within 0..=1000, refused
 * when the log is opened, before anything is read or written: `redelivery -1 is not an integer
 * within 0..=1000 (S59)`, `the redelivery allowance 1001 is above 1000 (S59)`.
 */
export class InvalidRedeliveryError extends InvalidOptionsError { readonly value: unknown; }

// ---- fate (S58) -----------------------------------------------------------------------------

/** How a turn ended: the `kind` of its `turn/end` reason. */
export type TurnEndKind = 'completed' | 'max-tokens' | 'blocked' | 'aborted' | 'error' | 'interrupted';
/**
 * What became of a message id (S58), as FORMAT.md spells it (the core's `Fate::to_json`):
 * pending in a list; `'discarded'` by an ordinary removal (remove, replace with another id,
 * clear, cancel, dispose); `claimed` by turn `turn`, with `step` the first step whose
 * `user/message` carried it (absent while none has) and `end` its turn's end (absent while the
 * turn is open); `'unknown'`: never seen, or forgotten (the memory's capacity, S51).
 */
export type Fate =
  | { pending: Target }
  | 'discarded'
  | { claimed: { turn: number; step?: number; end?: TurnEndKind } }
  | 'unknown';
/** An event of a durable log as `Machine.restore` and `Machine.repair` read it: the machine's own (`appended` included) or any `{type, data}` (other keys, such as `seq`, ignored). */
export type LogEvent = MachineEvent | { type: string; data?: Json; [key: string]: Json | undefined };
/** The delivery memory's capacity (S51): a count of ids, or `'unbounded'` (S58: no id is ever forgotten). */
export type Memory = number | 'unbounded';

// ---- the machine ----------------------------------------------------------------------------

/** What one accepted input produced. Persist `events` as one batch, then call `persisted()`. */
export class Transition {
  /** `false` only for a `remove` or `replace` whose id was not pending (S15). */
  readonly found: boolean;
  /** The durable events, in order. */
  readonly events: MachineEvent[];
  /** The host's word that the events are durable: the effects, in order (once). */
  persisted(): Effect[];
  /** Every output in wire order, events included: for ports, which persist nothing. */
  intoOutputs(options?: { begin?: false }): Output[];
  /**
   * The wire order with each `begin` effect where its activity begins (right after a turn's
   * `turn/start`, first for a maintenance job): for a harness that reads the wire order and
   * scopes its cancellation by activity. FORMAT.md's traces hold no `begin`.
   */
  intoOutputs(options: { begin: true }): (Output | Extract<Effect, { begin: unknown }>)[];
}

/** The core's delivery state machine. Every method that takes an input throws a `RejectedError` subclass on rejection. */
export class Machine {
  /**
   * `memory`: the delivery memory's capacity (S51, default 0; `'unbounded'`, S58); `maxPending`:
   * the admission bound (S55, default `null`: unbounded); `implicitBatch` (default `false`):
   * each accepted input commits the previous input's batch and opens its own, so `rollBack()`
   * takes back the last input (its append failed) with no `beginBatch()`/`commitBatch()` around
   * each. `InvalidOptionsError` for a value out of its range or of another type.
   */
  constructor(options?: { memory?: Memory; maxPending?: number | null; implicitBatch?: boolean });
  /** Restores from a durable log (S46–S48), the memory's records too (S58); throws `InvalidLogError` (S47). A restored list longer than `maxPending` is kept (S55). */
  static restore(log: LogEvent[], options?: { seedLength?: number; memory?: Memory; maxPending?: number | null; implicitBatch?: boolean }): Machine;
  /**
   * Crash repair (S50, S59) of a log that may end inside an open turn, then restore: the
   * events repair appended (`appended`: the closers, then with `redelivery` ≥ 1 one redelivery
   * splice per message the interrupted turn claimed after its last `step/start`; append them to
   * the stored log first) and the restored machine (items parked, S48, until a wake or
   * `resume()`, S57). `redelivery`: default 0 (S50 unchanged), an integer within 0..=1000, else
   * `InvalidRedeliveryError`; `InvalidLogError` (S47).
   */
  static repair(log: LogEvent[], options?: { redelivery?: number; seedLength?: number; memory?: Memory; maxPending?: number | null; implicitBatch?: boolean }): { machine: Machine; appended: MachineEvent[] };
  handle(input: Input): Transition;
  /** The last input's transition again, when it was not drained. */
  drain(): Transition;
  /** With `expect`, accepted only while the guard holds, else `TurnMismatchError` (S54). */
  send(message: Message, target: Target, wakeup: boolean, options?: { expect?: Expect }): Transition;
  /** A steer meant for turn `turn`: `TurnMismatchError` once it ended or was stopped (S54). */
  steerExpecting(turn: number, message: Message): Transition;
  /** A follow-up only while idle with no turn since `turn`, else `TurnMismatchError` (S54). */
  followupIfIdleAfter(turn: number, message: Message): Transition;
  followup(message: Message): Transition;
  steer(message: Message): Transition;
  inject(message: Message): Transition;
  remove(id: string): Transition;
  replace(id: string, message: Message): Transition;
  prepend(target: Target, message: Message): Transition;
  clear(): Transition;
  cancel(cause: CancelCause, options?: { keepInbox?: boolean }): Transition;
  beginMaintenance(): Transition;
  endMaintenance(): Transition;
  dispose(): Transition;
  /** Starts parked waking work while idle, as a waking send would (S57); else emits nothing. Rejected only once disposed. */
  resume(): Transition;
  /** What became of the id (S58): a query, answered in every phase, also once disposed. */
  fate(id: string): Fate;
  answerPreStep(answer: PreStepAnswer): Transition;
  answerStep(answer: StepAnswer): Transition;
  answerTurnStopping(answer: TurnStoppingAnswer): Transition;
  /** Opens a batch whose inputs `rollBackBatch()` takes back together; `BatchError` if one is open or a transition is undrained. */
  beginBatch(): void;
  /** Keeps the batch's inputs (their events are durable); `BatchError` without a batch. */
  commitBatch(): void;
  /** Takes back every input of the batch: the machine is as before it; `BatchError` without a batch. */
  rollBackBatch(): void;
  /**
   * `rollBackBatch()` by the name an `implicitBatch` host calls it: takes back the last accepted
   * input, and only it (a rejected input changed nothing, the batch included, S5); `BatchError`
   * (`not-open`) when no input was accepted since the last rollback or `commitBatch()`.
   */
  rollBack(): void;
  /** Whether each accepted input runs in a batch of its own (the `implicitBatch` option). */
  readonly implicitBatch: boolean;
  /** Whether a batch is open. */
  readonly batchOpen: boolean;
  state(): MachineState;
  readonly status: Status;
  readonly quiescent: boolean;
  readonly disposed: boolean;
  readonly outstanding: Outstanding | null;
  remembers(id: string): boolean;
  /** The admission bound (S55), `null` when unbounded. */
  readonly maxPending: number | null;
  /** The last turn opened (0 before the first): what a guarded send names (S54). */
  readonly lastTurn: number;
}

// ---- the log --------------------------------------------------------------------------------

/** What a log's bytes hold, read by coxswain-log's reader. */
export interface ParsedLog {
  records: Array<{ seq?: number } & Entry>;
  completeLen: number;
  torn: { line: number; bytes: number } | null;
  unterminated: boolean;
  nextSeq: number;
}
/** Where the agent's durable events go (MemoryLog, or your own; a FileLog resumes in Rust). */
export interface DurableLog {
  readAll(): Promise<Uint8Array>;
  repairTail(read: { completeLen: number; torn: { line: number; bytes: number } | null; unterminated: boolean; nextSeq: number }): Promise<void>;
  /**
   * Appends as one unit; resolves with the first record's `seq` once durable. Rejects with
   * `IndeterminateError` (or `LogFailedError`) when it cannot say whether the batch is in the log:
   * the agent stops. Any other rejection means none of the batch is in the log and the log takes
   * appends again: the agent fails that batch's inputs (`PersistenceError`) and goes on.
   */
  append(entries: Entry[]): Promise<number>;
  sync(): Promise<void>;
  close(): Promise<void>;
}
export type SyncPolicy = 'every-append' | 'per-turn' | 'never';
/**
 * The JSON-lines file log: the one Rust file log every coxswain runtime writes
 * (`coxswain-file-log`), its IO on libuv's thread pool. It holds the file's `flock` while open
 * (`LockedError` for a second writer); a FIFO, a directory or a socket is refused at open
 * (`NotRegularFileError`). Its calls run one at a time, in the order made. Every error it
 * rejects with has the shared log's `kind` (`LogErrorKind`) and the file's `path`.
 */
export class FileLog {
  static open(path: string, options?: { sync?: SyncPolicy }): Promise<FileLog>;
  /** The file's absolute path. */
  readonly path: string;
  /** The `seq` the next appended record takes (1 before the log was read back). */
  readonly nextSeq: number;
  /** Appends as one write (reading the log back and repairing its tail first, if no agent resumed it); the first record's `seq`. */
  append(entries: Entry[]): Promise<number>;
  sync(): Promise<void>;
  close(): Promise<void>;
}
/** A log in memory, same format, nothing durable (tests, benches). */
export class MemoryLog implements DurableLog {
  constructor(bytes?: Uint8Array);
  bytes(): Buffer;
  readAll(): Promise<Buffer>;
  repairTail(read: { completeLen: number; torn: { line: number; bytes: number } | null; unterminated: boolean; nextSeq: number }): Promise<void>;
  append(entries: Entry[]): Promise<number>;
  sync(): Promise<void>;
  close(): Promise<void>;
}
/** Encodes entries as log lines numbered from `firstSeq` (throws `EncodeError`, `TooDeepError`). */
export function encodeRecords(firstSeq: number, entries: Entry[]): string;
/** Reads a log's bytes (throws `CorruptLogError`). */
export function parseLog(bytes: Uint8Array): ParsedLog;

// ---- the agent ------------------------------------------------------------------------------

export interface PreStepContext {
  turn: number;
  step: number;
  /** The claimed batch: all of NS, then at a turn boundary the first NT item (S28). */
  messages: Message[];
  /** Aborted when the turn is cancelled (S39); `signal.reason` is the `CancelCause` (an `Error` when the agent closed). */
  signal: AbortSignal;
  agent: Agent;
}
export interface StepContext {
  turn: number;
  step: number;
  signal: AbortSignal;
  agent: Agent;
  /** Appends one host event inside this step; resolves once durable. */
  record(type: string, data: Json): Promise<void>;
  recordAll(events: HostEvent[]): Promise<void>;
}
export interface TurnStoppingContext {
  turn: number;
  signal: AbortSignal;
  agent: Agent;
}
/**
 * The harness's async work. A hook that throws answers `fail` with code `host-raised` (S38; the
 * session layer's host-failure vocabulary). An answer the session refuses (a message `enter`
 * names that was not claimed, data nested too deep) answers `fail` with code
 * `host-invalid-answer`: the turn goes on to its end and the agent stays open.
 */
export interface Host {
  /** Not written, or returning `undefined` / `null`: the session enters the claimed batch as it is (inside the same batch, when not written). */
  preStep?(cx: PreStepContext): Promise<PreStepAnswer | void | null> | PreStepAnswer | void | null;
  /** Returning `undefined` / `null` gives no answer: the session answers `fail` with code `host-invalid-answer`. */
  step(cx: StepContext): Promise<StepAnswer> | StepAnswer;
  /** Not written, or returning `undefined` / `null`: `'done'`. */
  turnStopping?(cx: TurnStoppingContext): Promise<TurnStoppingAnswer | void | null> | TurnStoppingAnswer | void | null;
}
/**
 * `Agent.open`'s options. Every default is the session layer's (`coxswain_session::Options::DEFAULT`,
 * the same in every driver), read from the addon.
 */
export interface AgentOptions {
  /** How long an aborted host call may take to answer before the session answers `fail` (`host-abandoned`) on its behalf, ending the turn (S38, S39); default 5000 ms, `Infinity`: never. */
  abortGraceMs?: number;
  /** The longest message id admitted, in UTF-8 bytes (`IdTooLongError`); default 256. */
  maxIdBytes?: number | null;
  /** The largest message admitted, in bytes of its JSON encoding (`MessageTooLargeError`); default 1 MiB. */
  maxMessageBytes?: number | null;
  /** The pause after a failed batch, in milliseconds, before the session stages the answers it held again (and a grace the rollback put back fires); default 100. */
  retryAfterMs?: number | null;
  /** The delivery memory's capacity (S51); default 256, at most 2^20, or `'unbounded'` (S58). Pass the same at every open. */
  memory?: Memory;
  /**
   * Crash repair's redelivery allowance (S59): how many times a message an interrupted turn
   * claimed before any model call saw it is put back, over the log's life. Default 0 (S50: it
   * is dropped); an integer within 0..=1000, else `InvalidRedeliveryError` before the log is read.
   */
  redelivery?: number;
  /** Send `resume` (S57) once open, durable before `open` resolves: restored or redelivered waking work runs without a new delivery. Default `false` (S48: it parks). */
  resumeOnOpen?: boolean;
  /** Group commit: the most inputs one append takes; default 64. */
  maxBatch?: number;
  /** The core's admission bound (S55): a delivery into a list holding this many items rejects with `FullError`; default 10,000, `null` for unbounded. Pass the same at every open. */
  maxPending?: number | null;
}
export interface Recovery {
  records: number;
  tornTail: { line: number; bytes: number } | null;
  interruptedTurn: number | null;
  /** The events repair appended: the closers (S50) and the redelivery splices (S59). */
  closers: number;
  /** How many of `closers` (the last ones) are redelivery splices (S59). */
  redelivered: number;
  lastTurn: number;
  pendingNextTurn: number;
  pendingNextStep: number;
}
export type Ending =
  | { kind: 'disposed' }
  | { kind: 'closed'; error?: Error }
  | { kind: 'stopped'; error: Error };
export type Update =
  | { recorded: { seq: number; entry: Entry } }
  | { notified: Notification }
  | { ended: Ending };

/**
 * The Promise-based driver of one session: an IO loop over the session layer's agent loop (the
 * Rust `coxswain_session::AgentLoop`, the one every driver runs). Deliveries resolve once
 * durable. A failed append fails its batch's inputs (`PersistenceError`) and the agent goes on;
 * an indeterminate one (`IndeterminateError`) or a fenced one (another writer owns the session)
 * stops it (`StoppedError` from then on). Every error it gives has a `kind`, the same word in
 * every language (`persistence`, `indeterminate`, `stopped`, `closed`, `disposed`, a refusal's).
 */
export class Agent {
  static open(host: Host, log: FileLog | DurableLog, options?: AgentOptions): Promise<{ agent: Agent; recovery: Recovery }>;
  /** With `expect`, accepted only while the guard holds, else `TurnMismatchError` (S54). */
  send(message: Message, target: Target, wakeup: boolean, options?: { expect?: Expect }): Promise<void>;
  /** A steer meant for turn `turn`: rejects with `TurnMismatchError` once it ended or was stopped (S54). */
  steerExpecting(turn: number, message: Message): Promise<void>;
  /** A follow-up only while idle with no turn since `turn`, else `TurnMismatchError` (S54). */
  followupIfIdleAfter(turn: number, message: Message): Promise<void>;
  followup(message: Message): Promise<void>;
  steer(message: Message): Promise<void>;
  inject(message: Message): Promise<void>;
  remove(id: string): Promise<boolean>;
  replace(id: string, message: Message): Promise<boolean>;
  prepend(target: Target, message: Message): Promise<void>;
  clear(): Promise<void>;
  cancel(cause: CancelCause, options?: { keepInbox?: boolean }): Promise<void>;
  runMaintenance<T>(job: (signal: AbortSignal) => Promise<T> | T): Promise<T>;
  whenIdle(): Promise<void>;
  subscribe(listener: (update: Update) => void): () => void;
  pending(): Promise<PendingLists>;
  /** Starts parked waking work (S57); resolves once durable. Rejected only once disposed. */
  resume(): Promise<void>;
  /** What became of the id (S58), after the inputs sent before it; answered also once the agent ended (disposed or closed). */
  fate(id: string): Promise<Fate>;
  dispose(): Promise<void>;
  close(): Promise<void>;
  finished(): Promise<Ending>;
  readonly status: Status;
  readonly ending: Ending | null;
  /** The last turn opened (0 before the first), as of the last durable input: what a guarded send names (S54). */
  readonly lastTurn: number;
}

/** A human prompt: `{id, source: {kind: 'user'}, content}`. */
export function userMessage(id: string, content: Json): Message;
