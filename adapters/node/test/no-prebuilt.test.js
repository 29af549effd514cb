'use strict';
// The no-prebuilt rule (docs/node.md): scripts/no-prebuilt.js must reject every way a
// lockfile entry can carry a platform binary, and the committed lockfile must pass it.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { offenders } = require('../scripts/no-prebuilt.js');

const lock = (packages) => ({ lockfileVersion: 3, packages: { '': { name: 'x' }, ...packages } });

test('each platform marker is reported with its reason', () => {
  const found = offenders(
    lock({
      'node_modules/typescript': { version: '6.0.3' },
      'node_modules/@types/node': { version: '20.19.43' },
      'node_modules/@napi-rs/lzma-linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'] },
      'node_modules/esbuild': { hasInstallScript: true },
      'node_modules/a/node_modules/@swc/core-darwin-arm64': { version: '1.0.0' },
      'node_modules/fsevents': { os: ['darwin'] },
    }),
  );
  assert.deepEqual(found, [
    {
      name: '@napi-rs/lzma-linux-x64-gnu',
      reasons: ['os: ["linux"]', 'cpu: ["x64"]', 'libc: ["glibc"]', 'platform-binary name'],
    },
    { name: 'esbuild', reasons: ['hasInstallScript'] },
    { name: '@swc/core-darwin-arm64', reasons: ['platform-binary name'] },
    { name: 'fsevents', reasons: ['os: ["darwin"]'] },
  ]);
});

test('the committed package-lock.json installs no platform-specific package', () => {
  const script = path.join(__dirname, '..', 'scripts', 'no-prebuilt.js');
  const out = execFileSync(process.execPath, [script], { encoding: 'utf8' });
  assert.equal(out, 'no-prebuilt: 4 packages, none platform-specific\n');
});
