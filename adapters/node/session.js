'use strict';
// `Loop`: one agent's loop (the Rust `coxswain_session::AgentLoop`, sans-IO, behind
// `NativeAgent`), for `Agent`, which only moves bytes, time and promises. This module converts:
// commands go in as JSON text (or, for the hot ones, as their strings and numbers); every reply
// is a *turn* (src/session.rs has its layout), decoded here into `{outputs, append, deadline,
// quiescent}`. Every decision is the loop's.

const native = require('./native');
const errors = require('./errors');
const { encode, parse } = require('./json');
const tape = require('./tape');
const { plainFields, WORDS, PRESETS } = require('./machine');
const { ENCODED } = require('./log');

const NO_INPUTS = [];
const { open, close, num, str, message, event, effect } = tape.reader;

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
 * A sealed batch's log lines (`entries[ENCODED]`, log.js): `{seq, bytes, turnEnd}` and the
 * lines, numbered from `seq`, which the native loop holds until the append is reported.
 * `lines` takes them as text (at its first read); `writeInto(buffer, offset)` copies their
 * `bytes` (UTF-8) into a `Buffer` instead, with no string made (`MemoryLog`).
 */
class HeldLines {
  constructor(hot, seq, bytes, turnEnd) {
    Object.assign(this, { seq, bytes, turnEnd, _hot: hot, _text: undefined });
  }
  /** The lines (text). */
  get lines() { return this.take(); }
  /** Takes the lines as text from the loop (once: then they are this object's). */
  take() { return (this._text ??= this._hot.takeLines()); }
  /** Writes the lines into `buffer` at `offset` (room for `bytes` there): their length in bytes. */
  writeInto(buffer, offset) {
    const written = this._text === undefined ? this._hot.takeLinesInto(buffer, offset) : -1;
    return written >= 0 ? written : buffer.write(this.lines, offset, 'utf8');
  }
}

class Loop {
  /**
   * The loop over `machine` (a native machine, fresh or resumed, which it takes), with the
   * checked options `o` (`agentOptions`), the hooks the host wrote (`hooks.preStep`,
   * `hooks.turnStopping`), and the `seq` of the log's next record.
   */
  constructor(machine, o, hooks, nextSeq) {
    const options = {
      abortGraceMs: o.abortGraceMs ?? undefined,
      retryAfterMs: o.retryAfterMs ?? undefined,
      maxIdBytes: o.maxIdBytes ?? undefined,
      maxMessageBytes: o.maxMessageBytes ?? undefined,
      maxBatch: o.maxBatch,
      preStep: hooks.preStep,
      turnStopping: hooks.turnStopping,
      nextSeq,
    };
    if (typeof machine._flush === 'function') machine._flush(); // a `Machine`'s persisted word, passed on
    this._inner = new native.NativeAgent(machine._inner ?? machine, options);
    /** The hot path: functions bound to the loop's core (`submitTape`, `appended`, `takeLines`, …). */
    this._hot = this._inner.hotPath();
    this._submitFields = [this._hot.submitFields0, this._hot.submitFields1, this._hot.submitFields2];
    this._messages = machine._messages ?? new tape.Messages();
    Object.assign(this, { _seq: nextSeq, _withEntries: true, _takeLines: false });
  }

  /**
   * Whether turns carry the batches' entries decoded (for a listener, or a log of the host's
   * own), and whether their lines are taken as text at once (a log that may keep the entries).
   */
  carry(withEntries, takeLines) {
    if (withEntries !== this._withEntries) this._hot.withEntries((this._withEntries = withEntries));
    this._takeLines = takeLines;
  }

  /**
   * Hands `commands` to the loop (each `{input: [w, input]}`, `{record: [w, turn, step,
   * events]}`, `{maintenance: w}`, `{jobEnded: w}`, `{pending: w}`, `{fate: [w, id]}`,
   * `{close: w}`, `{answer: [call, turn, step, input]}`, `{nothing: [call, turn, step]}`,
   * `{hostFailed: [call, turn, step, failure, detail]}`): the turn.
   */
  submit(commands) {
    if (commands.length === 1) {
      const reply = this._one(commands[0]);
      if (reply !== undefined) return reply;
    }
    let text;
    let told = null;
    try {
      text = encode(commands);
    } catch {
      ({ text, told } = encodeEach(commands)); // a value JSON cannot carry (NaN, a cycle, a BigInt): alone
    }
    const turn = this._turn(this._hot.submitTape(text), messagesOfCommands(commands));
    if (told !== null) turn.outputs.unshift(...told);
    return turn;
  }
  /** The append of the last turn went so: `status` 0 (durable from `seq` on), 1 failed, 2 indeterminate, 3 fenced. */
  appended(status, nowMs, seq, count) {
    if (status === 0) this._seq = seq + count;
    return this._turn(this._hot.appended(status, nowMs, seq));
  }
  /** Time has reached `nowMs`: the turn. */
  timeout(nowMs) { return this._turn(this._hot.timeout(nowMs)); }
  /** The ending is published: whoever still waits is answered (the turn). */
  finish() { return this._turn(this._hot.finish()); }
  /** The machine's state (as `Machine.state`). */
  state() { return parse(this._inner.state()); }
  /** The seed of the id indexes' hasher, as 16 hex digits. */
  get hashSeed() { return this._inner.hashSeed(); }

  /** The turn of one command that crosses without JSON text, or `undefined`. */
  _one(command) {
    const input = command.input;
    if (input !== undefined) {
      const name = soleKey(input[1]);
      if (name === undefined || !Object.hasOwn(PRESETS, name)) return undefined;
      const preset = PRESETS[name];
      const given = input[1][name];
      const fields = plainFields(given);
      let reply;
      if (fields !== undefined) reply = this._submitFields[preset](fields[0], fields[1], fields[2], input[0]);
      else {
        let text;
        try {
          text = encode(given);
        } catch {
          return undefined;
        }
        reply = this._hot.submitDeliver(preset, text, input[0]);
      }
      return this._turn(reply, [given]);
    }
    const answer = command.answer;
    if (answer === undefined) return undefined;
    const [call, turn, step, value] = answer;
    if (!Number.isSafeInteger(turn) || !Number.isSafeInteger(step) || turn < 0 || step < 0) return undefined;
    const given = soleField(value, call);
    if (typeof given === 'string') {
      const word = WORDS[call]?.[given];
      return word === undefined ? undefined : this._turn(this._hot.submitWord(word, turn, step));
    }
    const batch = call === 'preStep' ? soleField(given, 'enter') : undefined;
    if (!Array.isArray(batch)) return undefined;
    const handles = new Array(batch.length);
    for (let k = 0; k < batch.length; k++) {
      handles[k] = this._messages.handleOf.get(batch[k]);
      if (handles[k] === undefined) return undefined;
    }
    const reply = handles.length === 1
      ? this._hot.submitEnterOne(turn, step, handles[0])
      : this._hot.submitEnter(turn, step, handles);
    return this._turn(reply);
  }

  /** Decodes a turn (src/session.rs), `inputs` the messages of the commands it answers. */
  _turn(text, inputs = NO_INPUTS) {
    open(text, this._messages, inputs);
    try {
      for (let count = num(); count > 0; count--) message(); // the inputs' messages, bound (S8)
      const outputs = new Array(num());
      for (let k = 0; k < outputs.length; k++) outputs[k] = output();
      const append = num() === 1 ? this._append() : null;
      const deadline = num() === 1 ? Number(str()) : null;
      return { outputs, append, deadline, quiescent: num() === 1 };
    } finally {
      close();
    }
  }
  _append() {
    const count = num();
    let entries = { length: count };
    if (num() === 1) {
      entries = new Array(count);
      for (let k = 0; k < count; k++) entries[k] = num() === 0 ? event() : { type: str(), data: parse(str()) };
    }
    const turnEnd = num() === 1;
    if (num() === 1) {
      const held = new HeldLines(this._hot, this._seq, num(), turnEnd);
      if (this._takeLines) held.take();
      entries[ENCODED] = held;
    }
    return { entries, count };
  }
}

/**
 * One output of a turn: an effect; a reply to waiter `w`, `{reply: w, found}` (delivered),
 * `{reply: w, value}`, `{reply: w, error}` (a refusal, typed) or `{reply: w, failed: kind}`;
 * `{startJob: w}`; `{abandoned}`; `{ended: kind, why}`.
 */
const OUTPUTS = tape.decodersOf('agentOutputs', {
  effect: () => effect(),
  delivered: () => ({ reply: num(), found: num() === 1 }),
  done: () => ({ reply: num(), value: undefined }),
  pending: () => {
    const w = num();
    const item = () => ({ message: message(), wakeup: num() === 1 });
    const nextTurn = list(item);
    return { reply: w, value: { nextTurn, nextStep: list(item) } };
  },
  fate: () => ({ reply: num(), value: parse(str()) }),
  closed: () => ({ reply: num(), value: str() }),
  refused: () => ({ reply: num(), error: errors.refusal(parse(str())) }),
  failed: () => ({ reply: num(), failed: str() }),
  startJob: () => ({ startJob: num() }),
  abandon: () => ({ abandoned: true }),
  ended: () => ({ ended: str(), why: num() }),
});

function output() {
  return OUTPUTS[num()]();
}

function list(read) {
  const items = new Array(num());
  for (let k = 0; k < items.length; k++) items[k] = read();
  return items;
}

/** The messages of the commands (`input`'s, an `answer`'s), in the order the native side binds them. */
function messagesOfCommands(commands) {
  const all = [];
  for (const command of commands) {
    const input = command.input?.[1] ?? command.answer?.[3];
    if (input !== undefined) all.push(...tape.messagesOf(input));
  }
  return all;
}

/**
 * `commands` as JSON text, each encoded alone: a caller's that JSON cannot carry is refused at
 * once (`told`, `InvalidInputError`), a host answer's fails its call (`host-invalid-answer`, S38).
 */
function encodeEach(commands) {
  const parts = [];
  const told = [];
  for (const command of commands) {
    try {
      parts.push(encode(command));
    } catch (error) {
      if (command.answer === undefined) {
        const w = Object.values(command)[0];
        const refused = error instanceof errors.CoxswainError ? error : new errors.InvalidInputError(`not JSON: ${error.message}`);
        told.push({ reply: Array.isArray(w) ? w[0] : w, error: refused });
      } else {
        const [call, turn, step] = command.answer;
        parts.push(encode({ hostFailed: [call, turn, step, 'invalid-answer', error.message] }));
      }
    }
  }
  return { text: `[${parts.join(',')}]`, told };
}

module.exports = { Loop };
