'use strict';
// coxswain for Node.js: the verified delivery core (Rust, via N-API) for TypeScript agent
// harnesses. See index.d.ts for the types and README.md ("Node.js") for an example.

const errors = require('./errors');
const { Machine, Transition } = require('./machine');
const { Agent } = require('./agent');
const { FileLog, MemoryLog, encodeRecords, parseLog } = require('./log');

/** A human prompt: `{id, source: {kind: 'user'}, content}`. */
function userMessage(id, content) {
  return { id, source: { kind: 'user' }, content };
}

module.exports = {
  Machine,
  Transition,
  Agent,
  FileLog,
  MemoryLog,
  encodeRecords,
  parseLog,
  userMessage,
  ...errors,
};
delete module.exports.rejection;
