'use strict';
// Reads a conformance trace (docs/FORMAT.md) into what a replayer needs: the `given` value,
// whether restoring from it must fail (`invalid-log`), with `given.repair` the events crash
// repair must append (`repaired`: the `out` lines right after `given`, S50, S59), and every step
// in order: an input with what it must do — `{outputs: [OUT…]}` (all its outputs, in order) or
// `{rejected: KIND}` — or a `fate` query with its answer (`{fate: id, is: F}`, S58).

const fs = require('node:fs');
const path = require('node:path');

const CORPUS = path.resolve(__dirname, '..', '..', '..', '..', 'tests', 'conformance');

/** Every trace file of the public corpus, sorted. */
function corpus() {
  return fs
    .readdirSync(CORPUS)
    .filter((name) => name.endsWith('.jsonl'))
    .sort()
    .map((name) => path.join(CORPUS, name));
}

function parseTrace(text) {
  const trace = { given: null, invalidLog: false, repaired: [], steps: [] };
  let seenLine = false;
  let current = null;
  for (const raw of text.split('\n')) {
    if (raw.trim() === '') continue;
    const line = JSON.parse(raw);
    const keys = Object.keys(line);
    if (keys.length !== 1) throw new Error(`a trace line has exactly one key: ${raw}`);
    const [key] = keys;
    const body = line[key];
    if (key === 'note') continue;
    if (key === 'given') {
      if (seenLine) throw new Error('`given` must come first');
      trace.given = body;
    } else if (key === 'in') {
      current = { input: body, expected: { outputs: [] } };
      trace.steps.push(current);
    } else if (key === 'fate') {
      const keys = Object.keys(body ?? {}).sort().join(',');
      if (keys !== 'id,is' || typeof body.id !== 'string') throw new Error(`a fate line is {id, is}: ${raw}`);
      trace.steps.push({ fate: body.id, is: body.is });
      current = null;
    } else if (key === 'out') {
      if (trace.steps.length === 0 && trace.given?.repair !== undefined) {
        trace.repaired.push(body); // what crash repair appended (S50, S59)
      } else if (!current || current.expected.rejected !== undefined) {
        throw new Error(`out without input: ${raw}`);
      } else {
        current.expected.outputs.push(body);
      }
    } else if (key === 'rejected') {
      if (current === null && trace.given !== null && body === 'invalid-log') {
        trace.invalidLog = true;
      } else if (current && current.expected.outputs.length === 0) {
        current.expected = { rejected: body };
      } else {
        throw new Error(`misplaced rejection: ${raw}`);
      }
    } else {
      throw new Error(`unknown key ${key}`);
    }
    seenLine = true;
  }
  return trace;
}

function readTrace(file) {
  return parseTrace(fs.readFileSync(file, 'utf8'));
}

module.exports = { corpus, parseTrace, readTrace, CORPUS };
