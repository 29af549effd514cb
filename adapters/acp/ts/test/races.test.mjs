// Repetitions of orderings that the scenario tests check once, so that a race
// in the binary shows up in one run instead of one run in three.

import { test } from "node:test";
import assert from "node:assert/strict";

import { Peer, expectLines, freshDir, outcome } from "./support.mjs";

const T = { timeout: 120000 };

async function open(t, version) {
  const dir = await freshDir(t);
  const peer = Peer.spawn(t, { version, dir });
  await peer.init();
  const sid = await peer.newSession();
  return { dir, peer, sid };
}

test("v1 a prompt's response closes its turn: every update of the turn comes before it (10 queued turns)", T, async (t) => {
  const { peer, sid } = await open(t, 1);
  const first = peer.prompt(sid, "/sleep 300 first", { key: "q0" });
  await peer.waitUpdate(sid, (u) => u.sessionUpdate === "user_message_chunk" && u.messageId === "q0");
  const queued = [];
  for (let i = 1; i <= 10; i++) queued.push(peer.prompt(sid, `q${i}`, { key: `q${i}` }));
  for (const h of [first, ...queued]) assert.deepEqual(await outcome(h.promise), { ok: { stopReason: "end_turn" } });
  const expected = ["user_message_chunk q0 /sleep 300 first", "agent_message_chunk a-1-1 /sleep 300 first"];
  expected.push('/sleep 300 first -> {"stopReason":"end_turn"}');
  for (let i = 1; i <= 10; i++) {
    expected.push(`user_message_chunk q${i} q${i}`, `agent_message_chunk a-${i + 1}-1 q${i}`, `q${i} -> {"stopReason":"end_turn"}`);
  }
  expectLines(peer.transcript(sid), expected);
});

for (const version of [2, 1]) {
  test(`v${version} session/close with held prompts is answered, every time (5 sessions)`, T, async (t) => {
    const dir = await freshDir(t);
    const peer = Peer.spawn(t, { version, dir });
    await peer.init();
    for (let round = 1; round <= 5; round++) {
      const sid = await peer.newSession();
      const p1 = peer.prompt(sid, "/sleep 5000 long", { key: `x1-${round}` });
      await peer.waitUpdate(sid, (u) => u.messageId === `x1-${round}` && u.sessionUpdate.startsWith("user_message"));
      const p2 = peer.prompt(sid, "held a", { key: `x2-${round}` });
      const p3 = peer.prompt(sid, "held b", { key: `x3-${round}` });
      await p3.id;
      const close = peer.send("session/close", { sessionId: sid }, "close");
      assert.deepEqual(await peer.answer(close, `round ${round}: the close's response`), { result: {} });
      for (const h of [p2, p3]) {
        assert.deepEqual(await outcome(h.promise), { error: { code: -32800, message: "Request cancelled" } });
      }
      const first = await outcome(p1.promise);
      assert.deepEqual(first, { ok: version === 2 ? { messageId: `x1-${round}` } : { stopReason: "cancelled" } });
    }
  });
}
