'use strict';
// Decodes the tape (adapters/node/src/tape.rs has its layout): one string of small numbers per
// transition, read into object literals whose strings are interned here. A message is named by
// a handle: the handle of the caller's own object, frozen, for a message it delivered, so every
// output carrying it hands back that one object (S8); a message the caller never gave (restored
// from a log) crosses once as JSON text, parsed exactly (integers beyond 2^53 as `BigInt`).

const { parse } = require('./json');

const SPLICED = 'agent/inbox/spliced';
const EVENT_TYPES = [SPLICED, 'turn/start', 'step/start', 'user/message', 'step/end', 'turn/end'];
const [NEXT_TURN, NEXT_STEP] = ['next-turn', 'next-step'];
const REASONS = ['completed', 'max-tokens', 'blocked', 'aborted', 'error', 'interrupted'];
const CAUSES = ['user', 'parent', 'hook', 'disposed'];
const [INSERTED, DISCARDED, CLAIMED] = ['agent/inbox/inserted', 'agent/inbox/discarded', 'agent/inbox/claimed'];
const [STATUS, ERROR] = ['agent/status', 'agent/error'];

/**
 * The messages JavaScript holds for one native machine: handle → the frozen object, and the
 * object → its handle (so a pre-step batch of them goes back by handle).
 */
class Messages {
  constructor() {
    this.byHandle = new Map();
    this.handleOf = new WeakMap();
  }
}

// The reader's state: decoding is synchronous, one tape at a time.
let s = '';
let i = 0;
let table = null;
let given = null;

function num() {
  const unit = s.charCodeAt(i++);
  if (unit < 0x8000) return unit;
  let n = 0;
  for (let k = unit & 0x7fff; k > 0; k--) n = n * 0x8000 + s.charCodeAt(i++);
  return n;
}

function str() {
  const len = num();
  const text = s.substr(i, len);
  i += len;
  return text;
}

function message() {
  const ref = num();
  const handle = Math.floor(ref / 2);
  if (ref % 2 === 0) return table.byHandle.get(handle);
  const slot = num();
  const object = slot > 0 ? given[slot - 1] : parse(str());
  deepFreeze(object);
  table.byHandle.set(handle, object);
  table.handleOf.set(object, handle);
  return object;
}

/** Freezes `value` and everything under it (a delivered message is one shared value, S8). */
function deepFreeze(value) {
  if (typeof value !== 'object' || value === null) return;
  Object.freeze(value);
  for (const key in value) deepFreeze(value[key]);
}

function messages() {
  const count = num();
  const list = new Array(count);
  for (let k = 0; k < count; k++) list[k] = message();
  return list;
}

function cause() {
  const kind = num();
  return kind === 2 ? { kind: 'hook', reason: str() } : { kind: CAUSES[kind] };
}

/** An error: `{message, code}` and every other field the host's error had. */
function error() {
  const [message, code] = [str(), str()];
  return num() === 0 ? { message, code } : { message, code, ...parse(str()) };
}

function event() {
  const code = num();
  const type = EVENT_TYPES[code];
  switch (code) {
    case 0: {
      const data = { target: num() === 1 ? NEXT_STEP : NEXT_TURN, start: num() };
      const removed = num();
      if (removed > 0) data.removedCount = removed;
      data.inserted = messages();
      if (num() === 1) data.outcome = 'canceled';
      if (num() === 1) data.wakeup = true;
      return { type, data };
    }
    case 1:
      return { type, data: { turn: num() } };
    case 3:
      return { type, data: message() };
    case 5: {
      const turn = num();
      const kind = num();
      let reason;
      if (kind === 3) reason = { kind: 'aborted', reason: cause() };
      else if (kind === 4) reason = { kind: 'error', error: error() };
      else reason = { kind: REASONS[kind] };
      return { type, data: { turn, reason } };
    }
    default: // 2 step/start, 4 step/end
      return { type, data: { turn: num(), step: num() } };
  }
}

function effect() {
  switch (num()) {
    case 0:
      return { notify: { type: INSERTED, message: message() } };
    case 1:
      return { notify: { type: DISCARDED, message: message() } };
    case 2:
      return { notify: { type: CLAIMED, message: message(), turn: num() } };
    case 3:
      return { notify: { type: STATUS, status: num() === 1 ? 'running' : 'idle' } };
    case 4:
      return { notify: { type: ERROR, turn: num(), step: num(), error: error() } };
    case 5:
      return { begin: { turn: num() } };
    case 6:
      return { begin: { maintenance: {} } };
    case 7:
      return { request: { preStep: { turn: num(), step: num(), messages: messages() } } };
    case 8:
      return { request: { step: { turn: num(), step: num() } } };
    case 9:
      return { request: { turnStopping: { turn: num() } } };
    case 10:
      return { request: { abort: { cause: cause() } } };
    default: // 11
      return { disposed: {} };
  }
}

function list(read) {
  const count = num();
  const items = new Array(count);
  for (let k = 0; k < count; k++) items[k] = read();
  return items;
}

function output() {
  return num() === 0 ? { event: event() } : effect();
}

/** Starts reading `tape` for `messages`: forgets the handles the tape says were swept. */
function open(tape, messagesTable, inputs) {
  s = tape;
  i = 0;
  table = messagesTable;
  given = inputs;
  for (let freed = num(); freed > 0; freed--) {
    const handle = num();
    const object = table.byHandle.get(handle);
    table.byHandle.delete(handle);
    if (object !== undefined && table.handleOf.get(object) === handle) table.handleOf.delete(object);
  }
}

/** Ends reading (drops the references the reader held). */
function close() {
  s = '';
  table = null;
  given = null;
}

/**
 * A transition's reply: `{found, events, effects}`, or `{refused: status, text}` (status 1: a
 * rejection's JSON text, 2: why the input has an unknown shape).
 */
function transition(tape, messagesTable, inputs) {
  open(tape, messagesTable, inputs);
  try {
    const status = num();
    if (status !== 0) return { refused: status, text: str() };
    const found = num() === 1;
    const events = list(event);
    return { found, events, effects: list(effect) };
  } finally {
    close();
  }
}

/** The queued transition's `{events, effects}`. */
function queued(tape, messagesTable) {
  open(tape, messagesTable, null);
  try {
    const events = list(event);
    return { events, effects: list(effect) };
  } finally {
    close();
  }
}

/** Every output in wire order. */
function ordered(tape, messagesTable) {
  open(tape, messagesTable, null);
  try {
    return list(output);
  } finally {
    close();
  }
}

/** Both pending lists: `{nextTurn, nextStep}`, items `{message, wakeup}`. */
function pending(tape, messagesTable) {
  open(tape, messagesTable, null);
  try {
    const item = () => ({ message: message(), wakeup: num() === 1 });
    const nextTurn = list(item);
    return { nextTurn, nextStep: list(item) };
  } finally {
    close();
  }
}

/**
 * A staged batch's reply (src/session.rs `stage_tape`): `{staged, batch, count, entries,
 * turnEnd, lines, quiescent}`, each staged result a ticket, `null`, or the JSON value of a
 * refusal or a timeout's result; `entries` `null` when the tape leaves them out (or nothing was
 * staged), `lines` the UTF-8 length of their log lines (which the session holds), or `null`.
 */
function staged(tape, messagesTable, inputs) {
  open(tape, messagesTable, inputs);
  try {
    const results = list(stagedResult);
    if (num() === 0) {
      return { staged: results, batch: null, count: 0, entries: null, turnEnd: false, lines: null, quiescent: num() === 1 };
    }
    const batch = num();
    const count = num();
    let entries = null;
    if (num() === 1) {
      entries = new Array(count);
      for (let k = 0; k < count; k++) entries[k] = num() === 0 ? event() : { type: str(), data: parse(str()) };
    } else {
      messages(); // the inputs' messages, bound to their handles (S8)
    }
    const turnEnd = num() === 1;
    const lines = num() === 1 ? num() : null;
    return { staged: results, batch, count, entries, turnEnd, lines, quiescent: num() === 1 };
  } finally {
    close();
  }
}

/** One staged result: a ticket, `null` (nothing staged), or the JSON value of a refusal or a timeout's result. */
function stagedResult() {
  const kind = num();
  return kind === 0 ? num() : kind === 1 ? null : parse(str());
}

/** A durable batch's releases (src/session.rs `persisted_tape`), in order, and whether the machine is quiescent. */
function releases(tape, messagesTable) {
  open(tape, messagesTable, null);
  try {
    const released = list(release);
    return { released, quiescent: num() === 1 };
  } finally {
    close();
  }
}

/** One release: an effect, a member's `{ack, found}` or `{ack, refused}`, or the abort grace's `{deadline}`. */
function release() {
  switch (num()) {
    case 0:
      return effect();
    case 1:
      return { ack: num(), found: num() === 1 };
    case 2:
      return { ack: num(), refused: parse(str()) };
    default:
      return { deadline: Number(str()) };
  }
}

/** The messages of session commands (`{feed}`, `{answer: [call, turn, step, input]}`), in order. */
function messagesOfCommands(commands) {
  const all = [];
  for (const command of commands) {
    const input = command.feed ?? (Array.isArray(command.answer) ? command.answer[3] : undefined);
    if (input !== undefined) all.push(...messagesOf(input));
  }
  return all;
}

/**
 * The messages of an input in its FORMAT.md form, in the order the native side binds them
 * (src/tape.rs `messages_of`): a send's, follow-up's, steer's, inject's, replace's or prepend's
 * one, a pre-step `enter` batch's in order.
 */
function messagesOf(input) {
  if (input === null || typeof input !== 'object') return [];
  if (input.followup !== undefined) return [input.followup];
  if (input.steer !== undefined) return [input.steer];
  if (input.inject !== undefined) return [input.inject];
  const inner = input.send ?? input.replace ?? input.prepend;
  if (inner !== undefined && inner !== null) return [inner.message];
  const enter = input.preStep?.enter;
  return Array.isArray(enter) ? enter : [];
}

module.exports = {
  Messages, transition, queued, ordered, pending, staged, releases, messagesOf, messagesOfCommands, deepFreeze,
};
