'use strict';
// `Agent`: the Promise-based driver of one session, an IO loop over the session layer (`Session`,
// the Rust `coxswain_session::Session`) that moves bytes (the log), time (`performance.now()`) and
// promises. Every decision is the session's: group commit (the commands waiting, up to `maxBatch`,
// staged into one batch, appended as one write, their effects and acknowledgements released in
// input order once it is persisted), the rollback of a failed batch (S5 extended: its members
// fail, the agent goes on; only an indeterminate log stops it), admission, the host-failure codes
// and the abort grace (S38, S39). Hooks run one at a time (S4) with their activity's signal (S42).

const crypto = require('node:crypto');
const errors = require('./errors');
const { INPUTS, FOUND, nativeMachine } = require('./machine');
const { Session, agentOptions } = require('./session');
const { resume, writesEncoded, appendTo } = require('./log');

/** What a hook that is missing or returns nothing answers (the step has no default). */
const DEFAULTS = { preStep: (body) => ({ enter: body.messages }), turnStopping: () => 'done' };
const [BEGIN, END] = [{ feed: { maintenance: 'begin' } }, { feed: { maintenance: 'end' } }];
/** Settled: the loop's next run is queued as a reaction to it (a microtask, as `queueMicrotask`'s, without its async resource). */
const SETTLED = Promise.resolve();

class Agent {
  constructor(host, log, session, maxBatch, nextSeq) {
    Object.assign(this, { _host: host, _log: log, _s: session, _maxBatch: maxBatch, _queue: [], _seq: nextSeq });
    Object.assign(this, { _pumping: false, _scheduled: false, _maintenance: null, _timer: null });
    Object.assign(this, { _ending: null, _finishing: null, _finalSync: null, _listeners: new Set() });
    Object.assign(this, { _idle: [], _afterEnd: [], _held: new Map(), _activity: new Activity() });
    this._finished = new Promise((resolve) => { this._resolveFinished = resolve; });
    ({ status: this._status, lastTurn: this._lastTurn } = session.state());
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
      const session = new Session(machine, o);
      agent = new Agent(host, log, session, o.maxBatch, nextSeq);
    } catch (error) {
      await log.close();
      throw error;
    }
    // A disposed session takes no input (S45): there is nothing to resume.
    if (o.resumeOnOpen && !agent._s.disposed) {
      try {
        await agent.resume();
      } catch (error) {
        await agent.close().catch(drop);
        throw error;
      }
    }
    return { agent, recovery };
  }

  runMaintenance(job) {
    return new Promise((resolve, reject) => {
      this._enqueue(command('input', BEGIN, () => this._runJob(job, resolve, reject), reject));
    });
  }
  whenIdle() {
    const ending = this._ending;
    if (ending) return ending.kind === 'disposed' ? Promise.resolve() : Promise.reject(this._endedError());
    if (!this._pumping && this._queue.length === 0 && this._s.quiescent) return Promise.resolve();
    return new Promise((resolve, reject) => this._idle.push({ resolve, reject }));
  }
  subscribe(listener) {
    if (this._finishing === 'done') queueMicrotask(() => listener({ ended: this._ending }));
    else this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }
  pending() { return this._command('barrier', () => this._s.pending()); }
  fate(id) {
    // Once ended (disposed too), the session's records still answer (S58); an id that is no
    // string is refused at the call (`InvalidInputError`), never in the loop.
    if (this._ending || typeof id !== 'string') return new Promise((resolve) => resolve(this._s.fate(id)));
    return this._command('barrier', () => this._s.fate(id));
  }
  async dispose() {
    await this._input({ dispose: {} });
    if ((await this._released()).kind !== 'disposed') throw this._endedError();
  }
  async close() {
    if (!this._ending) await this._command('barrier', () => this._end({ kind: 'closed' })).catch(drop);
    await this._released();
  }
  finished() { return this._finished; }
  get status() { return this._ending ? 'idle' : this._status; }
  get ending() { return this._finishing === 'done' ? this._ending : null; }
  get lastTurn() { return this._lastTurn; }

  // --- the loop ---------------------------------------------------------------------------
  /** A command that resolves once settled (`found`: `true` to resolve with the session's `found`, S15). */
  _command(kind, input, found) {
    return new Promise((resolve, reject) => this._enqueue(command(kind, input, resolve, reject, found)));
  }
  _input(input, found) { return this._command('input', { feed: input }, found); }
  _record(turn, step, events) {
    return new Promise((resolve, reject) => {
      const entries = events.map((event) => ({ type: event?.type, data: event?.data ?? null }));
      this._enqueue(command('record', { record: [turn, step, entries] }, resolve, reject));
    });
  }
  _enqueue(command) {
    if (this._ending) return command.reject(this._endedError());
    this._queue.push(command);
    this._schedule();
  }
  _schedule() {
    if (this._scheduled || this._pumping) return;
    this._scheduled = true;
    SETTLED.then(() => this._pump()); // callers that deliver in the same tick join one batch
  }

  async _pump() {
    this._scheduled = false;
    if (this._pumping) return;
    this._pumping = true;
    try {
      while (!this._ending && this._queue.length > 0) {
        if (this._queue[0].kind === 'barrier') {
          const head = this._queue.shift();
          head.resolve(head.input());
        } else {
          const appending = this._batch();
          if (appending !== undefined) await appending;
        }
      }
    } finally {
      this._pumping = false;
    }
    if (this._ending) await this._finish();
    else if (this._idle.length > 0 && this._s.quiescent) this._idle.splice(0).forEach((idle) => idle.resolve());
  }
  /**
   * Stages the waiting commands and seals them (one crossing), appends the batch, and reports how
   * that went: a Promise while the log appends, `undefined` once the batch is done (nothing to
   * append, or a log that appends at once: `appendTo`).
   */
  _batch() {
    // The waiting commands up to a barrier, at most `maxBatch` (arrays of their exact size).
    const queue = this._queue;
    let count = 0;
    while (count < queue.length && count < this._maxBatch && queue[count].kind !== 'barrier') count++;
    let members = queue; // all of them: the queue itself, no copy
    if (count === queue.length) this._queue = [];
    else members = queue.splice(0, count);
    const commands = new Array(count);
    for (let i = 0; i < count; i++) {
      const member = members[i];
      if (member.kind === 'timeout') member.input.timeout = performance.now();
      commands[i] = member.input;
    }
    // Encoded for the next `seq`; decoded only for a listener or a log of the host's own, whose
    // append may keep the entries for later: their lines are taken as text at once for it.
    const own = writesEncoded(this._log);
    const decoded = this._listeners.size > 0 || !own;
    const { staged, batch, entries } = this._s._stage(commands, this._seq, decoded, !own);
    const tickets = new Array(count);
    let retried = null;
    for (let i = 0; i < count; i++) {
      const member = members[i];
      const result = staged[i];
      if (typeof result === 'number') tickets[result] = member;
      else if (result?.retried) (retried ??= []).push(...this._retried(result.retried, tickets));
      else if (result !== null) member.error = result; // refused: it changed nothing (S5)
      // A stale answer (its call was abandoned, S4) is dropped; any other refused answer is a bug: close.
      const bug = member.kind === 'answer' && member.error && member.error.kind !== 'stale';
      if (bug) this._end({ kind: 'closed', error: member.error });
    }
    if (retried !== null) members.push(...retried);
    if (batch === null) {
      this._arm(this._s.pollTimeout()); // a timeout not due yet is armed again
      return settleAll(members);
    }
    let appended = this._seq;
    try {
      if (entries.length > 0) appended = appendTo(this._log, entries);
    } catch (error) {
      return this._failed(batch, members, tickets, error);
    }
    if (typeof appended === 'number') return this._appended(appended, batch, members, tickets, entries);
    return appended.then(
      (seq) => this._appended(seq, batch, members, tickets, entries),
      (error) => this._failed(batch, members, tickets, error),
    );
  }
  /** The batch is in the log from `seq` on: the session releases its effects and acknowledgements, carried out in order. */
  _appended(seq, batch, members, tickets, entries) {
    this._seq = seq + entries.length;
    if (this._listeners.size > 0) for (const entry of entries) this._publish({ recorded: { seq: seq++, entry } });
    let deadline = null; // the abort grace's, while one runs (S39)
    for (const release of this._s.persisted(batch, performance.now())) {
      if (release.refused) tickets[release.ack].error = release.refused; // judged against earlier members
      else if (release.ack !== undefined) tickets[release.ack].found &&= release.found;
      else if (release.deadline !== undefined) deadline = release.deadline;
      else this._carryOut(release);
    }
    this._arm(deadline);
    settleAll(members);
  }
  /** The batch's append failed: the session takes it back; only an indeterminate log stops the agent. */
  _failed(batch, members, tickets, error) {
    if (error instanceof errors.IndeterminateError || error instanceof errors.LogFailedError) {
      this._end({ kind: 'stopped', error });
      // Told once the agent has ended: `ending` and `whenIdle()` say it stopped by then.
      for (const member of members) this._afterEnd.push(() => settle(member, error));
      return;
    }
    // Its answers (the host's, a job's end) are the session's to stage again after its pause: their waiters wait.
    const held = this._s.failed(batch, performance.now()).held.filter((ticket) => tickets[ticket]);
    for (const ticket of held) this._held.set(`${batch}:${ticket}`, tickets[ticket]);
    const message = `the input is not in the log, nothing changed (it may be sent again): ${error.message}`;
    const failure = new errors.PersistenceError(message, { cause: error });
    for (const member of members) if (!held.some((ticket) => tickets[ticket] === member)) settle(member, failure);
    this._arm(this._s.pollTimeout()); // the retry pause, or a grace the batch's rollback put back
  }
  /** The held answers a timeout staged again: their waiters join this batch at their new tickets (or hear why not). */
  _retried(answers, tickets) {
    const joined = [];
    for (const [batch, ticket, staged] of answers) {
      const member = this._held.get(`${batch}:${ticket}`);
      this._held.delete(`${batch}:${ticket}`);
      if (member && typeof staged === 'number') joined.push(tickets[staged] = member);
      else if (member) settle(member, staged);
    }
    return joined;
  }
  _runJob(job, resolve, reject) {
    const running = { reject };
    this._maintenance = running;
    const end = (answer) => {
      if (this._maintenance !== running) return;
      this._maintenance = null;
      this._enqueue(command('input', END, answer, reject));
    };
    const settled = Promise.resolve(this._activity.signal).then(job);
    settled.then((value) => end(() => resolve(value)), (failure) => end(() => reject(failure)));
  }
  /** Carries out one released effect (the drain contract's second half). */
  _carryOut({ notify, begin, request, disposed }) {
    if (notify && notify.type === 'agent/status') this._status = notify.status;
    if (notify && this._listeners.size > 0) this._publish({ notified: notify });
    if (begin) this._activity = new Activity();
    if (begin && begin.turn !== undefined) this._lastTurn = begin.turn;
    if (request && request.abort) this._activity.abort(request.abort.cause);
    else if (request) this._start(request);
    if (disposed) this._end({ kind: 'disposed' });
  }
  /** Starts the host call the session requested; its answer (or what went wrong) is the next input. */
  _start(request) {
    const kind = request.preStep ? 'preStep' : request.step ? 'step' : 'turnStopping';
    const body = request[kind];
    // No hook: its answer (the default, or a failed call) is the next input at once, no call to run.
    if (typeof this._host[kind] !== 'function') this._enqueue(command('answer', answerInput(kind, body), drop, drop));
    else this._call(kind, body, this._activity);
  }
  /**
   * Runs one host call, after the loop's current turn: its answer, or its failure, is staged.
   * The hook runs a microtask later (after the batch that requested it has settled), and what it
   * returns is awaited as `await` does it (`Promise.resolve(…).then`): the turns of the microtask
   * queue of `await undefined; … await hook(cx)`, without an async function's frame.
   */
  _call(kind, body, activity) {
    SETTLED.then(() => {
      let answer;
      try {
        answer = this._host[kind](new CONTEXTS[kind](this, body, activity));
      } catch (error) {
        return this._raised(kind, body, error);
      }
      Promise.resolve(answer).then(
        (value) => this._answered(kind, body, value),
        (error) => this._raised(kind, body, error),
      );
    });
  }
  /** Stages the hook's answer to the call `kind` (`answerInput`: nothing is the default, or a failed call). */
  _answered(kind, body, answer) {
    const input = answerInput(kind, body, answer);
    if (!this._ending) this._enqueue(command('answer', input, drop, drop));
  }
  /** Stages the failure of the call `kind`, whose hook raised `error`. */
  _raised(kind, body, error) {
    const input = { hostFailed: [kind, body.turn, body.step ?? 0, 'raised', String(error?.message ?? error)] };
    if (!this._ending) this._enqueue(command('answer', input, drop, drop));
  }
  /** Keeps one timer on the session's deadline `at` (the abort grace): when it fires, a timeout is staged. */
  _arm(at) {
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
    if (at === null) return;
    const wait = Math.min(0x7fffffff, Math.max(0, Math.ceil(at - performance.now())));
    this._timer = setTimeout(() => this._enqueue(command('timeout', { timeout: 0 }, drop, drop)), wait);
  }
  _publish(update) {
    for (const listener of this._listeners) {
      try { listener(update); } catch { /* a listener's failure is its own */ }
    }
  }
  _end(ending) { this._ending ??= ending; }
  _endedError() {
    const kind = this._ending && this._ending.kind;
    if (kind === 'disposed') return new errors.DisposedError('the machine is disposed and accepts no input');
    return kind === 'stopped' ? new errors.StoppedError() : new errors.ClosedError();
  }
  /** How the agent ended, once it has; `FinalSyncError` if its last sync failed. */
  async _released() {
    const [ending, cause] = [await this._finished, this._finalSync];
    if (cause) throw new errors.FinalSyncError(`the final sync of the log failed: ${cause.message}`, { cause });
    return ending;
  }
  /** Stops what runs, syncs and releases the log, publishes the ending, answers what waits. */
  async _finish() {
    if (this._finishing) return;
    this._finishing = 'running';
    const ending = this._ending;
    const error = this._endedError();
    clearTimeout(this._timer);
    this._activity.abort(error);
    const maintenance = this._maintenance;
    if (maintenance) this._afterEnd.push(() => maintenance.reject(error));
    for (const member of this._held.values()) this._afterEnd.push(() => member.reject(error));
    [this._maintenance, this._held] = [null, new Map()];
    try { await this._log.sync(); } catch (failure) { this._finalSync = failure; }
    await this._log.close();
    this._status = 'idle';
    this._finishing = 'done';
    this._publish({ ended: ending });
    this._listeners.clear();
    for (const waiting of this._queue.splice(0)) waiting.reject(error);
    for (const idle of this._idle.splice(0)) ending.kind === 'disposed' ? idle.resolve() : idle.reject(error);
    this._resolveFinished(ending);
    for (const settleLater of this._afterEnd.splice(0)) settleLater();
  }
}

// The input methods (`send`, `followup`, `remove`, …): each stages its input and resolves once durable.
for (const [name, input] of Object.entries(INPUTS)) {
  const found = FOUND.has(name) || undefined;
  Agent.prototype[name] = function (...args) { return this._input(input(...args), found); };
}

/**
 * One activity (a turn, or a maintenance job): its abort signal, made when a hook first asks
 * for it or when the activity is aborted (S39), so an activity nobody watches costs no
 * `AbortController`.
 */
class Activity {
  constructor() {
    this._controller = null;
  }
  get signal() {
    return (this._controller ??= new AbortController()).signal;
  }
  abort(reason) {
    (this._controller ??= new AbortController()).abort(reason);
  }
}

/**
 * A context's `signal`: its activity's, made when first read. An own enumerable accessor, so a
 * spread copy of the context (`{ ...cx }`) carries the signal as the context does.
 */
const SIGNAL = { get() { return this._activity.signal; }, enumerable: true, configurable: true };

/** What a pre-step hook is handed: the request's fields, its activity's signal, the agent. */
class PreStepContext {
  constructor(agent, body, activity) {
    this.turn = body.turn;
    this.step = body.step;
    this.messages = body.messages;
    Object.defineProperty(this, 'signal', SIGNAL);
    this.agent = agent;
    this._activity = activity;
  }
}

/** What a step hook is handed: as a pre-step's, with `record` and `recordAll` (host events inside the step). */
class StepContext {
  constructor(agent, body, activity) {
    const { turn, step } = body;
    this.turn = turn;
    this.step = step;
    Object.defineProperty(this, 'signal', SIGNAL);
    this.agent = agent;
    this._activity = activity;
    // Own functions, so a hook may destructure them (`async step({ record })`).
    this.record = (type, data) => agent._record(turn, step, [{ type, data }]);
    this.recordAll = (events) => agent._record(turn, step, events);
  }
}

/** What a turn-stopping hook is handed. */
class TurnStoppingContext {
  constructor(agent, body, activity) {
    this.turn = body.turn;
    Object.defineProperty(this, 'signal', SIGNAL);
    this.agent = agent;
    this._activity = activity;
  }
}

const CONTEXTS = { preStep: PreStepContext, step: StepContext, turnStopping: TurnStoppingContext };

/**
 * The input answering the call `kind` to the request `body` (of its turn and step: a late one
 * is stale, S4) with what its hook returned: nothing (or no hook) is the default answer, if the
 * call has one, else a failed call.
 */
function answerInput(kind, body, answer) {
  const turn = body.turn;
  const step = body.step ?? 0;
  const given = answer ?? DEFAULTS[kind]?.(body);
  if (given !== undefined) return { answer: [kind, turn, step, answerOf(kind, given)] };
  return { hostFailed: [kind, turn, step, 'invalid-answer', `the host has no ${kind} hook or it returned nothing`] };
}

/** `{[kind]: given}`, each key written out (a computed key costs a call into the runtime). */
function answerOf(kind, given) {
  switch (kind) {
    case 'preStep':
      return { preStep: given };
    case 'step':
      return { step: given };
    default:
      return { turnStopping: given };
  }
}

/** A command for the loop, one shape for all: `input` is what it stages (a session command) or the barrier. */
function command(kind, input, resolve, reject, found = undefined) {
  return { kind, input, resolve, reject, found, error: null };
}

/** Answers a member: its own refusal first, else `error`, else its acknowledgement. */
function settle(member, error) {
  if (member.error || error) member.reject(member.error ?? error);
  else member.resolve(member.found);
}

/** Answers each member, in order (`settle`). */
function settleAll(members) {
  for (let i = 0; i < members.length; i++) settle(members[i]);
}

function drop() {}

module.exports = { Agent };
