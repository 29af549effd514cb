#!/usr/bin/env node
'use strict';
// The Node binding's end of the `--exec` line protocol (docs/PORTS.md): one JSON request per
// line on stdin, exactly one JSON reply per line on stdout, in order; exit 0 at the end of
// stdin. Run it with `coxswain conform --exec "node adapters/node/port.js" TRACES…`.

const readline = require('node:readline');
const native = require('./native');
const { version } = require('./package.json');

const PROTOCOL = 1;
let machine = null;

function reply(value) {
  process.stdout.write(typeof value === 'string' ? `${value}\n` : `${JSON.stringify(value)}\n`);
}

/**
 * The JSON text of a one-key request's body, as written: `JSON.parse` turns an integer beyond
 * 2^53 into a float and `JSON.stringify` writes it back as another number, but FORMAT.md's
 * numbers compare as written (SPEC S8), so an input goes to the core as the runner wrote it.
 * `null` when the line does not start with the key plainly spelled (then the parsed body is
 * re-serialized).
 */
function rawBody(line, key) {
  const head = /^\s*\{\s*"([^"\\]*)"\s*:/.exec(line);
  if (!head || head[1] !== key) return null;
  return line.slice(head[0].length, line.lastIndexOf('}'));
}

function serve(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (error) {
    return { error: `not JSON: ${error.message}` };
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) {
    return { error: 'a request is a JSON object' };
  }
  const keys = Object.keys(request);
  if (keys.length !== 1) return { error: 'a request has exactly one key' };
  const [key] = keys;
  const body = request[key];
  switch (key) {
    case 'hello':
      return { hello: { protocol: PROTOCOL, name: 'coxswain-node', version } };
    case 'begin': {
      machine = null;
      if (body === null || typeof body !== 'object' || !('given' in body)) {
        return { error: '`begin` takes {trace, given}' };
      }
      // `given.memory` may be "unbounded" (S58); with `given.repair`, crash repair (S50, S59)
      // runs on `log` first and the reply lists what it appended (`{ready: {repaired: […]}}`,
      // as the core wrote it: numbers as written).
      const fresh = new native.NativeMachine(0);
      const text = fresh.restoreGiven(JSON.stringify(body.given));
      const restored = JSON.parse(text);
      if (restored.ready) {
        machine = fresh;
        return text;
      }
      if (restored.invalidLog !== undefined) return { rejected: 'invalid-log' };
      return { error: restored.error };
    }
    case 'in':
      if (machine === null) return { error: '`in` before `begin` or after `end`' };
      return machine.wire(rawBody(line, 'in') ?? JSON.stringify(body));
    case 'fate': {
      // The query fate(id) (S58): `{"fate": F}`, F as the core spells it (`Fate::to_json`).
      if (machine === null) return { error: '`fate` before `begin` or after `end`' };
      if (body === null || typeof body !== 'object' || typeof body.id !== 'string' || Object.keys(body).length !== 1) {
        return { error: '`fate` takes {id: string}' };
      }
      return `{"fate":${machine.fate(body.id)}}`;
    }
    case 'end':
      machine = null;
      return { ended: {} };
    default:
      return { error: `unknown request \`${key}\`` };
  }
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (line.trim() === '') return; // not a request: nothing to answer
  let answer;
  try {
    answer = serve(line);
  } catch (error) {
    answer = { error: `port failure: ${error && error.message}` };
  }
  reply(answer);
});
lines.on('close', () => {
  process.exitCode = 0;
});
