#!/usr/bin/env node
'use strict';
// The Node agent on the real file log (issue 52): bench 1's follow-up cycle (`followup`, then
// `whenIdle`: three appends a cycle) through `Agent` on a `FileLog`, at sync on
// (`every-append`: an `fdatasync` an append) and off (`never`). Prints µs/cycle for each.
//
// `node bench/filelog.js [cycles] [rounds] [--before DIR]` (defaults 2000 and 7). With
// `--before DIR` (the adapters/node directory of another checkout, its addon built) it measures
// both packages in the same run, alternating: each round runs, for each sync policy, one child
// process on DIR's package and one on this one (in turn which goes first), and it prints the
// median of each and the ratio this/before for each row (below 1: this one is faster).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const POLICIES = [['every-append', 'sync on'], ['never', 'sync off']];
const HERE = path.join(__dirname, '..');

/** One measurement in this process: the package at `dir`, `cycles` cycles at `sync`; µs/cycle. */
async function one(dir, sync, cycles) {
  const { Agent, FileLog, userMessage } = require(dir);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'coxswain-bench-filelog-'));
  try {
    const log = await FileLog.open(path.join(tmp, 'session.jsonl'), { sync });
    const { agent } = await Agent.open({ step: () => 'completed' }, log, { memory: 0 });
    const message = userMessage('m', 'hello');
    const cycle = async () => {
      await agent.followup(message);
      await agent.whenIdle();
    };
    for (let i = 0; i < Math.max(1, Math.floor(cycles / 10)); i++) await cycle(); // warm-up
    const start = process.hrtime.bigint();
    for (let i = 0; i < cycles; i++) await cycle();
    const us = Number(process.hrtime.bigint() - start) / cycles / 1000;
    await agent.dispose();
    return us;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** One measurement in a child process (a fresh process each: neither package warms the other). */
function child(dir, sync, cycles) {
  const run = spawnSync(process.execPath, [__filename, '--one', dir, sync, String(cycles)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${dir} ${sync}: ${run.stderr}`);
  return Number(run.stdout.trim());
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const us = (value) => `${value.toFixed(1)} µs/cycle`;

async function main(argv) {
  if (argv[0] === '--one') {
    console.log(await one(argv[1], argv[2], Number(argv[3])));
    return;
  }
  const at = argv.indexOf('--before');
  const before = at >= 0 ? path.resolve(argv[at + 1]) : null;
  const rest = at >= 0 ? [...argv.slice(0, at), ...argv.slice(at + 2)] : argv;
  const cycles = Number(rest[0] ?? 2000);
  const rounds = Math.max(1, Number(rest[1] ?? 7));
  if (before === null) {
    console.log(`node ${process.version}, the agent on a FileLog, ${cycles} cycles, median of ${rounds} rounds`);
    for (const [sync, label] of POLICIES) {
      const times = [];
      for (let round = 0; round < rounds; round++) times.push(await one(HERE, sync, cycles));
      console.log(`agent, FileLog ${sync} (${label}): ${us(median(times))}`);
    }
    return;
  }
  const times = new Map(POLICIES.map(([sync]) => [sync, { before: [], after: [] }]));
  for (let round = 0; round < rounds; round++) {
    for (const [sync] of POLICIES) {
      const order = round % 2 === 0 ? ['before', 'after'] : ['after', 'before'];
      for (const which of order) {
        times.get(sync)[which].push(child(which === 'before' ? before : HERE, sync, cycles));
      }
    }
  }
  console.log(`node ${process.version}, the agent on a FileLog, ${cycles} cycles, ${rounds} alternating rounds, medians`);
  console.log(`before: ${before}`);
  for (const [sync, label] of POLICIES) {
    const { before: b, after: a } = times.get(sync);
    const [mb, ma] = [median(b), median(a)];
    console.log(`agent, FileLog ${sync} (${label}): before ${us(mb)}, after ${us(ma)}, after/before ${(ma / mb).toFixed(2)}x`);
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
