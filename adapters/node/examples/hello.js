'use strict';
// The Node example: an agent on a log file, one follow-up, one step. Run it again in the same
// directory and it resumes the session: the follow-up's retry is refused as already delivered
// (S52), which is success, and nothing runs twice. The Python one is
// adapters/python/examples/hello.py.
//
//   node adapters/node/examples/hello.js [LOG]   (default: session.jsonl in the working directory)

const { Agent, FileLog, userMessage } = require('..'); // require('coxswain') in your own project

async function main(path) {
  let steps = 0;
  const host = {
    async step(cx) {
      // Call the model here (passing cx.signal, aborted by a cancel); log its output in the step.
      await cx.record('model/output', { text: 'hello' });
      steps += 1;
      return 'completed';
    },
  };
  const log = await FileLog.open(path);
  const { agent, recovery } = await Agent.open(host, log); // a new session, or resume: the same call
  console.log(`opened: ${recovery.records} records`);
  try {
    await agent.followup(userMessage('m1', 'hi')); // resolves once durable
    console.log('m1: delivered');
  } catch (error) {
    if (!error?.wasDelivered) throw error; // not delivered: retry later with the same id
    console.log('m1: already delivered, nothing runs twice'); // a retry (S52): success
  }
  await agent.whenIdle();
  await agent.dispose();
  console.log(`idle; steps run: ${steps}`);
}

main(process.argv[2] ?? 'session.jsonl').catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
