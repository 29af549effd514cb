'use strict';
// A harness that owns its log and drives Machine from its own loop: an append is refused, the
// input is rolled back (as if it was never fed), and the harness goes on.
//   node adapters/node/examples/harness.js
const { Machine, userMessage } = require('..'); // require('coxswain') in your own project

const log = []; // the harness's own log, which refuses appends while the disk is full
let diskFull = false;
// Each input in a batch of its own, committed by the next: `rollBack()` takes back the last.
const machine = new Machine({ memory: 16, implicitBatch: true });

/** Feeds one input and answers the requests it makes, or rolls it back. */
function feed(input) {
  const transition = input();
  if (diskFull) {
    machine.rollBack(); // the append failed: the machine is as it was (lists, memory, turn)
    return console.log('append refused: rolled back');
  }
  log.push(...transition.events); // durable once appended (a real log syncs here)
  const effects = transition.persisted();
  for (const { request } of effects) { // the agent loop: the model call goes here
    if (request?.preStep) feed(() => machine.answerPreStep({ enter: request.preStep.messages }));
    if (request?.step) feed(() => machine.answerStep('completed'));
    if (request?.turnStopping) feed(() => machine.answerTurnStopping('done'));
  }
}

feed(() => machine.inject(userMessage('c1', 'some context')));
diskFull = true;
feed(() => machine.followup(userMessage('m1', 'hello')));
console.log(`m1 pending: ${machine.state().nextTurn.length > 0}, remembered: ${machine.remembers('m1')}`);
diskFull = false;
feed(() => machine.followup(userMessage('m1', 'hello'))); // the same id again: its turn runs
console.log(`${machine.status} after turn ${machine.lastTurn}; ${log.length} events in the log`);
