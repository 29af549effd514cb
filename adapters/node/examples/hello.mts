import { Agent, FileLog, userMessage, type Host } from 'coxswain';

const host: Host = {
  // The model call and its tools; cx.signal aborts when the turn is cancelled (S39).
  async step(cx) {
    const text = `reply to turn ${cx.turn}`; // call your model here, passing cx.signal
    await cx.record('model/output', { text }); // a host event, durable, inside its step
    return 'completed' as const;
  },
};
const retried = (e: any) => { if (!e?.wasDelivered) throw e; console.log(e.kind); }; // S52
const log = await FileLog.open(process.env.LOG ?? 'session.jsonl');
const { agent, recovery } = await Agent.open(host, log, { memory: 256 }); // new or resumed
agent.subscribe((u) => { if ('notified' in u) console.log(u.notified.type); });
await agent.followup(userMessage('m1', 'hi')).catch(retried); // resolves once durable
await agent.followup(userMessage('m2', 'then summarise')).catch(retried); // a turn of its own
await agent.followup(userMessage('m1', 'hi')).catch(retried); // a retry: already delivered
await agent.whenIdle();
console.log(`resumed ${recovery.records} records; idle after turn 2`);
await agent.dispose();
