'use strict';
// The tape's opcode tables have one source, the native side's (src/tape.rs `tape_table`):
// tape.js decodes by them and refuses to load when its decoders and a table disagree.
const test = require('node:test');
const assert = require('node:assert/strict');

const native = require('../native');
const tape = require('../tape');

test('the tape decodes by the native opcode tables, which name the core\'s words', () => {
  const table = JSON.parse(native.tapeTable());
  assert.deepEqual(tape.TABLE, table);
  assert.deepEqual(table.events, [
    'agent/inbox/spliced', 'turn/start', 'step/start', 'user/message', 'step/end', 'turn/end',
  ]);
  assert.deepEqual(table.effects, [
    'inserted', 'discarded', 'claimed', 'status', 'error', 'beginTurn', 'beginMaintenance',
    'preStep', 'step', 'turnStopping', 'abort', 'disposed',
  ]);
  assert.deepEqual(table.reasons, ['completed', 'max-tokens', 'blocked', 'aborted', 'error', 'interrupted']);
  assert.deepEqual(table.causes, ['user', 'parent', 'hook', 'disposed']);
  assert.deepEqual(table.outputs, ['event', 'effect']);
  assert.deepEqual(table.targets, ['next-turn', 'next-step']);
  assert.deepEqual(table.statuses, ['idle', 'running']);
  // An agent's turn (src/session.rs), decoded by session.js, which checks it at load.
  assert.deepEqual(table.agentOutputs, [
    'effect', 'delivered', 'done', 'pending', 'fate', 'closed', 'refused', 'failed', 'startJob', 'abandon',
    'ended',
  ]);
  const codes = tape.codes(table);
  for (const [name, words] of Object.entries(table)) {
    if (name !== 'agentOutputs') assert.equal(codes[name].length, words.length, name);
  }
});

test('a table that disagrees with tape.js is refused, naming the words', () => {
  const table = JSON.parse(native.tapeTable());
  const added = { ...table, effects: [...table.effects, 'paused'] };
  assert.throws(() => tape.codes(added), {
    message: 'coxswain: the tape\'s effects table and its decoders disagree: no decoder for ["paused"], a decoder for no code []',
  });
  const dropped = { ...table, reasons: table.reasons.filter((word) => word !== 'blocked') };
  assert.throws(() => tape.codes(dropped), {
    message: 'coxswain: the tape\'s reasons table and its decoders disagree: no decoder for [], a decoder for no code ["blocked"]',
  });
  const twice = { ...table, causes: [...table.causes, 'user'] };
  assert.throws(() => tape.codes(twice), /the tape's causes table and its decoders disagree/);
  const { outputs: _, ...missing } = table;
  assert.throws(() => tape.codes(missing), { message: 'coxswain: the tape has no outputs table' });
  assert.throws(() => tape.codes({ ...table, releases: ['ack'] }), { message: 'coxswain: tape.js reads no releases table' });
  // Reordered words decode by their new codes: the order is the native side's alone.
  const swapped = { ...table, targets: [...table.targets].reverse() };
  assert.deepEqual(tape.codes(swapped).targets, ['next-step', 'next-turn']);
});

test('the agent turn table and session.js\'s decoders must agree too', () => {
  require('../session'); // loads: its decoders cover the native table exactly
  const table = JSON.parse(native.tapeTable());
  const added = { ...table, agentOutputs: [...table.agentOutputs, 'paused'] };
  const decoders = Object.fromEntries(table.agentOutputs.map((word) => [word, () => word]));
  assert.deepEqual(tape.decodersOf('agentOutputs', decoders, table).map((read) => read()), table.agentOutputs);
  assert.throws(() => tape.decodersOf('agentOutputs', decoders, added), {
    message: 'coxswain: the tape\'s agentOutputs table and its decoders disagree: no decoder for ["paused"], a decoder for no code []',
  });
});
