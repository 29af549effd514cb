'use strict';
// `npm install` of the packed tarball: builds the addon from the Rust sources `npm pack` put in
// `rust/` (scripts/vendor.js) with the user's cargo, at the versions of its lockfile, and puts it
// where native.js loads it (`native/coxswain.node`). Nothing is downloaded but crates.io sources.
// In the repository itself there is no `rust/` (the addon is built by `npm run build`): nothing to
// do. `CARGO_TARGET_DIR` is honoured (a cache shared between installs).
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const here = path.join(__dirname, '..');
const rust = path.join(here, 'rust');

/** The file name cargo gives a cdylib named `coxswain_node` on this platform. */
function cdylib() {
  switch (process.platform) {
    case 'darwin':
      return 'libcoxswain_node.dylib';
    case 'win32':
      return 'coxswain_node.dll';
    default:
      return 'libcoxswain_node.so';
  }
}

function build() {
  const target = process.env.CARGO_TARGET_DIR || path.join(rust, 'target');
  try {
    execFileSync(
      'cargo',
      ['build', '--release', '--locked', '--manifest-path', path.join(rust, 'Cargo.toml'), '-p', 'coxswain-node'],
      { stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: target } },
    );
  } catch (error) {
    console.error(
      'coxswain: building the native addon from source needs a Rust toolchain (cargo, Rust 1.88 ' +
        `or newer: https://rustup.rs): ${error.message}`,
    );
    process.exit(1);
  }
  fs.mkdirSync(path.join(here, 'native'), { recursive: true });
  fs.copyFileSync(path.join(target, 'release', cdylib()), path.join(here, 'native', 'coxswain.node'));
}

if (fs.existsSync(path.join(rust, 'Cargo.toml'))) {
  build();
}
