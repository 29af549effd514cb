'use strict';
// Project rule (RULES.md, docs/node.md): nothing may download prebuilt binaries or toolchains
// at install or run time; the addon is built from source by cargo. This check reads
// package-lock.json and fails when `npm ci` would install any package that is, or may carry, a
// platform binary: one restricted by `os` / `cpu` / `libc`, one with an install script
// (`hasInstallScript`: postinstall downloaders such as esbuild's), or one whose name follows a
// platform-binary naming pattern (`@scope/pkg-linux-x64-gnu`, `…-darwin-arm64`, `…-wasm32-wasi`…).
//
// Usage: node scripts/no-prebuilt.js [path/to/package-lock.json]   (exit 0 clean, 1 offending)
const fs = require('node:fs');
const path = require('node:path');

const PLATFORM_NAME =
  /(^|[-_./@])(linux|darwin|win32|windows|freebsd|openbsd|netbsd|android|sunos|aix|musl|gnu|gnueabihf|msvc|x64|x86|ia32|arm|arm64|aarch64|riscv64|ppc64|s390x|loong64|wasm32|wasi)([-_.]|$)/i;

/** The offending entries of a parsed lockfile (v2/v3 `packages`), each `{ name, reasons }`. */
function offenders(lock) {
  const found = [];
  for (const [key, entry] of Object.entries(lock.packages ?? {})) {
    if (key === '') continue; // the project itself
    const name = entry.name ?? key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const reasons = [];
    for (const field of ['os', 'cpu', 'libc']) {
      if (entry[field] !== undefined) reasons.push(`${field}: ${JSON.stringify(entry[field])}`);
    }
    if (entry.hasInstallScript) reasons.push('hasInstallScript');
    if (PLATFORM_NAME.test(name)) reasons.push('platform-binary name');
    if (reasons.length > 0) found.push({ name, reasons });
  }
  return found;
}

function main() {
  const file = path.resolve(process.argv[2] ?? path.join(__dirname, '..', 'package-lock.json'));
  let lock;
  try {
    lock = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (error) {
    console.error(`no-prebuilt: cannot read ${file}: ${error.message}`);
    return 2;
  }
  if (lock.packages === undefined) {
    console.error(`no-prebuilt: ${file} has no "packages" (lockfileVersion ${lock.lockfileVersion})`);
    return 2;
  }
  const bad = offenders(lock);
  for (const { name, reasons } of bad) console.error(`no-prebuilt: ${name}: ${reasons.join(', ')}`);
  if (bad.length > 0) {
    console.error(`no-prebuilt: ${bad.length} package(s) in ${file} may install prebuilt binaries`);
    return 1;
  }
  console.log(`no-prebuilt: ${Object.keys(lock.packages).length - 1} packages, none platform-specific`);
  return 0;
}

module.exports = { offenders };
if (require.main === module) process.exitCode = main();
