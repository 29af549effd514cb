'use strict';
// The fault hooks of a file log (its operation counts, a failing sync or write, a racing
// writer): only in the test build of the addon (`npm run build:test`, the `faults` cargo
// feature), never in the addon a user installs. A test that needs them fails, naming the build,
// when the addon lacks them.

/** The native log of `log` (a `FileLog`), with its fault hooks. */
function faults(log) {
  const native = log._native;
  if (typeof native.failSyncs !== 'function') {
    throw new Error('this test injects file faults: build the addon with `npm run build:test`');
  }
  return native;
}

module.exports = { faults };
