'use strict';
// `Machine`: the core's sans-IO machine with its drain contract. Every accepted input returns a
// `Transition`: append its `events` to the session log as one batch and make them durable, then
// call `persisted()` and carry out the effects it returns, in order. Until the transition is
// drained (`persisted()` or `intoOutputs()`), the core rejects the next input (`undrained`).

const native = require('./native');
const errors = require('./errors');
const { encode, parse } = require('./json');
const tape = require('./tape');

/** What one accepted input produced: its durable events, then (once persisted) its effects. */
class Transition {
  /** @param {Machine} machine */
  constructor(machine, found, events, effects) {
    this._machine = machine;
    this._generation = machine._generation;
    this._effects = effects;
    this._drained = false;
    /** `false` only for a `remove` or `replace` whose id was not pending (S15). */
    this.found = found;
    /** The durable events, in order: persist them as one batch before `persisted()`. */
    this.events = events;
  }

  /** Whether this is the machine's queued transition (not one a later input or a rollback superseded). */
  _current() {
    if (this._drained) return false;
    this._drained = true;
    return this._generation === this._machine._generation;
  }

  /**
   * The host's word that the events are durable: the effects, in order (each once). The core
   * hears it with the next input (the transition crossed whole: its effects were queued there
   * until now).
   */
  persisted() {
    if (!this._current()) return [];
    this._machine._ack = true;
    return this._effects;
  }

  /**
   * Every output in wire order, events included (FORMAT.md `"out"` values): for ports. With
   * `{begin: true}`, also each `{begin: …}` effect where its activity begins (right after a
   * turn's `turn/start`, first for a maintenance job), for a harness that reads the wire order
   * and scopes its cancellation by activity (FORMAT.md's traces hold no `begin`).
   */
  intoOutputs(options = {}) {
    if (!this._current()) return [];
    const machine = this._machine;
    return tape.ordered(machine._hot.ordered(options.begin === true), machine._messages);
  }
}

/** The delivery state machine (the Rust core behind N-API). */
class Machine {
  /**
   * @param {{memory?: number | 'unbounded', maxPending?: number | null, implicitBatch?: boolean}} [options]
   *   the delivery memory's capacity (S51, default 0; `'unbounded'`: no id is ever forgotten,
   *   S58), the admission bound (S55, default `null`: unbounded), and `implicitBatch` (default
   *   `false`): each accepted input commits the previous input's batch and opens its own, so
   *   `rollBack()` takes back the last input when its append failed, with no `beginBatch()` /
   *   `commitBatch()` around each (the core's `Machine::set_implicit_batches`)
   */
  constructor(options = {}) {
    const implicit = implicitBatch(options.implicitBatch);
    this._inner = nativeMachine(capacity(options.memory ?? 0), bound(options.maxPending));
    if (implicit) batchCall(this._inner.setImplicitBatches(true));
    /** The hot path: functions bound to the native machine's core (a fifth of a method call's cost). */
    this._hot = this._inner.hotPath();
    /** The hot path's delivery of a message's three strings, by preset code (`PRESETS`). */
    this._fields = [this._hot.fields0, this._hot.fields1, this._hot.fields2];
    /** The hot path's delivery of a message whose source is any plain object of strings (`fieldsOf`). */
    this._sourced = [this._hot.sourced0, this._hot.sourced1, this._hot.sourced2];
    /** The frozen messages the native machine names by handle (tape.js). */
    this._messages = new tape.Messages();
    /** Whether the caller said the queued transition is persisted (passed on with the next call). */
    this._ack = false;
    /** Bumped whenever the queued transition changes hands (a new one, a rollback). */
    this._generation = 0;
  }

  /**
   * A machine restored from a durable log (S46–S48): `log` is a list of `{type, data}` events
   * (other keys, such as `seq`, ignored). Throws `InvalidLogError` (S47). `memory` (a count or
   * `'unbounded'`, S58) and `maxPending` are not in the log (S51, S55): pass the same at every
   * restore; a restored list longer than `maxPending` is kept. The delivery memory's records
   * are rebuilt from the log, so `fate` answers as the live machine did (S58, I15).
   */
  static restore(log, options = {}) {
    const memory = capacity(options.memory ?? 0);
    const maxPending = bound(options.maxPending);
    const machine = new Machine({ memory, maxPending, implicitBatch: options.implicitBatch });
    const given = { log, seedLength: options.seedLength ?? 0, memory, maxPending };
    const reply = JSON.parse(machine._inner.restoreGiven(encode(given)));
    if (reply.ready) return machine;
    if (reply.invalidLog !== undefined) throw new errors.InvalidLogError(reply.invalidLog);
    throw new TypeError(reply.error);
  }

  /**
   * Crash repair (S50, S59) of a durable log that may end inside an open turn, then restore
   * (S46–S48): the closers (`step/end` if a step is open, then `turn/end {kind:
   * "interrupted"}`), then, with the allowance `redelivery` (S59, default 0: S50 unchanged),
   * one redelivery splice for each message the interrupted turn claimed after its last
   * `step/start`, each id at most `redelivery` times over the log's life. `{machine,
   * appended}`: the restored machine (its items parked: S48, until a wake or `resume()`, S57)
   * and the events repair appended, in order (append them to the stored log before anything
   * else; none when the log was balanced). Throws `InvalidRedeliveryError` for an allowance
   * that is not an integer within 0..=1000 (checked first), `InvalidLogError` (S47).
   */
  static repair(log, options = {}) {
    const redeliver = redelivery(options.redelivery);
    const memory = capacity(options.memory ?? 0);
    const maxPending = bound(options.maxPending);
    const machine = new Machine({ memory, maxPending, implicitBatch: options.implicitBatch });
    const given = { log, seedLength: options.seedLength ?? 0, memory, maxPending, repair: { redeliver } };
    const reply = parse(machine._inner.restoreGiven(encode(given)));
    if (reply.ready) return { machine, appended: reply.ready.repaired.map((output) => output.event) };
    if (reply.invalidLog !== undefined) throw new errors.InvalidLogError(reply.invalidLog);
    throw new TypeError(reply.error);
  }

  /**
   * Applies one input in the trace format (FORMAT.md "Inputs"). Throws the typed rejection
   * (S5: nothing changed) or `InvalidInputError`. An accepted input's messages are frozen, and
   * every output that carries one hands back that object (S8).
   */
  handle(input) {
    const text = encode(input);
    return this._transition(this._hot.feed(this._takeAck(), text), tape.messagesOf(input));
  }

  /** The transition of the last input again, when it was not drained (its events unpersisted). */
  drain() {
    this._flush();
    this._generation++;
    const { events, effects } = tape.queued(this._hot.queued(), this._messages);
    return new Transition(this, true, events, effects);
  }

  /** The native reply of an input: its transition, or the typed error. */
  _transition(reply, inputs) {
    const result = tape.transition(reply, this._messages, inputs);
    if (result.refused === 1) {
      const value = JSON.parse(result.text);
      throw errors.rejection(value.rejected, value.message, value);
    }
    if (result.refused !== undefined) throw new errors.InvalidInputError(result.text);
    this._generation++;
    return new Transition(this, result.found, result.events, result.effects);
  }

  /** Takes the caller's persisted word, to pass on with the next native input. */
  _takeAck() {
    const ack = this._ack;
    this._ack = false;
    return ack;
  }

  /** Passes the caller's persisted word on now (before a call that needs the core drained). */
  _flush() {
    if (this._takeAck()) this._hot.ack();
  }

  /**
   * `send(message, target, wakeup, expect)` (S16, S54): with `options.expect` (`{turn: n}` or
   * `{idleAfter: n}`) the send is accepted only while the guard holds, else it throws
   * `TurnMismatchError` (after the identity checks: the retry of an accepted guarded send still
   * throws `AlreadyPendingError` or `AlreadyDeliveredError`).
   */
  send(message, target, wakeup, options = {}) { return this.handle(sendInput(message, target, wakeup, options.expect)); }
  /** A steer meant for turn `turn` (S54): joins it, or throws `TurnMismatchError` once it ended or was stopped. */
  steerExpecting(turn, message) { return this.send(message, 'next-step', true, { expect: { turn } }); }
  /** A follow-up sent only while idle with no turn since `turn` (S54); else `TurnMismatchError`. */
  followupIfIdleAfter(turn, message) {
    return this.send(message, 'next-turn', true, { expect: { idleAfter: turn } });
  }
  /** A follow-up: a turn of its own (S22). */
  followup(message) { return this._deliver(PRESETS.followup, message); }
  /** Steering: joins the running turn at its next step boundary. */
  steer(message) { return this._deliver(PRESETS.steer, message); }
  /** Context that rides along with the next step; never wakes (S20). */
  inject(message) { return this._deliver(PRESETS.inject, message); }
  /**
   * A follow-up, steer or inject (its code in `PRESETS`): the message crosses as its strings
   * (`fieldsOf`), else as its own JSON text.
   */
  _deliver(preset, message) {
    const fields = fieldsOf(message);
    if (fields !== undefined) {
      if (fields.length === 3) {
        const [id, kind, content] = fields;
        return this._transition(this._fields[preset](this._takeAck(), id, kind, content), [message]);
      }
      return this._transition(this._sourced[preset](this._takeAck(), ...fields), [message]);
    }
    const text = encode(message);
    return this._transition(this._hot.deliver(this._takeAck(), preset, text), [message]);
  }
  /** Removes a pending message (S15); the transition's `found` says whether it was pending. */
  remove(id) { return this.handle({ remove: id }); }
  /** Replaces a pending message in place (S15). */
  replace(id, message) { return this.handle({ replace: { id, message } }); }
  /** Puts a quiet message first in `target` (S15). */
  prepend(target, message) { return this.handle({ prepend: { target, message } }); }
  /** Discards everything pending (S15). */
  clear() { return this.handle({ clear: {} }); }
  /** Cancels the current activity (S39). */
  cancel(cause, options = {}) {
    return this.handle({ cancel: { cause, keepInbox: options.keepInbox ?? false } });
  }
  /** Begins a maintenance job (S43): only while idle. */
  beginMaintenance() { return this.handle({ maintenance: 'begin' }); }
  /** Ends the maintenance job (S43). */
  endMaintenance() { return this.handle({ maintenance: 'end' }); }
  /** Disposes the machine (S45). */
  dispose() { return this.handle({ dispose: {} }); }
  /**
   * Starts parked waking work (S57): while idle with waking work pending, it wakes as a waking
   * send would (`agent/status running`, `turn/start`, the claim, the pre-step request); else it
   * emits nothing and changes nothing. Rejected only once disposed (`DisposedError`).
   */
  resume() { return this.handle({ resume: {} }); }
  /**
   * What became of the message id `id` (S58), as FORMAT.md spells it: `{pending: target}`,
   * `'discarded'`, `{claimed: {turn, step?, end?}}` or `'unknown'`. A query: it changes and
   * emits nothing, and is answered in every phase, also once disposed.
   */
  fate(id) { return fateOf(this._inner, id); }
  /**
   * Answers the outstanding `preStep` request (S29). An `enter` of the messages the request
   * handed out goes back by handle: they do not cross again.
   */
  answerPreStep(answer) {
    const batch = answer?.enter;
    if (Array.isArray(batch) && batch.length === 1) {
      const handle = this._messages.handleOf.get(batch[0]);
      if (handle !== undefined) return this._transition(this._hot.enterOne(this._takeAck(), handle), batch);
    }
    if (typeof answer === 'string') return this._answer('preStep', answer);
    if (Array.isArray(batch)) {
      const handles = new Array(batch.length);
      for (let k = 0; k < batch.length; k++) {
        handles[k] = this._messages.handleOf.get(batch[k]);
        if (handles[k] === undefined) return this.handle({ preStep: answer });
      }
      return this._transition(this._hot.enter(this._takeAck(), handles), batch);
    }
    return this.handle({ preStep: answer });
  }
  /** Answers the outstanding `step` request (S32). */
  answerStep(answer) { return this._answer('step', answer); }
  /** Answers the outstanding `turnStopping` request (S33). */
  answerTurnStopping(answer) { return this._answer('turnStopping', answer); }
  /** An answer; one that is a word (`'completed'`, `'done'`, …) crosses as its code, no text. */
  _answer(kind, answer) {
    const word = typeof answer === 'string' ? WORDS[kind]?.[answer] : undefined;
    if (word === undefined) return this.handle({ [kind]: answer });
    return this._transition(this._hot.answer(this._takeAck(), word), NO_MESSAGES);
  }

  /**
   * Opens a batch: the inputs fed from now on can be taken back together with
   * `rollBackBatch()` when the host cannot persist their events (its log refused the append),
   * leaving the machine as if none had been fed. Persist each transition as usual;
   * `commitBatch()` keeps them once durable. Throws `BatchError` (`already-open`, `undrained`).
   */
  beginBatch() {
    this._flush();
    batchCall(this._inner.beginBatch());
  }
  /** Closes the batch and keeps its inputs. Throws `BatchError` (`not-open`). */
  commitBatch() {
    this._flush();
    batchCall(this._inner.commitBatch());
  }
  /**
   * Closes the batch and takes back every input fed since `beginBatch()`: lists, delivery
   * memory, phase and turn number are as they were; outputs still queued are dropped (their
   * effects must not be carried out). Throws `BatchError` (`not-open`).
   */
  rollBackBatch() {
    this._flush();
    batchCall(this._inner.rollBackBatch());
    this._generation++;
  }
  /**
   * `rollBackBatch()`, by the name an `implicitBatch` machine's host calls it: takes back the
   * last accepted input (its append failed), and only it; the machine is as before that input.
   * Throws `BatchError` (`not-open`: no input since the last rollback or `commitBatch()`).
   */
  rollBack() { this.rollBackBatch(); }
  /** Whether a batch is open. */
  get batchOpen() { return this._inner.isBatchOpen(); }
  /** Whether each accepted input runs in a batch of its own (the `implicitBatch` option). */
  get implicitBatch() { return this._inner.isImplicitBatches(); }

  /** The machine's state: status, quiescence, outstanding request, both pending lists (their messages the delivered objects, S8). */
  state() {
    const state = parse(this._inner.state());
    Object.assign(state, tape.pending(this._hot.pending(), this._messages));
    return state;
  }
  /** `'running'` or `'idle'` (S23). */
  get status() { return this.state().status; }
  /** No turn and no maintenance runs (S44). */
  get quiescent() { return this._inner.isQuiescent(); }
  /** Disposed (S45). */
  get disposed() { return this._inner.isDisposed(); }
  /** The request the machine waits on, or `null`. */
  get outstanding() { return JSON.parse(this._inner.outstanding()); }
  /** Whether the delivery memory holds `id` (S51). */
  remembers(id) { return this._inner.remembers(id); }
  /** The admission bound (S55), or `null` when unbounded. */
  get maxPending() { return this._inner.maxPending(); }
  /** The number of the last turn opened (0 before the first), the running one while running: what a guarded send names (S54). */
  get lastTurn() { return this.state().lastTurn; }
}

/** The answers that are words, by host call and their native codes (src/machine.rs `answer_word`). */
const WORDS = {
  step: { completed: 0, 'max-tokens': 1, continue: 2 },
  turnStopping: { done: 3 },
  preStep: { reject: 4 },
};
const NO_MESSAGES = [];
/** The inputs that cross as their message's own JSON text, by name and native code (src/machine.rs `delivered`). */
const PRESETS = { followup: 0, steer: 1, inject: 2 };

/**
 * `[id, kind, content]` of a message that is exactly `{id, source: {kind}, content}` (`fieldsOf`'s
 * three strings), else `undefined`.
 */
function plainFields(message) {
  const fields = fieldsOf(message);
  return fields !== undefined && fields.length === 3 ? fields : undefined;
}

/** The most fields a `source` crosses with as strings (src/machine.rs `MAX_SOURCE_FIELDS`). */
const MAX_SOURCE_FIELDS = 8;

/**
 * The strings a message that is exactly `{id, source, content}` crosses as, plain objects (as
 * `json.js` takes them) of well-formed strings, `source` of at most `MAX_SOURCE_FIELDS` own
 * fields: JSON text carries it as it is, so it may cross as those strings instead (the native
 * side builds the message its text parses to, src/machine.rs `plain_message` and
 * `sourced_message`). `[id, kind, content]` when `source` is `{kind}` alone; else `[id,
 * content, key, value, …]`, `source`'s fields in its order (an even length). `undefined` for
 * any other message (its JSON text crosses; a lone surrogate, which JSON text cannot carry to
 * the core, is refused there).
 */
function fieldsOf(message) {
  if (!isPlain(message)) return undefined;
  let id;
  let source;
  let content;
  let count = 0;
  for (const key in message) {
    count++;
    if (key === 'id') id = message[key];
    else if (key === 'source') source = message[key];
    else if (key === 'content') content = message[key];
    else return undefined;
  }
  if (count !== 3 || typeof id !== 'string' || typeof content !== 'string' || !isPlain(source)) return undefined;
  // A `toJSON` (one not enumerable: the loops do not see it) is what JSON text would carry.
  if (message.toJSON !== undefined || source.toJSON !== undefined) return undefined;
  if (!id.isWellFormed() || !content.isWellFormed()) return undefined;
  let fields;
  for (const key in source) {
    const value = source[key];
    // An inherited field is not in JSON text; a value not a string crosses as text.
    if (typeof value !== 'string' || !Object.hasOwn(source, key)) return undefined;
    if (!key.isWellFormed() || !value.isWellFormed()) return undefined;
    if (fields === undefined) {
      if (key === 'kind') {
        fields = [id, value, content];
        continue;
      }
      fields = [id, content];
    } else if (fields.length === 3) {
      fields = [id, content, 'kind', fields[1]];
    }
    if (fields.length >= 2 + 2 * MAX_SOURCE_FIELDS) return undefined;
    fields.push(key, value);
  }
  return fields ?? [id, content];
}

/** An object `json.js` encodes as a JSON object: a plain one (or one without a prototype). */
function isPlain(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Throws the `BatchError` a native batch call replied with (`""`: done). */
function batchCall(reply) {
  if (reply !== '') throw new errors.BatchError(reply);
}

/** The `send` input, with its guard when there is one (S54). */
function sendInput(message, target, wakeup, expect) {
  const send = { message, target, wakeup };
  if (expect !== undefined && expect !== null) send.expect = expect;
  return { send };
}

/** The `implicitBatch` option: absent (`undefined`) is `false`, else a boolean. */
function implicitBatch(value) {
  if (value === undefined || typeof value === 'boolean') return value === true;
  throw new errors.InvalidOptionsError(`implicitBatch ${shown(value)} is not a boolean`);
}

/** An admission bound (S55): `null`/`undefined` (unbounded) or an integer within 1..=2^32-1. */
function bound(maxPending) {
  if (maxPending === undefined || maxPending === null) return null;
  if (!Number.isInteger(maxPending) || maxPending < 1 || maxPending > 0xffffffff) {
    throw new errors.InvalidOptionsError(`maxPending ${maxPending} is not an integer within 1..=2^32-1`);
  }
  return maxPending;
}

/** A delivery memory capacity: a non-negative integer below 2^32, or `'unbounded'` (S58). */
function capacity(memory) {
  if (memory === UNBOUNDED) return memory;
  if (!Number.isInteger(memory) || memory < 0 || memory > 0xffffffff) {
    throw new errors.InvalidOptionsError(`memory ${memory} is not an integer within 0..=2^32-1 or 'unbounded'`);
  }
  return memory;
}

/** The delivery memory's capacity that never forgets an id (S58). */
const UNBOUNDED = 'unbounded';

/** A native machine with the capacity `memory` (`capacity`'s), the bound and the hash seed. */
function nativeMachine(memory, maxPending, hashSeed = undefined) {
  const unbounded = memory === UNBOUNDED;
  return new native.NativeMachine(unbounded ? 0 : memory, maxPending, hashSeed, unbounded);
}

/** The largest redelivery allowance (S59), the session layer's `MAX_REDELIVERY`. */
const MAX_REDELIVERY = native.maxRedelivery();

/**
 * A redelivery allowance (S59): absent (`undefined` or `null`) is 0, else an integer within
 * 0..=1000, checked by the session layer's one owner of the bound (`ResumeOptions::
 * try_with_redelivery`, its words); anything else throws `InvalidRedeliveryError` naming it.
 */
function redelivery(value) {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    const message = `redelivery ${shown(value)} is not an integer within 0..=${MAX_REDELIVERY} (S59)`;
    throw new errors.InvalidRedeliveryError(value, message);
  }
  const refused = native.redeliveryRefusal(value);
  if (refused) throw new errors.InvalidRedeliveryError(value, refused);
  return value;
}

/** A value as an error message names it (never calling the value's own `toString`). */
function shown(value) {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'bigint':
      return `${value}n`;
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'symbol':
      return value.toString();
    case 'function':
      return 'a function';
    default:
      if (value === null) return 'null';
      return Array.isArray(value) ? 'an array' : 'an object';
  }
}

/** The query `fate(id)` (S58) on a native machine or session: FORMAT.md's `F` as a value. */
function fateOf(inner, id) {
  if (typeof id !== 'string') {
    throw new errors.InvalidInputError(`fate takes a message id (a string), not ${shown(id)}`);
  }
  return JSON.parse(inner.fate(id));
}

/**
 * The agent's input methods (index.d.ts has their contracts): each builds its FORMAT.md input
 * (S15, S16, S20, S22, S39, S54), which the agent stages as it is.
 */
const INPUTS = {
  send: (message, target, wakeup, options = {}) => sendInput(message, target, wakeup, options.expect),
  steerExpecting: (turn, message) => sendInput(message, 'next-step', true, { turn }),
  followupIfIdleAfter: (turn, message) => sendInput(message, 'next-turn', true, { idleAfter: turn }),
  followup: (message) => ({ followup: message }),
  steer: (message) => ({ steer: message }),
  inject: (message) => ({ inject: message }),
  remove: (id) => ({ remove: id }),
  replace: (id, message) => ({ replace: { id, message } }),
  prepend: (target, message) => ({ prepend: { target, message } }),
  clear: () => ({ clear: {} }),
  cancel: (cause, options = {}) => ({ cancel: { cause, keepInbox: options.keepInbox ?? false } }),
  resume: () => ({ resume: {} }),
};
/** The input methods that resolve with `found` (S15: whether the id was pending); the others with nothing. */
const FOUND = new Set(['remove', 'replace']);

module.exports = {
  Machine, Transition, capacity, bound, nativeMachine, redelivery, fateOf, sendInput, plainFields, fieldsOf,
  INPUTS, FOUND, WORDS, PRESETS, UNBOUNDED,
};
