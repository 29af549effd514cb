'use strict';
// `Agent.open`'s options, checked, with the session layer's defaults (`Options::DEFAULT`, read
// from the addon: `native.agentDefaults()`), spelled nowhere here.

const native = require('./native');
const errors = require('./errors');
const { capacity, bound, redelivery, UNBOUNDED } = require('./machine');

/** The session layer's defaults (`Options::DEFAULT`): `abortGraceMs`, `retryAfterMs`, `maxBatch`, `maxIdBytes`, `maxMessageBytes`. */
const DEFAULTS = Object.freeze(native.agentDefaults());
const MAX_CAPACITY = 1 << 20;
/** The default admission bound (S55), as the tokio adapter's `Options::max_pending`. */
const DEFAULT_MAX_PENDING = 10_000;

/**
 * `Agent.open`'s options, checked (`InvalidOptionsError`; `InvalidRedeliveryError` for the
 * allowance, checked first), with their defaults. `redelivery` (S59, default 0) is crash
 * repair's allowance; `resumeOnOpen` (default false: S48 unchanged) sends `resume` (S57) once
 * the agent is open. The session's options absent are `null`: the session layer's defaults.
 */
function agentOptions(options) {
  const redeliver = redelivery(options.redelivery);
  const resumeOnOpen = options.resumeOnOpen ?? false;
  if (typeof resumeOnOpen !== 'boolean') {
    throw new errors.InvalidOptionsError(`resumeOnOpen ${String(resumeOnOpen)} is not a boolean`);
  }
  const memory = capacity(options.memory ?? 256);
  const maxBatch = options.maxBatch ?? DEFAULTS.maxBatch;
  const maxPending = bound(options.maxPending === undefined ? DEFAULT_MAX_PENDING : options.maxPending);
  if (memory !== UNBOUNDED && memory > MAX_CAPACITY) {
    throw new errors.InvalidOptionsError(`memory ${memory} is above ${MAX_CAPACITY}`);
  }
  if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_CAPACITY) {
    throw new errors.InvalidOptionsError(`maxBatch ${maxBatch} is not within 1..=${MAX_CAPACITY}`);
  }
  const [grace, retry] = [options.abortGraceMs ?? null, options.retryAfterMs ?? null];
  if (grace !== null && !(typeof grace === 'number' && grace >= 0)) {
    throw new errors.InvalidOptionsError(`abortGraceMs ${grace} is not a number >= 0 (Infinity: never)`);
  }
  if (retry !== null && !(typeof retry === 'number' && retry >= 0 && retry < Infinity)) {
    throw new errors.InvalidOptionsError(`retryAfterMs ${retry} is not a finite number of milliseconds >= 0`);
  }
  const [maxIdBytes, maxMessageBytes] = [size(options, 'maxIdBytes'), size(options, 'maxMessageBytes')];
  return {
    memory, maxBatch, maxPending, redelivery: redeliver, resumeOnOpen,
    abortGraceMs: grace, retryAfterMs: retry, maxIdBytes, maxMessageBytes,
  };
}

/** A size limit: absent, or an integer within 1..=2^32-1. */
function size(options, name) {
  const value = options[name];
  if (value === undefined || value === null) return null;
  if (!Number.isInteger(value) || value < 1 || value > 0xffffffff) {
    throw new errors.InvalidOptionsError(`${name} ${value} is not an integer within 1..=2^32-1`);
  }
  return value;
}

module.exports = { agentOptions, DEFAULTS };
