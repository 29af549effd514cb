#!/usr/bin/env node
'use strict';
// The follow-up cycle through Node (benches/'s bench 1: followup → claim → preStep enter → step
// completed → turnStopping done, every transition settled: its events read, its effects
// drained), beside a plain JS array doing the equivalent queue work, measured in the same run:
// rounds that alternate the two, the median of each (this VM's timings wander by ±30 % between
// runs; the median of paired rounds does not). Prints ns/cycle for each and the ratio.
// `node bench/cycle.js [cycles] [rounds]` (defaults 200000 and 7, cycles per round split
// evenly); the Agent line adds the Promise driver on an in-memory log (no disk).
//
// The harness rows drive `Machine` as a harness that owns its log does (issue 54): each event
// appended to its own log (`JSON.stringify` of the event pushed onto an array standing in for
// the log) before `persisted()`, every input able to be rolled back: `implicitBatch` (each input
// its own batch, one N-API crossing per input) and, to compare, explicit `beginBatch()` /
// `commitBatch()` around each input. Their baseline is the JS array's cycle with the same
// appends (the 7 durable events of its 15 outputs), in the same rounds.

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

/**
 * One follow-up cycle as a harness drives it: each transition's events appended to `log` (as
 * JSON text) before `persisted()`; with `explicit`, each input inside `beginBatch()` /
 * `commitBatch()` (an `implicitBatch` machine needs neither to be able to `rollBack()`).
 */
function harnessCycle(machine, log, explicit) {
  let outputs = 0;
  const settle = (transition) => {
    const events = transition.events;
    for (let k = 0; k < events.length; k++) log.push(JSON.stringify(events[k]));
    const effects = transition.persisted();
    if (explicit) machine.commitBatch();
    outputs += events.length + effects.length;
    return effects;
  };
  if (explicit) machine.beginBatch();
  const effects = settle(machine.followup(message));
  const request = effects[effects.length - 1].request.preStep;
  if (explicit) machine.beginBatch();
  settle(machine.answerPreStep({ enter: request.messages }));
  if (explicit) machine.beginBatch();
  settle(machine.answerStep('completed'));
  if (explicit) machine.beginBatch();
  settle(machine.answerTurnStopping('done'));
  log.length = 0;
  return outputs;
}

/** The baseline's cycle with the harness's appends: each `event` output's value appended to `log` as JSON text. */
function baselineHarnessCycle(queue, log) {
  let outputs = 0;
  for (const round of baselineRounds) {
    for (const output of round) queue.push(output);
    while (queue.length > 0) {
      const output = queue.shift();
      if (output.event !== undefined) log.push(JSON.stringify(output.event));
      outputs += 1;
    }
  }
  log.length = 0;
  return outputs;
}

/** The baseline's 15 outputs, built once (the harness baseline's; `baselineCycle` builds its own each cycle, as before). */
const baselineRounds = [
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

  // The harness rows, in rounds of their own (the four alternate): the implicit-batch machine,
  // the explicit-batch machine, the baseline with the same appends, and the plain baseline.
  const implicit = new Machine({ implicitBatch: true });
  const explicit = new Machine();
  const log = [];
  const harnessCheck = [harnessCycle(implicit, log, false), harnessCycle(explicit, log, true)];
  if (harnessCheck[0] !== 15 || harnessCheck[1] !== 15 || baselineHarnessCycle(queue, log) !== 15) {
    throw new Error(`a harness cycle settles 15 outputs, got ${harnessCheck}`);
  }
  time(warm, () => harnessCycle(implicit, log, false));
  time(warm, () => harnessCycle(explicit, log, true));
  time(warm * 4, () => baselineHarnessCycle(queue, log));
  const [harnesses, explicits, logBaselines, plainBaselines] = [[], [], [], []];
  for (let round = 0; round < rounds; round++) {
    harnesses.push(time(perRound, () => harnessCycle(implicit, log, false)));
    explicits.push(time(perRound, () => harnessCycle(explicit, log, true)));
    logBaselines.push(time(perRound * 4, () => baselineHarnessCycle(queue, log)));
    plainBaselines.push(time(perRound * 10, () => baselineCycle(queue)));
  }
  const [harness, explicitHarness] = [median(harnesses), median(explicits)];
  const [logBaseline, plainBaseline] = [median(logBaselines), median(plainBaselines)];

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
  console.log(`harness (implicitBatch machine, its own log append per event): ${ns(harness)}`);
  console.log(`harness, explicit beginBatch/commitBatch per input: ${ns(explicitHarness)}`);
  console.log(`baseline with the same log appends (JS array): ${ns(logBaseline)}`);
  console.log(`baseline (JS array, these rounds): ${ns(plainBaseline)}`);
  console.log(`ratio harness/baseline with appends: ${(harness / logBaseline).toFixed(2)}x`);
  console.log(`ratio harness/baseline: ${(harness / plainBaseline).toFixed(2)}x`);
  console.log(`ratio explicit harness/baseline with appends: ${(explicitHarness / logBaseline).toFixed(2)}x`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
