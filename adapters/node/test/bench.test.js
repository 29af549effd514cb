'use strict';
// The cycle bench runs (a smoke run of a few cycles: it checks that a cycle settles exactly 15
// outputs and prints both figures and the ratio; timings are never asserted).

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('bench/cycle.js prints the machine, the baseline, the harness rows and their ratios', () => {
  const bench = spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'cycle.js'), '50'], {
    encoding: 'utf8',
  });
  assert.equal(bench.status, 0, bench.stderr);
  const lines = bench.stdout.trim().split('\n');
  assert.equal(lines.length, 13);
  assert.match(lines[1], /^machine \(Rust core via N-API\): \d+\.\d ns\/cycle$/);
  assert.match(lines[2], /^baseline \(JS array, 15 push\+shift\): \d+\.\d ns\/cycle$/);
  assert.match(lines[3], /^ratio machine\/baseline: \d+\.\dx$/);
  assert.match(lines[4], /^agent \(Promise driver, in-memory log\): \d+\.\d ns\/cycle$/);
  assert.match(lines[5], /^ratio agent\/baseline: \d+\.\dx$/);
  assert.match(lines[6], /^harness \(implicitBatch machine, its own log append per event\): \d+\.\d ns\/cycle$/);
  assert.match(lines[7], /^harness, explicit beginBatch\/commitBatch per input: \d+\.\d ns\/cycle$/);
  assert.match(lines[8], /^baseline with the same log appends \(JS array\): \d+\.\d ns\/cycle$/);
  assert.match(lines[9], /^baseline \(JS array, these rounds\): \d+\.\d ns\/cycle$/);
  assert.match(lines[10], /^ratio harness\/baseline with appends: \d+\.\d\dx$/);
  assert.match(lines[11], /^ratio harness\/baseline: \d+\.\d\dx$/);
  assert.match(lines[12], /^ratio explicit harness\/baseline with appends: \d+\.\d\dx$/);
});

test('bench/restore.js restores the same log through Agent.open and the Rust restore, and prints their ratio', () => {
  const bench = spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'restore.js'), '500'], {
    encoding: 'utf8',
  });
  assert.equal(bench.status, 0, bench.stderr);
  const lines = bench.stdout.trim().split('\n');
  assert.equal(lines.length, 4);
  assert.match(lines[0], /^restore of a 500-record log \(\d+ bytes\), medians of 7$/);
  assert.match(lines[1], /^Agent\.open \(MemoryLog\): \d+\.\d ms$/);
  assert.match(lines[2], /^the Rust restore of the same bytes \(ResumePlan::from_bytes\): \d+\.\d ms$/);
  assert.match(lines[3], /^ratio Agent\.open\/Rust: \d+\.\d\dx$/);
});

test('bench/filelog.js prints the agent on a FileLog at sync on and off', () => {
  const bench = spawnSync(process.execPath, [path.join(__dirname, '..', 'bench', 'filelog.js'), '20', '1'], {
    encoding: 'utf8',
  });
  assert.equal(bench.status, 0, bench.stderr);
  const lines = bench.stdout.trim().split('\n');
  assert.equal(lines.length, 3);
  assert.match(lines[0], /^node v\d+\.\d+\.\d+, the agent on a FileLog, 20 cycles, median of 1 rounds$/);
  assert.match(lines[1], /^agent, FileLog every-append \(sync on\): \d+\.\d µs\/cycle$/);
  assert.match(lines[2], /^agent, FileLog never \(sync off\): \d+\.\d µs\/cycle$/);
});
