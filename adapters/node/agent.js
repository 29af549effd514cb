'use strict';
// `Agent`: the Promise-based driver of one session, with the tokio adapter's semantics
// (adapters/tokio). It owns the machine and the log; every delivery resolves once its durable
// events are appended and synced (and rejects, changing nothing, if the core refuses it); the
// host's async hooks `preStep`, `step` and `turnStopping` run one at a time (S4), each with the
// current activity's `AbortSignal` (a fresh one per turn or maintenance job, S42), which the
// core's `abort` trips (S39). It translates and never decides: every delivery decision is the
// core's.
//
// Group commit, as in the tokio driver: the inputs (and host events) already waiting when the
// driver runs are fed to the core one at a time in arrival order, their events appended as one
// batch (one write, one sync), and only once that batch is durable are their effects carried out
// and their callers acknowledged, in order. A failed append fails every input of the group (none
// of it is in the log), carries out nothing and stops the agent; its callers are told once the
// agent has ended (the log synced and released, `ending` set), as in the tokio driver.

const crypto = require('node:crypto');
const native = require('./native');
const errors = require('./errors');
const { capacity, bound, sendInput } = require('./machine');
const { encodeRecords } = require('./log');

const MACHINE_TYPES = new Set([
  'agent/inbox/spliced',
  'turn/start',
  'step/start',
  'user/message',
  'step/end',
  'turn/end',
]);
const MAX_CAPACITY = 1 << 20;
/** The default admission bound (S55), as the tokio adapter's `Options::max_pending`. */
const DEFAULT_MAX_PENDING = 10_000;
/** Commands that join a group (fed to the core, committed together). */
const GROUPED = new Set(['input', 'record', 'answer', 'maintenance', 'endMaintenance']);

class Agent {
  constructor(host, log, inner, maxBatch) {
    this._host = host;
    this._log = log;
    this._m = inner;
    this._maxBatch = maxBatch;
    this._queue = [];
    this._pumping = false;
    this._scheduled = false;
    this._controller = new AbortController();
    this._maintenance = null;
    this._ending = null;
    this._finishing = null;
    this._finalSync = null;
    this._idle = [];
    this._ended = [];
    /** Settlements decided once the agent is ending, made when it has ended. */
    this._afterEnd = [];
    this._listeners = new Set();
    const state = JSON.parse(inner.state());
    this._status = state.status;
    this._lastTurn = state.lastTurn;
  }

  /**
   * Opens an agent on `log` (a `FileLog`), which may be empty (a new session) or hold a session
   * to resume: reads it back, restores it (S46–S48: items park, nothing wakes) and only once that
   * succeeded repairs it (drops a torn tail, closes an interrupted turn, S50). A log that is
   * rejected is left as it was (`CorruptLogError`, `InvalidLogError`). Options: `memory`, the
   * delivery memory's capacity (S51, default 256; pass the same at every open), `maxBatch`,
   * the most inputs one append takes (default 64), and `maxPending`, the core's admission bound
   * (S55, default 10,000 items per list, `null` for unbounded; pass the same at every open): a
   * delivery into a list holding that many items rejects with `FullError`.
   */
  static async open(host, log, options = {}) {
    const memory = capacity(options.memory ?? 256);
    const maxBatch = options.maxBatch ?? 64;
    const maxPending = bound(options.maxPending === undefined ? DEFAULT_MAX_PENDING : options.maxPending);
    if (memory > MAX_CAPACITY) {
      throw new errors.InvalidOptionsError(`memory ${memory} is above ${MAX_CAPACITY}`);
    }
    if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_CAPACITY) {
      throw new errors.InvalidOptionsError(`maxBatch ${maxBatch} is not within 1..=${MAX_CAPACITY}`);
    }
    try {
      // Ids come from callers: key the core's id indexes with a random seed (HashDoS).
      const inner = new native.NativeMachine(memory, maxPending, crypto.randomBytes(8).toString('hex'));
      const reply = JSON.parse(inner.resume(await log.readAll()));
      if (reply.corrupt) {
        throw new errors.CorruptLogError(`corrupt log: ${reply.corrupt.message}`, reply.corrupt.line);
      }
      if (reply.invalidLog) {
        throw new errors.InvalidLogError(
          `the log cannot be repaired: ${reply.invalidLog.message}`,
          reply.invalidLog.line,
        );
      }
      const read = reply.ok;
      // Accepted: only now is anything written.
      await log.repairTail(read);
      if (read.closers.length > 0) await log.append(read.closers);
      if (read.torn || read.unterminated || read.closers.length > 0) await log.sync();
      const state = JSON.parse(inner.state());
      const recovery = {
        records: read.records,
        tornTail: read.torn,
        interruptedTurn: read.interrupted,
        closers: read.closers.length,
        lastTurn: state.lastTurn,
        pendingNextTurn: state.nextTurn.length,
        pendingNextStep: state.nextStep.length,
      };
      return { agent: new Agent(host, log, inner, maxBatch), recovery };
    } catch (error) {
      await log.close();
      throw error;
    }
  }

  /**
   * `send(message, target, wakeup, expect)` (S16, S54). Resolves once durable. With
   * `options.expect` (`{turn: n}` or `{idleAfter: n}`) it is accepted only while the guard
   * holds, else it rejects with `TurnMismatchError`, changing nothing; the retry of an accepted
   * guarded send rejects with `AlreadyPendingError`/`AlreadyDeliveredError` (`wasDelivered`).
   */
  send(message, target, wakeup, options = {}) {
    return this._input(sendInput(message, target, wakeup, options.expect)).then(drop);
  }
  /**
   * A steer meant for turn `turn` (S54): joins that turn at its next step boundary, or rejects
   * with `TurnMismatchError` once it ended or was stopped (instead of joining the next turn, or
   * becoming a turn of its own after a stop, S18). Name the turn the caller saw: `lastTurn`
   * while running, or a host context's `turn`.
   */
  steerExpecting(turn, message) { return this.send(message, 'next-step', true, { expect: { turn } }); }
  /** A follow-up sent only while the agent is idle with no turn since `turn` (S54); else `TurnMismatchError`. */
  followupIfIdleAfter(turn, message) {
    return this.send(message, 'next-turn', true, { expect: { idleAfter: turn } });
  }
  /** A follow-up: a turn of its own (S22). */
  followup(message) { return this._input({ followup: message }).then(drop); }
  /** Steering: joins the running turn at its next step boundary. */
  steer(message) { return this._input({ steer: message }).then(drop); }
  /** Context that rides along with the next step; never wakes (S20). */
  inject(message) { return this._input({ inject: message }).then(drop); }
  /** Removes a pending message (S15); resolves `false` if it was not pending. */
  remove(id) { return this._input({ remove: id }); }
  /** Replaces a pending message in place (S15); resolves `false` if `id` was not pending. */
  replace(id, message) { return this._input({ replace: { id, message } }); }
  /** Puts a quiet message first in `target` (S15). */
  prepend(target, message) { return this._input({ prepend: { target, message } }).then(drop); }
  /** Discards everything pending (S15). */
  clear() { return this._input({ clear: {} }).then(drop); }
  /**
   * `cancel(cause, {keepInbox})` (S39). Resolves once the cancel is durable; the running
   * activity's signal is aborted by then, and the turn ends when the host's call returns.
   */
  cancel(cause, options = {}) {
    return this._input({ cancel: { cause, keepInbox: options.keepInbox ?? false } }).then(drop);
  }

  /**
   * Runs a maintenance job (S43): only while idle (else `BusyError`). `job(signal)` runs with a
   * fresh `AbortSignal` (a cancel aborts it); when it settles the maintenance ends and a wake
   * latched meanwhile replays (S25). Resolves with the job's value once the end is durable (or
   * rejects with the job's error, the maintenance ended all the same).
   */
  runMaintenance(job) {
    return new Promise((resolve, reject) => {
      this._enqueue({ kind: 'maintenance', input: { maintenance: 'begin' }, job, resolve, reject });
    });
  }

  /**
   * Resolves once the agent is quiescent (S44): no turn and no maintenance runs. Rejects if the
   * agent stopped or was closed first; resolves if it was disposed. Never await it inside a host
   * call: the activity it waits for includes that call.
   */
  whenIdle() {
    if (this._ending) {
      return this._ending.kind === 'disposed' ? Promise.resolve() : Promise.reject(this._endedError());
    }
    if (!this._pumping && this._queue.length === 0 && this._m.isQuiescent()) return Promise.resolve();
    return new Promise((resolve, reject) => this._idle.push({ resolve, reject }));
  }

  /**
   * Live updates from now on, in the core's order: `{recorded: {seq, entry}}` for every record
   * appended, `{notified: NOTIFICATION}` for every notification, then `{ended: ENDING}`. Returns
   * the function that unsubscribes.
   */
  subscribe(listener) {
    if (this._finishing === 'done') {
      queueMicrotask(() => listener({ ended: this._ending }));
      return () => {};
    }
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /** The pending lists (NT and NS, in order) once the inputs before this call are settled. */
  pending() {
    return new Promise((resolve, reject) => this._enqueue({ kind: 'pending', resolve, reject }));
  }

  /**
   * Disposes the agent (S45): cancels everything, waits for the running host call to return, and
   * resolves once `disposed` was emitted, the log synced and released, and the driver ended.
   * Rejects with `FinalSyncError` if that last sync failed. Never await it inside a host call.
   */
  async dispose() {
    await this._input({ dispose: {} });
    const ending = await this.finished();
    if (this._finalSync) {
      throw new errors.FinalSyncError(`the final sync of the log failed: ${this._finalSync.message}`, {
        cause: this._finalSync,
      });
    }
    if (ending.kind !== 'disposed') throw this._endedError();
  }

  /**
   * Stops the driver now, without disposing: the running host call's signal is aborted and its
   * answer ignored, the log is synced and released, and the driver ends. A turn left open is
   * closed `interrupted` when the log is opened again, as after a crash.
   */
  async close() {
    if (!this._ending) {
      await new Promise((resolve) => this._enqueue({ kind: 'close', resolve, reject: resolve }));
    }
    await this.finished();
    if (this._finalSync) {
      throw new errors.FinalSyncError(`the final sync of the log failed: ${this._finalSync.message}`, {
        cause: this._finalSync,
      });
    }
  }

  /** Resolves with how the driver ended (`{kind: 'disposed' | 'closed' | 'stopped'}`) once it released its log. */
  finished() {
    if (this._ending && this._finishing === 'done') return Promise.resolve(this._ending);
    return new Promise((resolve) => this._ended.push(resolve));
  }

  /** The public status (S23): `'running'` or `'idle'`; `'idle'` once the driver ended. */
  get status() { return this._ending ? 'idle' : this._status; }
  /**
   * How the driver ended, once it has ended and released its log (`null` before): set by the
   * time a call that stopped the agent has rejected.
   */
  get ending() { return this._finishing === 'done' ? this._ending : null; }
  /**
   * The number of the last turn opened (0 before the first, S27), the running one while
   * `status` is `'running'`, as of the last input made durable: what a guarded send names. The
   * core checks the guard when the send arrives (S54).
   */
  get lastTurn() { return this._lastTurn; }

  // --- the driver ---------------------------------------------------------------------------

  _input(input) {
    return new Promise((resolve, reject) => this._enqueue({ kind: 'input', input, resolve, reject }));
  }

  _record(turn, step, events) {
    return new Promise((resolve, reject) => {
      for (const event of events) {
        if (typeof event.type !== 'string') {
          return reject(new errors.InvalidInputError('a host event needs a string `type`'));
        }
        if (MACHINE_TYPES.has(event.type)) return reject(new errors.ReservedTypeError(event.type));
      }
      const entries = events.map((event) => ({ type: event.type, data: event.data ?? null }));
      try {
        encodeRecords(1, entries); // refuses, before anything is queued, what a record cannot hold
      } catch (error) {
        return reject(error);
      }
      this._enqueue({ kind: 'record', turn, step, events: entries, resolve, reject });
    });
  }

  _enqueue(command) {
    if (this._ending) {
      command.reject(this._endedError());
      return;
    }
    this._queue.push(command);
    this._schedule();
  }

  _schedule() {
    if (this._scheduled || this._pumping) return;
    this._scheduled = true;
    // Callers that deliver in the same tick join one group.
    queueMicrotask(() => {
      this._scheduled = false;
      this._pump();
    });
  }

  async _pump() {
    if (this._pumping) return;
    this._pumping = true;
    try {
      while (!this._ending && this._queue.length > 0) {
        const head = this._queue[0];
        if (head.kind === 'pending') {
          this._queue.shift();
          const state = JSON.parse(this._m.state());
          head.resolve({ nextTurn: state.nextTurn, nextStep: state.nextStep });
        } else if (head.kind === 'close') {
          this._queue.shift();
          this._end({ kind: 'closed' });
          head.resolve();
        } else {
          await this._group();
        }
      }
    } finally {
      this._pumping = false;
    }
    if (this._ending) await this._finish();
    else if (this._queue.length > 0) this._schedule();
    else this._publishState();
  }

  /** Feeds one group to the core, holding its outputs, then commits it as one append. */
  async _group() {
    const members = [];
    const entries = [];
    const effects = [];
    while (this._queue.length > 0 && members.length < this._maxBatch) {
      const command = this._queue[0];
      if (!GROUPED.has(command.kind)) break;
      this._queue.shift();
      const outcome = this._feed(command, entries, effects);
      members.push({ command, outcome, entriesEnd: entries.length, effectsEnd: effects.length });
      // Maintenance and answers settle on their own: what they start waits for the commit.
      if (command.kind !== 'input' && command.kind !== 'record') break;
      if (this._m.isDisposed() || this._ending) break;
    }
    let first = 0;
    if (entries.length > 0) {
      try {
        first = await this._log.append(entries);
      } catch (error) {
        const failure = this._stop(error);
        // Told once the agent has ended: `ending` and `whenIdle()` say it stopped by then.
        for (const member of members) {
          const outcome = member.outcome.error ? member.outcome : { error: failure };
          this._afterEnd.push(() => settle(member.command, outcome));
        }
        return;
      }
    }
    let seq = first;
    let entriesAt = 0;
    let effectsAt = 0;
    for (const member of members) {
      for (; entriesAt < member.entriesEnd; entriesAt++) {
        this._publish({ recorded: { seq: seq++, entry: entries[entriesAt] } });
      }
      for (; effectsAt < member.effectsEnd; effectsAt++) this._carryOut(effects[effectsAt]);
    }
    this._publishState();
    for (const member of members) this._settle(member);
  }

  /** One command into the core; its events and effects join the group's buffers. */
  _feed(command, entries, effects) {
    if (command.kind === 'record') {
      const outstanding = JSON.parse(this._m.outstanding());
      const step = outstanding && outstanding.step;
      if (!step || step.turn !== command.turn || step.step !== command.step) {
        return { error: new errors.StepClosedError() };
      }
      entries.push(...command.events);
      return { ok: undefined };
    }
    let reply = JSON.parse(this._m.handle(JSON.stringify(command.input)));
    if (command.kind === 'answer' && reply.events === undefined) {
      // A host answer the core cannot take as given fails the call (S38).
      const [kind] = Object.keys(command.input);
      const fail = hostFailure('invalid-answer', kind, reply.message ?? reply.invalid ?? '');
      reply = JSON.parse(this._m.handle(JSON.stringify({ [kind]: { fail } })));
      if (reply.events === undefined) {
        // The driver answers only the request the core made (S4): a bug. Close.
        this._end({ kind: 'closed', error: new Error(`the core rejected the host's answer: ${reply.message}`) });
        return { ok: undefined };
      }
    }
    if (reply.events === undefined) {
      return {
        error: reply.rejected !== undefined
          ? errors.rejection(reply.rejected, reply.message, reply)
          : new errors.InvalidInputError(reply.invalid),
      };
    }
    entries.push(...reply.events);
    effects.push(...JSON.parse(this._m.persisted()));
    return { ok: command.kind === 'input' ? reply.found : undefined };
  }

  _settle(member) {
    const { command, outcome } = member;
    if (outcome.error) {
      settle(command, outcome);
    } else if (command.kind === 'maintenance') {
      this._runJob(command);
    } else if (command.kind === 'endMaintenance') {
      if (command.failed) command.reject(command.failure);
      else command.resolve(command.value);
    } else {
      settle(command, outcome);
    }
  }

  _runJob(command) {
    const signal = this._controller.signal;
    this._maintenance = command;
    Promise.resolve()
      .then(() => command.job(signal))
      .then(
        (value) => ({ failed: false, value }),
        (failure) => ({ failed: true, failure }),
      )
      .then((result) => {
        if (this._maintenance !== command) return;
        this._maintenance = null;
        this._enqueue({
          kind: 'endMaintenance',
          input: { maintenance: 'end' },
          ...result,
          resolve: command.resolve,
          reject: command.reject,
        });
      });
  }

  /** Carries out one effect of a durable input (the drain contract's second half). */
  _carryOut(effect) {
    if (effect.notify) {
      if (effect.notify.type === 'agent/status') this._status = effect.notify.status;
      this._publish({ notified: effect.notify });
    } else if (effect.begin) {
      this._controller = new AbortController();
      if (effect.begin.turn !== undefined) this._lastTurn = effect.begin.turn;
    } else if (effect.request) {
      if (effect.request.abort) this._controller.abort(effect.request.abort.cause);
      else this._start(effect.request);
    } else if (effect.disposed) {
      this._end({ kind: 'disposed' });
    }
  }

  /** Starts the host call the core requested; its answer is the next input. */
  _start(request) {
    const [kind] = Object.keys(request);
    const body = request[kind];
    const cx = { ...body, signal: this._controller.signal, agent: this };
    if (kind === 'step') {
      cx.record = (type, data) => this._record(body.turn, body.step, [{ type, data }]);
      cx.recordAll = (events) => this._record(body.turn, body.step, events);
    }
    const hook = this._host[kind];
    Promise.resolve()
      .then(() => (typeof hook === 'function' ? hook.call(this._host, cx) : undefined))
      .then(
        (answer) => answer ?? defaultAnswer(kind, body),
        (error) => ({ fail: hostFailure('raised', kind, String(error?.message ?? error)) }),
      )
      .then((answer) => {
        if (this._ending) return; // closed: the answer is ignored
        this._enqueue({ kind: 'answer', input: { [kind]: answer }, resolve: drop, reject: drop });
      });
  }

  _publish(update) {
    for (const listener of this._listeners) {
      try {
        listener(update);
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  _publishState() {
    if (this._idle.length === 0 || !this._m.isQuiescent() || this._queue.length > 0) return;
    const idle = this._idle;
    this._idle = [];
    for (const waiter of idle) waiter.resolve();
  }

  /** A failed append: the core is ahead of the log, so the agent stops here. */
  _stop(error) {
    this._end({ kind: 'stopped', error });
    if (error instanceof errors.IndeterminateError) return error;
    return new errors.PersistenceError(
      `the input is not durable: ${error.message}; the agent stopped, re-open it from the log`,
      { cause: error },
    );
  }

  _end(ending) {
    if (!this._ending) this._ending = ending;
  }

  _endedError() {
    switch (this._ending && this._ending.kind) {
      case 'disposed':
        return new errors.DisposedError('the machine is disposed and accepts no input');
      case 'stopped':
        return new errors.StoppedError();
      default:
        return new errors.ClosedError();
    }
  }

  /** Stops what runs, syncs and releases the log, publishes the ending, answers what waits. */
  async _finish() {
    if (this._finishing) return;
    this._finishing = 'running';
    const ending = this._ending;
    const error = this._endedError();
    this._controller.abort(error);
    if (this._maintenance) {
      const maintenance = this._maintenance;
      this._afterEnd.push(() => maintenance.reject(error));
      this._maintenance = null;
    }
    try {
      await this._log.sync();
    } catch (failure) {
      this._finalSync = failure;
    }
    await this._log.close();
    this._status = 'idle';
    this._finishing = 'done';
    this._publish({ ended: ending });
    this._listeners.clear();
    for (const command of this._queue.splice(0)) command.reject(error);
    for (const waiter of this._idle.splice(0)) {
      if (ending.kind === 'disposed') waiter.resolve();
      else waiter.reject(error);
    }
    for (const resolve of this._ended.splice(0)) resolve(ending);
    for (const settleLater of this._afterEnd.splice(0)) settleLater();
  }
}

function settle(command, outcome) {
  if (outcome.error) command.reject(outcome.error);
  else command.resolve(outcome.ok);
}

/**
 * The `fail` answer (`{message, code}`) for a host call that `failure`d: what happened is said
 * here, the code the log gets is the session layer's (`coxswain_session::HostFailure`).
 */
function hostFailure(failure, kind, detail) {
  return JSON.parse(native.hostFailure(failure, kind, detail));
}

function defaultAnswer(kind, body) {
  switch (kind) {
    case 'preStep':
      return { enter: body.messages };
    case 'turnStopping':
      return 'done';
    default:
      return { fail: hostFailure('invalid-answer', kind, 'the host has no step hook or it returned nothing') };
  }
}

function drop() {}

module.exports = { Agent };
