'use strict';
// What a host's hooks are handed (`Agent`'s): each call's context, with its activity's abort
// signal (S42), and the answer a hook's return value makes.

/**
 * One activity (a turn, or a maintenance job): its abort signal, made when a hook first asks
 * for it or when the activity is aborted (S39), so an activity nobody watches costs no
 * `AbortController`.
 */
class Activity {
  constructor() { this._controller = null; }
  get signal() { return (this._controller ??= new AbortController()).signal; }
  abort(reason) { (this._controller ??= new AbortController()).abort(reason); }
}

/**
 * A context's `signal`: its activity's, made when first read. An own enumerable accessor, so a
 * spread copy of the context (`{ ...cx }`) carries the signal as the context does.
 */
const SIGNAL = { get() { return this._activity.signal; }, enumerable: true, configurable: true };

/** What a hook is handed: the request's fields, its activity's signal, the agent (a step's: `record`, `recordAll`). */
function context(kind) {
  return class {
    constructor(agent, body, activity) {
      const { turn, step } = body;
      this.turn = turn;
      if (kind !== 'turnStopping') this.step = step;
      if (kind === 'preStep') this.messages = body.messages;
      Object.defineProperty(this, 'signal', SIGNAL);
      this.agent = agent;
      this._activity = activity;
      if (kind !== 'step') return;
      // Own functions, so a hook may destructure them (`async step({ record })`).
      this.record = (type, data) => agent._record(turn, step, [{ type, data }]);
      this.recordAll = (events) => agent._record(turn, step, events);
    }
  };
}
const CONTEXTS = { preStep: context('preStep'), step: context('step'), turnStopping: context('turnStopping') };

/** `{[kind]: given}`, each key written out (a computed key costs a call into the runtime). */
function answerOf(kind, given) {
  switch (kind) {
    case 'preStep':
      return { preStep: given };
    case 'step':
      return { step: given };
    default:
      return { turnStopping: given };
  }
}

module.exports = { Activity, CONTEXTS, answerOf };
