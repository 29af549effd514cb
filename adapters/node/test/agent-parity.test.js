'use strict';
// The agent parity suite's Node runner (issue 51, part 5): every scenario in
// tests/agents/scenarios (tests/agents/FORMAT.md) run through the Node `Agent`, which must give
// each step's typed outcome and the log's exact bytes the scenario gives. The tokio, threads and
// Python runners hold their drivers to the same files. A thin translation: the script to the
// binding's API, its outcomes and errors to `{ok}` / `{error: kind}`.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const coxswain = require('..');

const { Agent, MemoryLog, Machine } = coxswain;
const SCENARIOS = path.join(__dirname, '..', '..', '..', 'tests', 'agents', 'scenarios');
const DRIVER = 'node';
const WITHIN_MS = 10000;

/** A scenario's message: source user, with the `$nest` / `$text` shorthands expanded. */
function message({ id, content }) {
  return { id, content: expand(content), source: { kind: 'user' } };
}

function expand(content) {
  if (content && typeof content === 'object' && !Array.isArray(content)) {
    if (typeof content.$nest === 'number') {
      let value = [];
      for (let i = 1; i < content.$nest; i++) value = [value];
      return value;
    }
    if (typeof content.$text === 'number') return 'x'.repeat(content.$text);
  }
  return content;
}

/** Decision 7: every agent error carries its kind name; one without is a mismatch. */
function kindOf(error) {
  if (error && typeof error.kind === 'string') return error.kind;
  return `no kind: ${error?.constructor?.name}: ${error?.message ?? String(error)}`;
}

/** A MemoryLog that counts the appends carrying records and fails the scripted ones. */
class ScriptedLog extends MemoryLog {
  constructor(given, faults) {
    super(Buffer.from(given.map((line) => `${line}\n`).join('')));
    this.faults = new Map(faults.map(({ append, fault }) => [append, fault]));
    this.calls = 0;
    this.written = 0;
  }
  async append(entries) {
    if (entries.length === 0) return super.append(entries);
    this.calls += 1;
    const fault = this.faults.get(this.calls);
    if (fault === 'fail') throw new coxswain.LogIoError('disk full (injected)');
    if (fault === 'indeterminate') throw new coxswain.IndeterminateError('eio (injected)');
    // Another writer owns the session: the log's lock is someone else's.
    if (fault === 'fenced') throw new coxswain.LockedError('another writer owns the session (injected)');
    const seq = await super.append(entries);
    this.written += 1;
    return seq;
  }
  lines() {
    return this.bytes().toString('utf8').split('\n').filter((line) => line !== '');
  }
}

/** The host the scenario's `hooks` describe: only the hooks it writes are functions. */
function scriptedHost(written, release) {
  const hooks = { ...written, step: written.step ?? ['completed'] };
  const host = {};
  const calls = { pre_step: 0, step: 0, turn_stopping: 0 };
  const next = (hook) => {
    const script = hooks[hook];
    const answer = script[Math.min(calls[hook], script.length - 1)];
    calls[hook] += 1;
    return answer;
  };
  if (hooks.pre_step !== undefined) {
    host.preStep = async (cx) => {
      const answer = next('pre_step');
      if (answer === 'nothing') return undefined;
      if (answer === 'enter-claimed') return { enter: cx.messages };
      if (answer === 'reject') return 'reject';
      if (answer.raise !== undefined) throw new Error(answer.raise);
      if (answer.enter !== undefined) {
        return {
          enter: answer.enter.map((item) =>
            typeof item === 'string' ? cx.messages.find((m) => m.id === item) : message(item)),
        };
      }
      throw new Error(`the runner has no pre_step answer ${JSON.stringify(answer)}`);
    };
  }
  const stepAnswer = async (cx, answer) => {
    if (typeof answer === 'string') {
      if (answer === 'nothing') return undefined;
      if (answer === 'until-cancelled') {
        const signal = cx.signal;
        if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve));
        return 'completed';
      }
      if (answer === 'deaf') {
        await release.promise;
        return 'completed';
      }
      return answer;
    }
    if (answer.raise !== undefined) throw new Error(answer.raise);
    if (answer.record !== undefined) {
      for (const { type, data } of answer.record) await cx.record(type, data);
      return stepAnswer(cx, answer.then);
    }
    throw new Error(`the runner has no step answer ${JSON.stringify(answer)}`);
  };
  host.step = (cx) => stepAnswer(cx, next('step'));
  if (hooks.turn_stopping !== undefined) {
    host.turnStopping = async () => {
      const answer = next('turn_stopping');
      if (answer === 'nothing') return undefined;
      if (answer === 'done') return 'done';
      if (answer.raise !== undefined) throw new Error(answer.raise);
      throw new Error(`the runner has no turn_stopping answer ${JSON.stringify(answer)}`);
    };
  }
  return host;
}

/** The binding's options for the scenario's (decision 6's names). */
function agentOptions(options = {}) {
  const o = { memory: 256 };
  if (options.abort_grace_ms !== undefined) o.abortGraceMs = options.abort_grace_ms;
  if (options.retry_after_ms !== undefined) o.retryAfterMs = options.retry_after_ms;
  if (options.max_batch !== undefined) o.maxBatch = options.max_batch;
  if (options.max_pending !== undefined) o.maxPending = options.max_pending;
  return o;
}

/** `promise`'s outcome as `{ok}` / `{error: kind}`, or `{error: 'timeout'}` past `ms`. */
async function outcome(promise, ms, value = (v) => (v === undefined ? null : v)) {
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ error: 'timeout' }), ms);
  });
  try {
    return await Promise.race([
      promise.then((v) => ({ ok: value(v) }), (error) => ({ error: kindOf(error) })),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** JSON with sorted keys: outcomes are compared as JSON values. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

async function runStep(agent, log, step, release) {
  const within = step.within_ms ?? WITHIN_MS;
  switch (step.do) {
    case 'steer':
      if (step.turn !== undefined) {
        return outcome(Promise.resolve().then(() => agent.steerExpecting(step.turn, message(step.message))), within);
      }
      return outcome(Promise.resolve().then(() => agent.steer(message(step.message))), within);
    case 'followup':
    case 'inject':
      return outcome(Promise.resolve().then(() => agent[step.do](message(step.message))), within);
    case 'remove':
      return outcome(Promise.resolve().then(() => agent.remove(step.id)), within);
    case 'cancel':
      return outcome(Promise.resolve().then(() =>
        agent.cancel({ kind: 'user' }, { keepInbox: step.keep_inbox ?? false })), within);
    case 'resume':
      return outcome(Promise.resolve().then(() => agent.resume()), within);
    case 'pending':
      return outcome(Promise.resolve().then(() => agent.pending()), within, (p) => ({
        'next-turn': p.nextTurn.map((item) => item.message.id),
        'next-step': p.nextStep.map((item) => item.message.id),
      }));
    case 'fate':
      return outcome(Promise.resolve().then(() => agent.fate(step.id)), within);
    case 'wait-idle':
      return outcome(Promise.resolve().then(() => agent.whenIdle()), within);
    case 'close':
      return outcome(Promise.resolve().then(() => agent.close()), within);
    case 'dispose':
      return outcome(Promise.resolve().then(() => agent.dispose()), within);
    case 'release':
      release();
      return undefined;
    case 'sleep':
      await new Promise((resolve) => setTimeout(resolve, step.ms));
      return undefined;
    case 'await-record': {
      const deadline = performance.now() + within;
      const count = () => log.lines().filter((l) => JSON.parse(l).type === step.type).length;
      while (count() < step.count) {
        if (performance.now() > deadline) return { error: 'timeout' };
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return { ok: null };
    }
    default:
      throw new Error(`the runner has no step ${step.do}`);
  }
}

/** Runs one scenario; returns every mismatch (empty: it holds). */
async function run(scenario) {
  const mismatches = [];
  const log = new ScriptedLog(scenario.given ?? [], scenario.faults ?? []);
  let resolveRelease;
  const release = { promise: new Promise((resolve) => { resolveRelease = resolve; }) };
  let agent;
  try {
    ({ agent } = await Agent.open(scriptedHost(scenario.hooks ?? {}, release), log, agentOptions(scenario.options)));
  } catch (error) {
    return [`open: ${kindOf(error)}: ${error?.message}`];
  }
  try {
    for (const [index, step] of scenario.steps.entries()) {
      const got = await runStep(agent, log, step, resolveRelease);
      if (step.expect !== undefined && canonical(got) !== canonical(step.expect)) {
        mismatches.push(`step ${index} (${step.do}${step.id ? ` ${step.id}` : ''}${step.message ? ` ${step.message.id.slice(0, 16)}` : ''}): expected ${canonical(step.expect)}, got ${canonical(got)}`);
      }
    }
  } finally {
    resolveRelease();
    await outcome(Promise.resolve().then(() => agent.close()), WITHIN_MS);
  }
  const lines = log.lines();
  const expected = scenario.log;
  for (let i = 0; i < Math.max(lines.length, expected.length); i++) {
    if (lines[i] !== expected[i]) {
      mismatches.push(`log line ${i + 1}: expected ${expected[i] ?? '(none)'}, got ${lines[i] ?? '(none)'}`);
    }
  }
  if (scenario.appends !== undefined && log.written !== scenario.appends) {
    mismatches.push(`appends: expected ${scenario.appends}, got ${log.written}`);
  }
  return mismatches;
}

const files = fs.readdirSync(SCENARIOS).filter((f) => f.endsWith('.json')).sort();

test('the scenarios are there', () => {
  assert.ok(files.length >= 20, `${files.length} scenarios in ${SCENARIOS}`);
});

for (const file of files) {
  const name = file.replace(/\.json$/, '');
  const scenario = JSON.parse(fs.readFileSync(path.join(SCENARIOS, file), 'utf8'));
  const skip = scenario.skip?.[DRIVER]
    ?? (scenario.needs?.['log-faults']?.includes(DRIVER) ? 'needs log-faults' : undefined);
  test(`agent parity: ${name}`, { skip }, async () => {
    const mismatches = await run(scenario);
    assert.deepEqual(mismatches, [], `scenario ${name}, driver ${DRIVER}:\n  ${mismatches.join('\n  ')}`);
  });
}

// Difference 4 (decision 8): a bare Machine has no depth limit in any binding; the depth limit
// is the log's (the session's admission, scenario refused-deliveries).
test('d4: a bare Machine accepts a message nesting deeper than a log record holds', () => {
  const machine = new Machine();
  const deep = message({ id: 'deep', content: { $nest: 130 } });
  const transition = machine.inject(deep);
  assert.deepEqual(transition.events.map((event) => event.type), ['agent/inbox/spliced']);
  transition.persisted();
});

// Difference 5 (decision 8): `Session` is private in both bindings.
test('d5: the package does not export Session', () => {
  assert.equal(Object.hasOwn(coxswain, 'Session'), false);
});
