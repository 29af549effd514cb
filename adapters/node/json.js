'use strict';
// JSON text of a value the core and the log keep exactly, or a typed refusal: what JSON cannot
// carry is refused at the call (`InvalidInputError`), before anything reaches the machine, so
// nothing changes. `JSON.stringify` alone would write `NaN` and `Infinity` as `null`, drop an
// `undefined` array item's place, a function or a symbol, and call a `Map` `{}`.

const errors = require('./errors');

/** Throws the refusal of the first value under `value` that JSON cannot carry exactly. */
function check(value, depth, at) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) refuse(`${value} is not a JSON number`, at);
      return;
    case 'object': {
      if (value === null) return;
      if (depth > MAX_DEPTH) refuse(`a value nests deeper than ${MAX_DEPTH} levels (or is a cycle)`, at);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          // An array item holding `undefined` would become `null`.
          if (value[i] === undefined) refuse('undefined in an array is not a JSON value', i);
          check(value[i], depth + 1, i);
        }
        return;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        // A `Date` (its `toJSON`), a `Map` or a class instance would not come back as sent.
        refuse(`a ${proto.constructor?.name ?? 'non-plain'} object is not a JSON value`, at);
      }
      for (const key in value) {
        // A field holding `undefined` is absent, as in JSON and TypeScript.
        if (value[key] !== undefined) check(value[key], depth + 1, key);
      }
      return;
    }
    case 'bigint':
      refuse('a BigInt is not a JSON value here (content integers cross as numbers)', at);
      return;
    default:
      refuse(`a ${typeof value} is not a JSON value`, at);
  }
}

/** Deeper than this a value is refused (the log refuses far less deep records anyway). */
const MAX_DEPTH = 256;

function refuse(why, at) {
  throw new errors.InvalidInputError(`not JSON: ${why}${at === undefined ? '' : ` (at "${at}")`}`);
}

/**
 * The JSON text of `value`; throws `InvalidInputError` for what JSON cannot carry exactly
 * (`NaN`, `Infinity`, `undefined` in an array, a function, a symbol, a `BigInt`, an object
 * that is not plain, a cycle), having changed nothing.
 */
function encode(value) {
  check(value, 0, undefined);
  return JSON.stringify(value);
}

module.exports = { encode };
