'use strict';
// JSON text of a value the core and the log keep exactly, or a typed refusal: what JSON cannot
// carry is refused at the call (`InvalidInputError`), before anything reaches the machine, so
// nothing changes. `JSON.stringify` alone would write `NaN` and `Infinity` as `null`, drop an
// `undefined` array item's place, a function or a symbol, call a `Map` `{}` and throw on a
// `BigInt`. A `BigInt` the log can hold (a 64-bit integer: -2^63..2^64-1) is written as its
// digits, and `parseExact` reads such an integer back as a `BigInt` when a number cannot hold
// it exactly (beyond 2^53): content integers round-trip exactly.

const errors = require('./errors');

/** Throws the refusal of the first value under `value` that JSON cannot carry exactly; whether it holds a `BigInt`. */
function check(value, depth, at) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return false;
    case 'number':
      if (!Number.isFinite(value)) refuse(`${value} is not a JSON number`, at);
      return false;
    case 'object': {
      if (value === null) return false;
      if (depth > MAX_DEPTH) refuse(`a value nests deeper than ${MAX_DEPTH} levels (or is a cycle)`, at);
      let big = false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          // An array item holding `undefined` would become `null`.
          if (value[i] === undefined) refuse('undefined in an array is not a JSON value', i);
          if (check(value[i], depth + 1, i)) big = true;
        }
        return big;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        // A `Date` (its `toJSON`), a `Map` or a class instance would not come back as sent.
        refuse(`a ${proto.constructor?.name ?? 'non-plain'} object is not a JSON value`, at);
      }
      for (const key in value) {
        // A field holding `undefined` is absent, as in JSON and TypeScript.
        if (value[key] !== undefined && check(value[key], depth + 1, key)) big = true;
      }
      return big;
    }
    case 'bigint':
      if (value < MIN_I64 || value > MAX_U64) refuse(`${value} is beyond the 64-bit integers a log holds`, at);
      return true;
    default:
      refuse(`a ${typeof value} is not a JSON value`, at);
  }
  return false;
}

const [MIN_I64, MAX_U64] = [-(2n ** 63n), 2n ** 64n - 1n];

/** Deeper than this a value is refused (the log refuses far less deep records anyway). */
const MAX_DEPTH = 256;

function refuse(why, at) {
  throw new errors.InvalidInputError(`not JSON: ${why}${at === undefined ? '' : ` (at "${at}")`}`);
}

/**
 * The JSON text of `value`; throws `InvalidInputError` for what JSON cannot carry exactly
 * (`NaN`, `Infinity`, `undefined` in an array, a function, a symbol, a `BigInt` beyond 64 bits,
 * an object that is not plain, a cycle), having changed nothing. A `BigInt` is written as its
 * digits.
 */
function encode(value) {
  return check(value, 0, undefined) ? stringifyExact(value) : JSON.stringify(value);
}

/** `JSON.stringify` of a checked value that holds a `BigInt`: written as its digits. */
function stringifyExact(value) {
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `[${value.map(stringifyExact).join(',')}]`;
      const fields = [];
      for (const key in value) {
        if (value[key] !== undefined) fields.push(`${JSON.stringify(key)}:${stringifyExact(value[key])}`);
      }
      return `{${fields.join(',')}}`;
    }
    default:
      return JSON.stringify(value);
  }
}

/**
 * `JSON.parse` of JSON text (the core's or the log's), except that an integer a number cannot
 * hold exactly (beyond ±(2^53 - 1)) is read as a `BigInt`: what `encode` wrote comes back
 * as it was. Throws `SyntaxError` for text that is not JSON.
 */
function parseExact(text) {
  let at = 0;
  const fail = () => {
    throw new SyntaxError(`not JSON at ${at}`);
  };
  const space = () => {
    while (at < text.length && ' \t\n\r'.includes(text[at])) at++;
  };
  const value = () => {
    space();
    const c = text[at];
    if (c === '{') {
      at++;
      const object = {};
      space();
      if (text[at] === '}') return at++, object;
      for (;;) {
        space();
        if (text[at] !== '"') fail();
        const key = string();
        space();
        if (text[at++] !== ':') fail();
        const item = value();
        // As `JSON.parse`: `__proto__` is a field like any other.
        if (key === '__proto__') Object.defineProperty(object, key, { value: item, enumerable: true, writable: true, configurable: true });
        else object[key] = item;
        space();
        const next = text[at++];
        if (next === '}') return object;
        if (next !== ',') fail();
      }
    }
    if (c === '[') {
      at++;
      const array = [];
      space();
      if (text[at] === ']') return at++, array;
      for (;;) {
        array.push(value());
        space();
        const next = text[at++];
        if (next === ']') return array;
        if (next !== ',') fail();
      }
    }
    if (c === '"') return string();
    const literal = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(at, at + 400));
    if (literal === null) fail();
    at += literal[0].length;
    const token = literal[0];
    if (/^-?\d+$/.test(token)) {
      const number = Number(token);
      return Number.isSafeInteger(number) ? number : BigInt(token);
    }
    return JSON.parse(token);
  };
  const string = () => {
    const start = at;
    at++;
    while (at < text.length && text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
    if (at >= text.length) fail();
    at++;
    return JSON.parse(text.slice(start, at));
  };
  const result = value();
  space();
  if (at !== text.length) fail();
  return result;
}

/** `JSON.parse`, or `parseExact` when a run of 16 digits may be an integer a number cannot hold. */
function parse(text) {
  return /\d{16}/.test(text) ? parseExact(text) : JSON.parse(text);
}

module.exports = { encode, parse, parseExact };
