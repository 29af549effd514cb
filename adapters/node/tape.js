'use strict';
// Decodes the tape (adapters/node/src/tape.rs has its layout): one string of small numbers per
// transition, read into object literals whose strings are interned here. A message is named by
// a handle: the handle of the caller's own object, frozen, for a message it delivered, so every
// output carrying it hands back that one object (S8); a message the caller never gave (restored
// from a log) crosses once as JSON text, parsed exactly (integers beyond 2^53 as `BigInt`).

const { parse } = require('./json');
const native = require('./native');

// The opcode tables: the native side's (src/tape.rs `tape_table`), their one source. Each code
// is its word's place in its table. `BY_WORD` holds what tape.js reads for each word; `codes`
// checks every table against it at load (a word without a decoder, or a decoder for no word,
// refuses to load) and orders the decoders by code.
const TABLE = JSON.parse(native.tapeTable());
const [INSERTED, DISCARDED, CLAIMED] = ['agent/inbox/inserted', 'agent/inbox/discarded', 'agent/inbox/claimed'];
const [STATUS, ERROR] = ['agent/status', 'agent/error'];
const BY_WORD = {
  // A flag's words: the core's lists.
  targets: { 'next-turn': 'next-turn', 'next-step': 'next-step' },
  statuses: { idle: 'idle', running: 'running' },
};

/** Tables whose decoders live in another module, which checks them with `decodersOf`. */
const ELSEWHERE = new Set(['agentOutputs']);

/**
 * The decoders of table `name` of `table` (the shape of `TABLE`) in code order, from `byWord`
 * (word → decoder). Throws, naming the words, when the table and `byWord` disagree.
 */
function decodersOf(name, byWord, table = TABLE) {
  const words = table[name];
  if (!Array.isArray(words)) throw new Error(`coxswain: the tape has no ${name} table`);
  const missing = words.filter((word) => !Object.hasOwn(byWord, word));
  const extra = Object.keys(byWord).filter((word) => !words.includes(word));
  if (missing.length > 0 || extra.length > 0 || new Set(words).size !== words.length) {
    throw new Error(
      `coxswain: the tape's ${name} table and its decoders disagree: ` +
        `no decoder for ${JSON.stringify(missing)}, a decoder for no code ${JSON.stringify(extra)}`,
    );
  }
  return words.map((word) => byWord[word]);
}

/**
 * The decoders of every table of `table` that tape.js reads, in code order. Throws, naming
 * the words, when a table and `BY_WORD` disagree, or when no module reads a table.
 */
function codes(table) {
  const ordered = {};
  for (const [name, byWord] of Object.entries(BY_WORD)) ordered[name] = decodersOf(name, byWord, table);
  for (const name of Object.keys(table)) {
    if (!Object.hasOwn(BY_WORD, name) && !ELSEWHERE.has(name)) throw new Error(`coxswain: tape.js reads no ${name} table`);
  }
  return ordered;
}

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

BY_WORD.causes = {
  user: () => ({ kind: 'user' }),
  parent: () => ({ kind: 'parent' }),
  hook: () => ({ kind: 'hook', reason: str() }),
  disposed: () => ({ kind: 'disposed' }),
};

function cause() {
  return CAUSES[num()]();
}

/** An error: `{message, code}` and every other field the host's error had. */
function error() {
  const [message, code] = [str(), str()];
  return num() === 0 ? { message, code } : { message, code, ...parse(str()) };
}

BY_WORD.reasons = {
  completed: () => ({ kind: 'completed' }),
  'max-tokens': () => ({ kind: 'max-tokens' }),
  blocked: () => ({ kind: 'blocked' }),
  aborted: () => ({ kind: 'aborted', reason: cause() }),
  error: () => ({ kind: 'error', error: error() }),
  interrupted: () => ({ kind: 'interrupted' }),
};

BY_WORD.events = {
  'agent/inbox/spliced': () => {
    const data = { target: TARGETS[num()], start: num() };
    const removed = num();
    if (removed > 0) data.removedCount = removed;
    data.inserted = messages();
    if (num() === 1) data.outcome = 'canceled';
    if (num() === 1) data.wakeup = true;
    return { type: 'agent/inbox/spliced', data };
  },
  'turn/start': () => ({ type: 'turn/start', data: { turn: num() } }),
  'step/start': () => ({ type: 'step/start', data: { turn: num(), step: num() } }),
  'user/message': () => ({ type: 'user/message', data: message() }),
  'step/end': () => ({ type: 'step/end', data: { turn: num(), step: num() } }),
  'turn/end': () => {
    const turn = num();
    return { type: 'turn/end', data: { turn, reason: REASONS[num()]() } };
  },
};

function event() {
  return EVENTS[num()]();
}

BY_WORD.effects = {
  inserted: () => ({ notify: { type: INSERTED, message: message() } }),
  discarded: () => ({ notify: { type: DISCARDED, message: message() } }),
  claimed: () => ({ notify: { type: CLAIMED, message: message(), turn: num() } }),
  status: () => ({ notify: { type: STATUS, status: STATUSES[num()] } }),
  error: () => ({ notify: { type: ERROR, turn: num(), step: num(), error: error() } }),
  beginTurn: () => ({ begin: { turn: num() } }),
  beginMaintenance: () => ({ begin: { maintenance: {} } }),
  preStep: () => ({ request: { preStep: { turn: num(), step: num(), messages: messages() } } }),
  step: () => ({ request: { step: { turn: num(), step: num() } } }),
  turnStopping: () => ({ request: { turnStopping: { turn: num() } } }),
  abort: () => ({ request: { abort: { cause: cause() } } }),
  disposed: () => ({ disposed: {} }),
};

function effect() {
  return EFFECTS[num()]();
}

function list(read) {
  const count = num();
  const items = new Array(count);
  for (let k = 0; k < count; k++) items[k] = read();
  return items;
}

BY_WORD.outputs = {
  event: () => ({ event: event() }),
  effect,
};

function output() {
  return OUTPUTS[num()]();
}

const {
  causes: CAUSES, reasons: REASONS, events: EVENTS, effects: EFFECTS, outputs: OUTPUTS, targets: TARGETS, statuses: STATUSES,
} = codes(TABLE);

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

/** The reader's primitives, for a reply of another layout (`session.js` decodes an agent's turns with them). */
const reader = { open, close, num, str, message, messages, event, effect };

module.exports = {
  TABLE, codes, decodersOf, Messages, transition, queued, ordered, pending, messagesOf, messagesOfCommands, deepFreeze,
  reader,
};
