'use strict';
// `npm pack` (prepack): puts the Rust sources the addon is built from into `rust/`, a cargo
// workspace of its own, so that the tarball installs anywhere and builds from source
// (scripts/install.js; nothing prebuilt). `rust/` holds the binding's crate (`rust/node`: this
// directory's Cargo.toml, build.rs and src/) and the pure crates it uses
// (`rust/crates/{machine,log,session}`, from core/, `rust/crates/kit`, the bindings' kit, and
// `rust/crates/filelog`, the one file log of every runtime), under a manifest made from the repository's
// own (its package fields, dependency versions and lints; only these members) and its lockfile,
// trimmed offline to what these crates use, so the install builds with `--locked` the exact
// versions the repository tests. The crates' manifests lose their `[dev-dependencies]` (no tests
// are vendored). `--clean` (postpack) removes `rust/` again.
//
// Usage: node scripts/vendor.js [--clean]
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const here = path.join(__dirname, '..');
const repo = path.join(here, '..', '..');
const out = path.join(here, 'rust');

/** The pure crates the binding uses: their folder in the repository, and in `rust/crates`. */
const CRATES = [
  ['core/machine', 'machine', 'coxswain-core'],
  ['core/log', 'log', 'coxswain-log'],
  ['core/session', 'session', 'coxswain-session'],
  ['adapters/kit', 'kit', 'coxswain-binding-kit'],
  ['adapters/filelog', 'filelog', 'coxswain-file-log'],
  ['model/conformance', 'conformance', 'coxswain-conformance'],
];

function copy(from, to) {
  fs.cpSync(from, to, { recursive: true, dereference: true });
}

/**
 * A crate's manifest without its `[dev-dependencies]` (and `[target.*.dev-dependencies]`), as
 * `cargo package` leaves it: `rust/` holds no tests, and a dev-dependency may be a path crate of
 * the repository that is not vendored (the simulator, `tests/sim`), which cargo would fail to load.
 */
function withoutDevDependencies(toml) {
  const kept = [];
  let dropping = false;
  for (const line of toml.split('\n')) {
    const header = /^\s*\[([^\]]+)\]\s*(#.*)?$/.exec(line);
    if (header) dropping = /(^|\.)dev-dependencies$/.test(header[1].trim());
    if (!dropping) kept.push(line);
  }
  return kept.join('\n');
}

/** The text of one `[section]` of a TOML file (up to the next section header). */
function section(toml, name) {
  const start = toml.indexOf(`\n[${name}]\n`);
  if (start < 0) throw new Error(`Cargo.toml has no [${name}] section`);
  const body = toml.slice(start + name.length + 4);
  const end = body.search(/\n\[/);
  return `[${name}]\n${end < 0 ? body : body.slice(0, end + 1)}`;
}

/** The workspace manifest of `rust/`: the repository's package fields, dependencies and lints. */
function manifest(root) {
  const members = ['node', ...CRATES.map(([, name]) => `crates/${name}`)];
  let dependencies = section(root, 'workspace.dependencies')
    .split('\n')
    .filter((line) => !/^coxswain-/.test(line) || CRATES.some(([, , c]) => line.startsWith(`${c} `)))
    .join('\n');
  for (const [folder, name] of CRATES) {
    dependencies = dependencies.replace(`path = "${folder}"`, `path = "crates/${name}"`);
  }
  return [
    '# Made by scripts/vendor.js from the coxswain repository\'s Cargo.toml for `npm pack`.',
    '[workspace]',
    'resolver = "2"',
    `members = [${members.map((m) => JSON.stringify(m)).join(', ')}]`,
    '',
    section(root, 'workspace.package'),
    dependencies,
    section(root, 'workspace.lints.rust'),
    '[profile.release]',
    'strip = true',
    '',
  ].join('\n');
}

function vendor() {
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(path.join(out, 'crates'), { recursive: true });
  for (const [folder, name] of CRATES) {
    const to = path.join(out, 'crates', name);
    fs.mkdirSync(to);
    copy(path.join(repo, folder, 'src'), path.join(to, 'src'));
    const crateToml = fs.readFileSync(path.join(repo, folder, 'Cargo.toml'), 'utf8');
    fs.writeFileSync(path.join(to, 'Cargo.toml'), withoutDevDependencies(crateToml));
    for (const file of ['LICENSE-APACHE', 'LICENSE-MIT']) {
      copy(path.join(repo, file), path.join(to, file));
    }
  }
  fs.mkdirSync(path.join(out, 'node'));
  for (const file of ['Cargo.toml', 'build.rs', 'src']) {
    copy(path.join(here, file), path.join(out, 'node', file));
  }
  // The crates' `readme.workspace`: the binding's README.
  fs.copyFileSync(path.join(here, 'README.md'), path.join(out, 'README.md'));
  const root = fs.readFileSync(path.join(repo, 'Cargo.toml'), 'utf8');
  fs.writeFileSync(path.join(out, 'Cargo.toml'), manifest(root));
  // The repository's lockfile, trimmed to these crates without the network.
  fs.copyFileSync(path.join(repo, 'Cargo.lock'), path.join(out, 'Cargo.lock'));
  execFileSync('cargo', ['metadata', '--offline', '--format-version', '1'], {
    cwd: out,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

if (process.argv.includes('--clean')) {
  fs.rmSync(out, { recursive: true, force: true });
} else {
  vendor();
}
