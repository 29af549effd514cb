'use strict';
// The `coxswain` CLI (adapters/cli), built by cargo: `coxswain verify` and `coxswain run` are the
// Rust side of the log interop tests. COXSWAIN_BIN names it; else the cargo target dir's debug
// build (`cargo build -p coxswain`).

const path = require('node:path');
const fs = require('node:fs');
const { spawnSync } = require('node:child_process');

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');

function binary() {
  if (process.env.COXSWAIN_BIN) return process.env.COXSWAIN_BIN;
  const target = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
  const bin = path.join(target, 'debug', 'coxswain');
  if (!fs.existsSync(bin)) {
    throw new Error(`${bin} is not built: run \`cargo build -p coxswain\` or set COXSWAIN_BIN`);
  }
  return bin;
}

/** Runs the CLI; resolves with {status, stdout, stderr}. */
function coxswain(...args) {
  const result = spawnSync(binary(), args, { encoding: 'utf8', timeout: 60_000 });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

module.exports = { coxswain, ROOT };
