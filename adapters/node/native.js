'use strict';
// Loads the addon built from this directory's Rust crate (`npm run build`: napi-rs, from source).
const path = require('node:path');

const file = path.join(__dirname, 'native', 'coxswain.node');
try {
  module.exports = require(file);
} catch (error) {
  const hint = new Error(
    `coxswain: the native addon ${file} is not built; run ` +
      '`npm --prefix adapters/node ci && npm --prefix adapters/node run build` ' +
      `(it builds the Rust crate with cargo): ${error.message}`,
  );
  hint.cause = error;
  throw hint;
}
