#!/usr/bin/env node
'use strict';
// Restoring a session of RECORDS records (default 100000: whole follow-up turns, then quiet
// injects) through `Agent.open` on a `MemoryLog` of its bytes, beside the Rust restore of the
// same bytes in the same process (the session layer's `ResumePlan::from_bytes`, through the
// addon's `resume`, with no JavaScript around it). Medians of 7 interleaved runs.
// `node bench/restore.js [RECORDS]`

const native = require('../native');
const { Agent, Machine, MemoryLog, userMessage } = require('..');
const { encodeRecords } = require('../log');

const records = Number(process.argv[2] ?? 100_000);

/** A log of `count` records: 7-record follow-up turns, then quiet injects to the count. */
function sessionLog(count) {
  const machine = new Machine();
  const events = [];
  const take = (transition) => {
    events.push(...transition.events);
    return transition.persisted();
  };
  for (let i = 0; events.length + 7 <= count; i += 1) {
    const message = userMessage(`m${i}`, `hello ${i}`);
    take(machine.followup(message));
    take(machine.answerPreStep({ enter: [message] }));
    take(machine.answerStep('completed'));
    take(machine.answerTurnStopping('done'));
  }
  for (let i = 0; events.length < count; i += 1) take(machine.inject(userMessage(`q${i}`, 'quiet')));
  return Buffer.from(encodeRecords(1, events));
}

const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

async function main() {
  const bytes = sessionLog(records);
  const host = { async step() { return 'completed'; } };
  const ours = [];
  const rust = [];
  for (let round = 0; round < 7; round += 1) {
    let start = process.hrtime.bigint();
    const reply = JSON.parse(new native.NativeMachine(0, null, null).resume(bytes));
    rust.push(ms(start));
    if (reply.ok === undefined || reply.ok.records !== records) throw new Error(`not restored: ${JSON.stringify(reply)}`);
    start = process.hrtime.bigint();
    const { agent, recovery } = await Agent.open(host, new MemoryLog(bytes));
    ours.push(ms(start));
    if (recovery.records !== records) throw new Error(`Agent.open read ${recovery.records} records`);
    await agent.dispose();
  }
  const [agent, baseline] = [median(ours), median(rust)];
  console.log(`restore of a ${records}-record log (${bytes.length} bytes), medians of 7`);
  console.log(`Agent.open (MemoryLog): ${agent.toFixed(1)} ms`);
  console.log(`the Rust restore of the same bytes (ResumePlan::from_bytes): ${baseline.toFixed(1)} ms`);
  console.log(`ratio Agent.open/Rust: ${(agent / baseline).toFixed(2)}x`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
