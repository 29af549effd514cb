#!/usr/bin/env node
'use strict';
// The follow-up cycle through Node (benches/'s bench 1: followup → claim → preStep enter → step
// completed → turnStopping done, every transition settled: its events read, its effects
// drained), beside a plain JS array doing the equivalent queue work, measured in the same run:
// rounds that alternate the two, the median of each (this VM's timings wander by ±30 % between
// runs; the median of paired rounds does not). Prints ns/cycle for each and the ratio.
// `node bench/cycle.js [cycles] [rounds]` (defaults 200000 and 7, cycles per round split
// evenly); the Agent line adds the Promise driver on an in-memory log (no disk).

const { Machine, Agent, MemoryLog, userMessage } = require('..');

const cycles = Number(process.argv[2] ?? 200_000);
const rounds = Math.max(1, Number(process.argv[3] ?? 7));
const message = userMessage('m', 'hello');

/** One follow-up cycle on the machine; returns the number of outputs it settled. */
function machineCycle(machine) {
  let outputs = 0;
  const followup = machine.followup(message);
  outputs += followup.events.length;
  const effects = followup.persisted();
  outputs += effects.length;
  const request = effects[effects.length - 1].request.preStep;
  const enter = machine.answerPreStep({ enter: request.messages });
  outputs += enter.events.length + enter.persisted().length;
  const step = machine.answerStep('completed');
  outputs += step.events.length + step.persisted().length;
  const done = machine.answerTurnStopping('done');
  outputs += done.events.length + done.persisted().length;
  return outputs;
}

/**
 * The baseline: the same 15 outputs (8, 3, 2, 2 per input, as benches/ `baseline_cycle`) as
 * plain objects pushed onto and shifted off a JS array, the message object shared by the four
 * that carry it (S8) — the queue work any JS inbox does, without a state machine.
 */
function baselineCycle(queue) {
  let outputs = 0;
  const rounds = [
    [
      { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, inserted: [message], wakeup: true } } },
      { notify: { type: 'agent/inbox/inserted', message } },
      { notify: { type: 'agent/status', status: 'running' } },
      { event: { type: 'turn/start', data: { turn: 1 } } },
      { begin: { turn: 1 } },
      { event: { type: 'agent/inbox/spliced', data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } } },
      { notify: { type: 'agent/inbox/claimed', message, turn: 1 } },
      { request: { preStep: { turn: 1, step: 1, messages: [message] } } },
    ],
    [
      { event: { type: 'step/start', data: { turn: 1, step: 1 } } },
      { event: { type: 'user/message', data: message } },
      { request: { step: { turn: 1, step: 1 } } },
    ],
    [{ event: { type: 'step/end', data: { turn: 1, step: 1 } } }, { request: { turnStopping: { turn: 1 } } }],
    [
      { event: { type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } } },
      { notify: { type: 'agent/status', status: 'idle' } },
    ],
  ];
  for (const round of rounds) {
    for (const output of round) queue.push(output);
    while (queue.length > 0) {
      if (queue.shift() !== undefined) outputs += 1;
    }
  }
  return outputs;
}

function time(count, body) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) body();
  return Number(process.hrtime.bigint() - start) / count;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function timeAsync(count, body) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) await body();
  return Number(process.hrtime.bigint() - start) / count;
}

async function main() {
  const machine = new Machine();
  const queue = [];
  const outputs = machineCycle(machine);
  if (outputs !== 15 || baselineCycle(queue) !== 15) {
    throw new Error(`a cycle settles 15 outputs (14 wire outputs and one begin), got ${outputs}`);
  }
  const warm = Math.max(1, Math.floor(cycles / 10));
  time(warm, () => machineCycle(machine));
  time(warm * 10, () => baselineCycle(queue));
  const perRound = Math.max(1, Math.floor(cycles / rounds));
  const [nodes, baselines] = [[], []];
  for (let round = 0; round < rounds; round++) {
    nodes.push(time(perRound, () => machineCycle(machine)));
    baselines.push(time(perRound * 10, () => baselineCycle(queue)));
  }
  const [node, baseline] = [median(nodes), median(baselines)];

  const { agent } = await Agent.open({ step: () => 'completed' }, new MemoryLog(), { memory: 0 });
  const agentCycle = async () => {
    await agent.followup(message);
    await agent.whenIdle();
  };
  const agentCycles = Math.max(1, Math.floor(cycles / 10));
  await timeAsync(Math.max(1, Math.floor(agentCycles / 10)), agentCycle);
  const drivens = [];
  for (let round = 0; round < rounds; round++) {
    drivens.push(await timeAsync(Math.max(1, Math.floor(agentCycles / rounds)), agentCycle));
  }
  const driven = median(drivens);
  await agent.dispose();

  const ns = (value) => `${value.toFixed(1)} ns/cycle`;
  console.log(`node ${process.version}, ${cycles} cycles (baseline ${cycles * 10}, agent ${agentCycles}), median of ${rounds} rounds`);
  console.log(`machine (Rust core via N-API): ${ns(node)}`);
  console.log(`baseline (JS array, 15 push+shift): ${ns(baseline)}`);
  console.log(`ratio machine/baseline: ${(node / baseline).toFixed(1)}x`);
  console.log(`agent (Promise driver, in-memory log): ${ns(driven)}`);
  console.log(`ratio agent/baseline: ${(driven / baseline).toFixed(1)}x`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
