'use strict';
// `Agent`: the Promise-based driver of one agent, an IO loop over the session layer's agent loop
// (`Loop`, the Rust `coxswain_session::AgentLoop`). It moves bytes (the log's appends), time
// (`performance.now()`, one timer) and promises; the loop decides everything else: which
// commands make a batch, who waits for what, the stop policy (a failed append fails its members
// and the agent goes on; an indeterminate or fenced one stops it), what a refused or stale host
// answer means, the abort grace (S38, S39), the answers of hooks the host did not write or that
// return nothing, and the defaults. Hooks run one at a time (S4) with their activity's signal (S42).

const crypto = require('node:crypto');
const errors = require('./errors');
const { INPUTS, FOUND, nativeMachine, fateOf } = require('./machine');
const { Loop } = require('./session');
const { agentOptions } = require('./options');
const { resume, writesEncoded, appendTo } = require('./log');
const { Activity, CONTEXTS, answerOf } = require('./hooks');

/** Settled: the loop's next run is queued as a reaction to it (a microtask, without `queueMicrotask`'s async resource). */
const SETTLED = Promise.resolve();
const [FAILED, INDETERMINATE, FENCED] = [1, 2, 3]; // a failed append, as the loop is told (src/session.rs `appended`)

class Agent {
  constructor(host, log, loop) {
    Object.assign(this, { _host: host, _log: log, _s: loop, _queue: [], _waiters: new Map(), _next: 0 });
    Object.assign(this, { _scheduled: false, _writing: false, _timer: null, _quiescent: true, _job: null });
    Object.assign(this, { _ending: null, _finishing: null, _finalSync: null, _appendError: null });
    Object.assign(this, { _listeners: new Set(), _idle: [], _activity: new Activity() });
    this._finished = new Promise((resolve) => { this._resolveFinished = resolve; });
    ({ status: this._status, lastTurn: this._lastTurn, quiescent: this._quiescent } = loop.state());
  }

  /**
   * Opens an agent on `log`, empty or holding a session to resume (the session layer's plan,
   * S46–S50, with crash repair's redelivery allowance `redelivery`, S59). With `resumeOnOpen`,
   * `resume` (S57) is the agent's first input, durable before `open` resolves: parked waking
   * work (restored, or redelivered) starts without waiting for a new delivery.
   */
  static async open(host, log, options = {}) {
    const o = agentOptions(options);
    let agent;
    let recovery;
    try {
      // Ids come from callers: key the core's id indexes with a random seed (HashDoS).
      const machine = nativeMachine(o.memory, o.maxPending, crypto.randomBytes(8).toString('hex'));
      let nextSeq;
      ({ recovery, nextSeq } = await resume(log, machine, o.redelivery));
      // The hooks the host wrote: the loop answers the others itself (decision 1).
      const hooks = { preStep: typeof host.preStep === 'function', turnStopping: typeof host.turnStopping === 'function' };
      agent = new Agent(host, log, new Loop(machine, o, hooks, nextSeq));
    } catch (error) {
      await log.close();
      throw error;
    }
    // A disposed session takes no input (S45): there is nothing to resume.
    if (o.resumeOnOpen && !agent._s.state().disposed) {
      try {
        await agent.resume();
      } catch (error) {
        await agent.close().catch(drop);
        throw error;
      }
    }
    return { agent, recovery };
  }

  runMaintenance(job) { return this._command((w) => ({ maintenance: w }), false, job); }
  whenIdle() {
    const ending = this._ending;
    if (ending) return ending.kind === 'disposed' ? Promise.resolve() : Promise.reject(this._endedError());
    if (this._isIdle()) return Promise.resolve();
    return new Promise((resolve, reject) => this._idle.push({ resolve, reject }));
  }
  subscribe(listener) {
    if (this._finishing === 'done') queueMicrotask(() => listener({ ended: this._ending }));
    else this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }
  pending() { return this._command((w) => ({ pending: w })); }
  fate(id) { // an id that is no string is refused at the call (`InvalidInputError`), never in the loop
    return typeof id === 'string' ? this._command((w) => ({ fate: [w, id] })) : new Promise((ok) => ok(fateOf(null, id)));
  }
  async dispose() {
    await this._input({ dispose: {} });
    if ((await this._released()).kind !== 'disposed') throw this._endedError();
  }
  async close() {
    await this._command((w) => ({ close: w })).catch(drop);
    await this._released();
  }
  finished() { return this._finished; }
  get status() { return this._ending ? 'idle' : this._status; }
  get ending() { return this._finishing === 'done' ? this._ending : null; }
  get lastTurn() { return this._lastTurn; }

  // --- the IO loop ------------------------------------------------------------------------
  /** A caller's command (`make(w)`, `w` its waiter): resolves with its reply (`found`: an edit's `found`, S15). */
  _command(make, found = false, job = null) {
    return new Promise((resolve, reject) => {
      const w = (this._next = (this._next + 1) >>> 0);
      this._waiters.set(w, { resolve, reject, found, job, outcome: null });
      this._enqueue(make(w));
    });
  }
  _input(input, found) { return this._command((w) => ({ input: [w, input] }), found); }
  _record(turn, step, events) {
    const entries = events.map((event) => ({ type: event?.type, data: event?.data ?? null }));
    return this._command((w) => ({ record: [w, turn, step, entries] }));
  }
  _enqueue(command) {
    this._queue.push(command);
    this._schedule();
  }
  _schedule() {
    if (this._scheduled || this._writing) return;
    this._scheduled = true;
    SETTLED.then(() => this._pump()); // commands given in the same tick cross together
  }
  _pump() {
    this._scheduled = false;
    if (this._writing || this._queue.length === 0) return;
    const commands = this._queue;
    this._queue = [];
    // Decoded entries for a listener, or for a log of the host's own (its lines taken as text at once).
    const own = writesEncoded(this._log);
    this._s.carry(this._listeners.size > 0 || !own, !own);
    this._carryOut(this._s.submit(commands));
  }
  /** Carries out a turn's outputs, then appends its batch and carries out the next turn, until none is to append. */
  _carryOut(turn) {
    for (;;) {
      for (let k = 0; k < turn.outputs.length; k++) this._output(turn.outputs[k]);
      if (turn.append === null) break;
      turn = this._write(turn.append);
      if (turn === undefined) return; // appending: `_appended` goes on
    }
    this._quiescent = turn.quiescent;
    this._arm(turn.deadline);
    if (this._queue.length > 0) this._schedule();
    else if (this._idle.length > 0 && this._isIdle()) this._idle.splice(0).forEach((idle) => idle.resolve());
  }
  /** Appends a batch (`appendTo`: at once for a `MemoryLog`): the next turn, or `undefined` while the log appends. */
  _write(append) {
    let seq;
    try {
      seq = appendTo(this._log, append.entries);
    } catch (error) {
      return this._appended(error, 0, append);
    }
    if (typeof seq === 'number') return this._appended(null, seq, append);
    this._writing = true;
    seq.then(
      (first) => this._carryOut(this._appended(null, first, append)),
      (error) => this._carryOut(this._appended(error, 0, append)),
    );
    return undefined;
  }
  /** Tells the loop how the append went (`error`: the log's, or `null`): its turn. */
  _appended(error, seq, { entries, count }) {
    this._writing = false;
    this._appendError = error;
    if (error === null && this._listeners.size > 0 && Array.isArray(entries)) {
      for (let k = 0; k < count; k++) this._publish({ recorded: { seq: seq + k, entry: entries[k] } });
    }
    return this._s.appended(error === null ? 0 : failureOf(error), performance.now(), seq, count);
  }
  /** Carries out one output of the loop. */
  _output(o) {
    if (o.reply !== undefined) return this._reply(o);
    if (o.startJob !== undefined) return this._runJob(o.startJob);
    if (o.ended !== undefined) return this._end(o);
    if (o.abandoned) return undefined; // its late answer is the loop's to drop
    const { notify, begin, request } = o;
    if (notify && notify.type === 'agent/status') this._status = notify.status;
    if (notify && this._listeners.size > 0) this._publish({ notified: notify });
    if (begin) this._activity = new Activity();
    if (begin && begin.turn !== undefined) this._lastTurn = begin.turn;
    if (request && request.abort) this._activity.abort(request.abort.cause);
    else if (request) this._call(request);
    return undefined;
  }
  /** Answers a waiter: its value, or its failure as the typed error (decision 7's kinds). */
  _reply({ reply, found, value, error, failed }) {
    const waiter = this._waiters.get(reply);
    if (waiter === undefined) return;
    this._waiters.delete(reply);
    if (failed !== undefined) error = this._failure(failed);
    if (error === undefined && waiter.outcome !== null) ({ value, error } = waiter.outcome); // a job's own
    if (error !== undefined) waiter.reject(error);
    else waiter.resolve(waiter.found ? found : value);
  }
  _failure(kind) {
    const cause = this._appendError;
    if (kind === 'indeterminate') return cause instanceof errors.IndeterminateError ? cause : new errors.IndeterminateError('the append may or may not be in the log', { cause });
    if (kind !== 'persistence') return this._endedError(kind);
    const message = `the input is not in the log, nothing changed (it may be sent again): ${cause?.message}`;
    return new errors.PersistenceError(message, { cause });
  }
  /** A maintenance job's beginning is durable: it runs with its activity's signal, then its end is the loop's. */
  _runJob(w) {
    const waiter = this._waiters.get(w);
    if (waiter === undefined) return;
    this._job = w;
    const end = (outcome) => {
      if (this._job !== w) return; // failed already: the agent ended
      [this._job, waiter.outcome] = [null, outcome];
      this._enqueue({ jobEnded: w });
    };
    Promise.resolve(this._activity.signal).then(waiter.job).then((value) => end({ value }), (error) => end({ error }));
  }
  /**
   * Runs one host call a microtask after the turn that requested it: its answer, nothing
   * (`undefined` / `null`: the loop's default answer, decision 2) or its failure goes to the
   * loop. What the hook returns is awaited as `await` does it (`Promise.resolve(…).then`).
   */
  _call(request) {
    const kind = request.preStep ? 'preStep' : request.step ? 'step' : 'turnStopping';
    const body = request[kind];
    const [turn, step, activity] = [body.turn, body.step ?? 0, this._activity];
    const give = (command) => this._ending || this._enqueue(command);
    const answered = (value) => give(value == null ? { nothing: [kind, turn, step] } : { answer: [kind, turn, step, answerOf(kind, value)] });
    const raised = (error) => give({ hostFailed: [kind, turn, step, 'raised', String(error?.message ?? error)] });
    SETTLED.then(() => {
      if (typeof this._host[kind] !== 'function') return answered(undefined);
      let answer;
      try {
        answer = this._host[kind](new CONTEXTS[kind](this, body, activity));
      } catch (error) {
        return raised(error);
      }
      return Promise.resolve(answer).then(answered, raised);
    });
  }
  /** Keeps one timer on the loop's deadline `at` (the abort grace, the retry pause). */
  _arm(at) {
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
    if (at === null || this._finishing) return;
    const wait = Math.min(0x7fffffff, Math.max(0, Math.ceil(at - performance.now())));
    this._timer = setTimeout(() => {
      this._timer = null;
      if (!this._writing) this._carryOut(this._s.timeout(performance.now()));
    }, wait);
  }
  _isIdle() { return !this._writing && !this._scheduled && this._queue.length === 0 && this._quiescent; }
  _publish(update) {
    for (const listener of this._listeners) try { listener(update); } catch { /* a listener's failure is its own */ }
  }
  _endedError(kind = this._ending?.kind) {
    if (kind === 'disposed') return new errors.DisposedError('the machine is disposed and accepts no input');
    if (kind !== 'stopped') return new errors.ClosedError();
    if (this._why !== FENCED) return new errors.StoppedError();
    return new errors.StoppedError('the agent stopped: another writer owns the session; re-open it from the log');
  }
  /** How the agent ended, once it has; `FinalSyncError` if its last sync failed. */
  async _released() {
    const [ending, cause] = [await this._finished, this._finalSync];
    if (cause) throw new errors.FinalSyncError(`the final sync of the log failed: ${cause.message}`, { cause });
    return ending;
  }
  /** The agent ends (the loop's word): stop what runs, sync and release the log, publish the ending, answer what waits. */
  async _end({ ended, why }) {
    if (this._ending) return;
    // A stopped agent's ending carries the log's failure that stopped it.
    this._ending = ended === 'stopped' ? { kind: ended, error: this._appendError } : { kind: ended };
    [this._why, this._finishing] = [why, 'running'];
    const error = this._endedError();
    clearTimeout(this._timer);
    this._activity.abort(error);
    const job = this._job; // a job that runs is failed once the ending is published
    this._job = null;
    try { await this._log.sync(); } catch (failure) { this._finalSync = failure; }
    await this._log.close();
    this._status = 'idle';
    this._finishing = 'done';
    this._publish({ ended: this._ending });
    this._listeners.clear();
    for (const idle of this._idle.splice(0)) ended === 'disposed' ? idle.resolve() : idle.reject(error);
    this._resolveFinished(this._ending);
    if (job !== null) this._reply({ reply: job, error });
    this._carryOut(this._s.finish());
  }
}

// The input methods (`send`, `followup`, `remove`, …): each stages its input and resolves once durable.
for (const [name, input] of Object.entries(INPUTS)) {
  const found = FOUND.has(name);
  Agent.prototype[name] = function (...args) { return this._input(input(...args), found); };
}

/** How a failed append is told to the loop (decision 4): only an indeterminate or a fenced log stops the agent. */
function failureOf(error) {
  if (error instanceof errors.IndeterminateError) return INDETERMINATE;
  if (error instanceof errors.LogFailedError || error instanceof errors.LockedError) return FENCED;
  if (error instanceof errors.LogIoError && error.kind === 'fenced') return FENCED;
  return FAILED;
}

function drop() {}

module.exports = { Agent };
