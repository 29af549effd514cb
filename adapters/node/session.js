'use strict';
// `Session`: the session layer (the Rust `coxswain_session::Session`, sans-IO) for a harness that
// runs its own IO loop, as `Agent` does. Inputs and host events are staged into a numbered batch
// (`feed`, `answer`, `record`, `hostFailed`: each returns its ticket, its index in the batch, or
// throws the typed refusal, having changed nothing, S5); `seal()` hands out the batch's entries
// to append as one write; `persisted(batch, now)` then releases every member's effects and
// acknowledgement in input order, or `failed(batch)` takes the whole batch back (S5 extended to
// a failed persistence). Time is a number the host passes, in milliseconds (`performance.now()`):
// the abort grace is `pollTimeout()` and `handleTimeout(now)` (S38, S39). Every decision is the
// Rust session's; this class only converts.

const native = require('./native');
const errors = require('./errors');
const { encode, parse } = require('./json');
const tape = require('./tape');
const { Machine, capacity, bound, redelivery, fateOf, plainFields, WORDS, PRESETS, UNBOUNDED } = require('./machine');
const { ENCODED } = require('./log');

const MAX_CAPACITY = 1 << 20;
/** The default admission bound (S55), as the tokio adapter's `Options::max_pending`. */
const DEFAULT_MAX_PENDING = 10_000;

const NO_INPUTS = [];

/** The only field of a plain object, or `undefined` (not a plain object, or not one field). */
function soleKey(object) {
  if (object === null || typeof object !== 'object' || Object.getPrototypeOf(object) !== Object.prototype) return undefined;
  let only;
  for (const key in object) {
    if (only !== undefined) return undefined;
    only = key;
  }
  return only;
}

/** `object[key]` when `key` is the plain object's only field, else `undefined`. */
function soleField(object, key) {
  return soleKey(object) === key ? object[key] : undefined;
}

/**
 * `{preset, fields, text, inputs}` for the command `{feed: {followup: message}}` (or a steer's,
 * an inject's: `PRESETS`) whose message JSON can carry: its three strings (`plainFields`), else
 * its JSON text; else `undefined` (it goes as JSON text, or one at a time when JSON cannot
 * carry it).
 */
function deliveryOf(command) {
  if (command?.feed === undefined) return undefined; // no `feed` field: not a delivery (soleField's answer too)
  const input = soleField(command, 'feed');
  const name = soleKey(input);
  if (name === undefined || !Object.hasOwn(PRESETS, name)) return undefined;
  const preset = PRESETS[name];
  const message = input[name];
  const fields = plainFields(message);
  if (fields !== undefined) return { preset, fields, text: null, inputs: [message] };
  try {
    return { preset, fields, text: encode(message), inputs: [message] };
  } catch {
    return undefined;
  }
}

/** A staged member's ticket, or its refusal thrown as the typed error. */
function staged(reply) {
  if (typeof reply === 'number') return reply;
  throw errors.refusal(JSON.parse(reply));
}

/**
 * A sealed batch's log lines (`entries[ENCODED]`, log.js): `{seq, bytes, turnEnd}` and the
 * lines, numbered from `seq`, which the session holds until the batch is persisted or failed.
 * `lines` takes them as text (at its first read); `writeInto(buffer, offset)` copies their
 * `bytes` (UTF-8) into a `Buffer` instead, with no string made (`MemoryLog`).
 */
class HeldLines {
  constructor(hot, seq, bytes, turnEnd) {
    this.seq = seq;
    this.bytes = bytes;
    this.turnEnd = turnEnd;
    this._hot = hot;
    this._text = undefined;
  }
  /** The lines (text). */
  get lines() {
    return this.take();
  }
  /** Takes the lines as text from the session (once: then they are this object's). */
  take() {
    return (this._text ??= this._hot.takeLines());
  }
  /** Writes the lines into `buffer` at `offset` (room for `bytes` there): their length in bytes. */
  writeInto(buffer, offset) {
    const written = this._text === undefined ? this._hot.takeLinesInto(buffer, offset) : -1;
    return written >= 0 ? written : buffer.write(this.lines, offset, 'utf8');
  }
}

class Session {
  /**
   * A session over `machine` (a `Machine`, fresh or restored), whose state it takes: `machine`
   * is left fresh. Options (checked, `InvalidOptionsError`): `abortGraceMs` (default 5000,
   * `Infinity`: never), `maxIdBytes` (default 256), `maxMessageBytes` (default 1 MiB) and
   * `retryAfterMs` (default 100: the pause after a failed batch before the session stages
   * the answers it held again).
   */
  constructor(machine = new Machine(), options = {}) {
    const o = sessionOptions(options);
    if (machine instanceof Machine) machine._flush(); // the caller's persisted word, passed on
    const inner = machine instanceof Machine ? machine._inner : machine;
    this._inner = new native.NativeSession(inner, o.abortGraceMs, o.maxIdBytes, o.maxMessageBytes, o.retryAfterMs);
    /** The hot path: functions bound to the session's core (`stageTape`, `stageWord`, `takeLines`, …). */
    this._hot = this._inner.hotPath();
    /** The hot path's staging of a delivery of a message's three strings, by preset code (`PRESETS`). */
    this._stageFields = [this._hot.stageFields0, this._hot.stageFields1, this._hot.stageFields2];
    /** Whether the hot path's stage replies carry the entries (`withEntries`, told when it changes). */
    this._withEntries = true;
    /** The frozen messages the session names by handle (taken with the machine's, tape.js). */
    this._messages = machine instanceof Machine ? machine._messages : new tape.Messages();
    /** Whether the machine is quiescent, as the last stage or persisted reply said; `null`: ask. */
    this._quiescent = null;
  }

  /**
   * Stages `commands` in order and seals the batch, in one crossing: `{staged, batch, entries}`,
   * `staged[i]` the i-th command's ticket, its refusal (the typed error, as the methods below
   * throw it), `null` (a timeout not due) or, for a timeout, `{retried}` (see `handleTimeout`); `batch` and `entries` are `null` when nothing was
   * staged. A command is `{feed: input}`, `{record: [turn, step, events]}`, `{timeout: nowMs}`,
   * `{answer: [call, turn, step, input]}` or `{hostFailed: [call, turn, step, failure, detail]}`
   * (the arguments of the methods below). With `firstSeq` (the `seq` the log's next record
   * takes), `entries` carry their log lines already encoded (`entries[ENCODED]`), which
   * `FileLog` and `MemoryLog` write as they are.
   */
  stage(commands, firstSeq = null) {
    return this._stage(commands, firstSeq, true, true);
  }

  /**
   * `stage`; without `withEntries` the entries are not decoded (an agent whose log writes the
   * encoded lines, with no listener to show them to): `entries` is then `{length}` with only
   * their encoding (`entries[ENCODED]`). With `takeLines` the encoding's lines are taken as
   * text now; else they stay the session's (`HeldLines`) until the batch is persisted or
   * failed, for the log's `append` to take (this module's logs take them as they append).
   */
  _stage(commands, firstSeq, withEntries, takeLines = false) {
    this._quiescent = null;
    const first = firstSeq ?? undefined;
    if ((withEntries !== false) !== this._withEntries) {
      this._withEntries = withEntries !== false;
      this._hot.withEntries(this._withEntries);
    }
    let reply;
    let inputs = NO_INPUTS;
    const delivery = commands.length === 1 ? deliveryOf(commands[0]) : undefined;
    if (delivery !== undefined) {
      const { preset, fields, text } = delivery;
      reply = fields === undefined
        ? this._hot.stageDeliver(preset, text, first)
        : this._stageFields[preset](fields[0], fields[1], fields[2], first);
      inputs = delivery.inputs;
    } else if (commands.length === 1) {
      reply = this._stageOne(commands[0], first);
    }
    if (reply === undefined) {
      let text;
      try {
        text = encode(commands);
      } catch {
        return this._stageEach(commands); // a value JSON cannot carry (NaN, a cycle, a BigInt): one at a time
      }
      inputs = tape.messagesOfCommands(commands);
      reply = this._hot.stageTape(text, first);
    }
    const result = tape.staged(reply, this._messages, inputs);
    const { staged, batch, quiescent } = result;
    this._quiescent = quiescent;
    for (let i = 0; i < staged.length; i++) {
      if (staged[i] !== null && typeof staged[i] === 'object') staged[i] = typed(staged[i]);
    }
    if (batch === null) return { staged, batch, entries: null };
    const entries = result.entries ?? { length: result.count };
    if (result.lines !== null) {
      const held = new HeldLines(this._hot, firstSeq, result.lines, result.turnEnd);
      if (takeLines) held.take();
      entries[ENCODED] = held;
    }
    return { staged, batch, entries };
  }

  /**
   * The tape of one answer staged without text (a word, or `enter` of messages the session
   * handed out), or `undefined` for any other command (it goes as JSON text).
   */
  _stageOne(command, first) {
    const answer = command.answer;
    if (!Array.isArray(answer) || answer.length !== 4) return undefined;
    const [call, turn, step, input] = answer;
    if (!Number.isSafeInteger(turn) || !Number.isSafeInteger(step) || turn < 0 || step < 0) return undefined;
    const given = soleField(input, call);
    if (typeof given === 'string') {
      const word = WORDS[call]?.[given];
      return word === undefined ? undefined : this._hot.stageWord(word, turn, step, first);
    }
    const batch = call === 'preStep' ? soleField(given, 'enter') : undefined;
    if (!Array.isArray(batch)) return undefined;
    if (batch.length === 1) {
      const handle = this._messages.handleOf.get(batch[0]);
      return handle === undefined ? undefined : this._hot.stageEnterOne(turn, step, handle, first);
    }
    const handles = new Array(batch.length);
    for (let k = 0; k < batch.length; k++) {
      handles[k] = this._messages.handleOf.get(batch[k]);
      if (handles[k] === undefined) return undefined;
    }
    return this._hot.stageEnter(turn, step, handles, first);
  }

  /** `stage`, one command at a time: one JSON cannot hold is refused alone (an answer fails its call, S38). */
  _stageEach(commands) {
    const staged = commands.map((command) => {
      try {
        if (command.feed) return this.feed(command.feed);
        if (command.record) return this.record(...command.record);
        if (command.hostFailed) return this.hostFailed(...command.hostFailed);
        if (command.timeout !== undefined) return this.handleTimeout(command.timeout) ?? null;
        const [call, turn, step, input] = command.answer;
        let text;
        try {
          text = encode(input);
        } catch (error) {
          return this.hostFailed(call, turn, step, 'invalid-answer', error.message);
        }
        this._quiescent = null;
        return staged(this._inner.answer(call, turn, step, text));
      } catch (error) {
        if (error instanceof errors.CoxswainError) return error;
        return new errors.InvalidInputError(`not JSON: ${error.message}`);
      }
    });
    const sealed = this.seal();
    return { staged, batch: sealed ? sealed.batch : null, entries: sealed ? sealed.entries : null };
  }
  /** Stages an input (FORMAT.md "Inputs"); throws its refusal (`RejectedError`, `InvalidInputError`…). */
  feed(input) {
    this._quiescent = null;
    return staged(this._inner.feed(encode(input)));
  }
  /**
   * Stages the answer (`{preStep: …}`, `{step: …}`, `{turnStopping: …}`) of the host call `call`
   * to the request of turn `turn`, step `step`: a refusal `stale` unless that request is
   * outstanding (the late answer of an abandoned call, S4); an answer of the wrong shape, or
   * too deep for the log, fails the call instead (`host-invalid-answer`, S38).
   */
  answer(call, turn, step, input) {
    this._quiescent = null;
    return staged(this._inner.answer(call, turn, step ?? 0, encode(input)));
  }
  /**
   * Answers that request `fail` on the host's behalf: `failure` is what happened (`'panicked' |
   * 'raised' | 'cancelled' | 'abandoned' | 'invalid-answer'`), the code is the session layer's.
   */
  hostFailed(call, turn, step, failure, detail = '') {
    this._quiescent = null;
    return staged(this._inner.hostFailed(call, turn, step ?? 0, failure, detail));
  }
  /** Stages host events inside step `step` of turn `turn` (`StepClosedError` otherwise, `ReservedTypeError`). */
  record(turn, step, events) {
    this._quiescent = null;
    return staged(this._inner.record(turn, step, encode(events)));
  }
  /** Seals the staged batch: `{batch, entries}` (append the entries as one write), or `null` if none is staged. */
  seal() {
    const sealed = this._inner.seal();
    return sealed === null ? null : parse(sealed);
  }
  /**
   * The sealed batch is durable at `nowMs`: its releases in input order, each member's effects
   * then `{ack, found}` (or `{ack, refused}`: its refusal, judged against the batch's earlier
   * members, stands now), and last `{deadline}` while an abort grace runs.
   */
  persisted(batch, nowMs) {
    this._quiescent = null;
    const { released, quiescent } = tape.releases(this._hot.persistedTape(batch, nowMs), this._messages);
    this._quiescent = quiescent;
    for (const release of released) if (release.refused) release.refused = errors.refusal(release.refused);
    return released;
  }
  /**
   * The sealed batch was not made durable at `nowMs`: `{members, held}`, the tickets of the
   * members that failed and of those whose answer (the host's, a job's end) the session holds
   * and stages again once its retry pause is over (`handleTimeout`): their waiters wait for that.
   */
  failed(batch, nowMs = performance.now()) {
    this._quiescent = null;
    return JSON.parse(this._inner.failed(batch, nowMs));
  }
  /** When to call `handleTimeout` next (milliseconds of the host's clock: a retry pause's end, an abort grace's), or `null`. */
  pollTimeout() { return this._inner.pollTimeout(); }
  /**
   * Time has reached `nowMs`: what the session staged, or `null`. The ticket of the
   * `host-abandoned` answer of a call that outlived its grace (drop that call), or `{retried:
   * [[batch, ticket, staged]…]}`: the held answers staged again, each with its new ticket or
   * the refusal that stops it now (tell its waiter). Call again while `pollTimeout()` is due.
   */
  handleTimeout(nowMs) {
    this._quiescent = null;
    const result = JSON.parse(this._inner.handleTimeout(nowMs));
    return result !== null && typeof result === 'object' ? typed(result) : result;
  }

  /** The machine's state, with the staged inputs applied. */
  state() { return parse(this._inner.state()); }
  /** The pending lists (NT and NS, in order). */
  pending() { return tape.pending(this._inner.pendingTape(), this._messages); }
  /** No turn and no maintenance runs (S44). */
  get quiescent() { return this._quiescent ?? this._inner.isQuiescent(); }
  /** Disposed (S45). */
  get disposed() { return this._inner.isDisposed(); }
  /** The request the machine waits on, or `null`. */
  get outstanding() { return JSON.parse(this._inner.outstanding()); }
  /** The seed of the id indexes' hasher, as 16 hex digits. */
  get hashSeed() { return this._inner.hashSeed(); }
  /**
   * What became of the message id `id` (S58), as `Machine.fate` answers (with the staged inputs
   * applied): a query, answered in every phase, also once disposed.
   */
  fate(id) { return fateOf(this._inner, id); }
}

/**
 * `Agent.open`'s options, checked (`InvalidOptionsError`; `InvalidRedeliveryError` for the
 * allowance, checked first), with their defaults. `redelivery` (S59, default 0) is crash
 * repair's allowance; `resumeOnOpen` (default false: S48 unchanged) sends `resume` (S57) once
 * the agent is open.
 */
function agentOptions(options) {
  const redeliver = redelivery(options.redelivery);
  const resumeOnOpen = options.resumeOnOpen ?? false;
  if (typeof resumeOnOpen !== 'boolean') {
    throw new errors.InvalidOptionsError(`resumeOnOpen ${String(resumeOnOpen)} is not a boolean`);
  }
  const memory = capacity(options.memory ?? 256);
  const maxBatch = options.maxBatch ?? 64;
  const maxPending = bound(options.maxPending === undefined ? DEFAULT_MAX_PENDING : options.maxPending);
  if (memory !== UNBOUNDED && memory > MAX_CAPACITY) {
    throw new errors.InvalidOptionsError(`memory ${memory} is above ${MAX_CAPACITY}`);
  }
  if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_CAPACITY) {
    throw new errors.InvalidOptionsError(`maxBatch ${maxBatch} is not within 1..=${MAX_CAPACITY}`);
  }
  return { memory, maxBatch, maxPending, redelivery: redeliver, resumeOnOpen, ...sessionOptions(options) };
}

/** A refusal as its typed error; a timeout's `{retried}` with its refusals typed. */
function typed(result) {
  if (!result.retried) return errors.refusal(result);
  const retried = result.retried.map(([batch, ticket, staged]) =>
    [batch, ticket, typeof staged === 'number' ? staged : errors.refusal(staged)]);
  return { retried };
}

/** The session's options, checked; `null`: the session layer's default. */
function sessionOptions(options) {
  const [grace, retry] = [options.abortGraceMs ?? null, options.retryAfterMs ?? null];
  if (grace !== null && !(typeof grace === 'number' && grace >= 0)) {
    throw new errors.InvalidOptionsError(`abortGraceMs ${grace} is not a number >= 0 (Infinity: never)`);
  }
  if (retry !== null && !(typeof retry === 'number' && retry >= 0 && retry < Infinity)) {
    throw new errors.InvalidOptionsError(`retryAfterMs ${retry} is not a finite number >= 0`);
  }
  const [maxIdBytes, maxMessageBytes] = [size(options, 'maxIdBytes'), size(options, 'maxMessageBytes')];
  return { abortGraceMs: grace, retryAfterMs: retry, maxIdBytes, maxMessageBytes };
}

/** A size limit: absent, or an integer within 1..=2^32-1. */
function size(options, name) {
  const value = options[name];
  if (value === undefined || value === null) return null;
  if (!Number.isInteger(value) || value < 1 || value > 0xffffffff) {
    throw new errors.InvalidOptionsError(`${name} ${value} is not an integer within 1..=2^32-1`);
  }
  return value;
}

module.exports = { Session, agentOptions };
