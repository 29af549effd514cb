// The stable v1 lifecycle (docs/acp.md "Versions": session/prompt answered
// when the turn that entered it ends, with its stopReason), driven by the
// official TypeScript SDK's default (v1) client.

import { test } from "node:test";
import assert from "node:assert/strict";

import { Peer, expectLines, freshDir, outcome, text } from "./support.mjs";

const T = { timeout: 60000 };

async function open(t) {
  const dir = await freshDir(t);
  const peer = Peer.spawn(t, { version: 1, dir });
  const init = await peer.init();
  const sid = await peer.newSession();
  return { dir, peer, sid, init };
}

const inserted = (key) => (u) => u.sessionUpdate === "user_message_chunk" && u.messageId === key;

test("v1 initialize: protocolVersion 1, loadSession, no optional prompt content", T, async (t) => {
  const { peer, sid, init } = await open(t);
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities?.loadSession, true, JSON.stringify(init));
  const pc = init.agentCapabilities?.promptCapabilities ?? {};
  assert.ok(!pc.image && !pc.audio && !pc.embeddedContext, JSON.stringify(pc));
  assert.match(sid, /^s-[0-9a-f]{32}$/);
  // Exact update shapes at v1.
  const from = peer.wire.length;
  assert.deepEqual(await outcome(peer.prompt(sid, "hello", { key: "k-hello" }).promise), {
    ok: { stopReason: "end_turn" },
  });
  assert.deepEqual(peer.updates(sid, from), [
    { sessionUpdate: "user_message_chunk", messageId: "k-hello", content: text("hello") },
    { sessionUpdate: "agent_message_chunk", messageId: "a-1-1", content: text("hello") },
  ]);
});

test("v1 a prompt during a running turn is held; each prompt is answered when its own turn ends (S2, S22)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 first", { key: "k1" });
  await peer.waitUpdate(sid, inserted("k1"));
  const p2 = peer.prompt(sid, "second", { key: "k2" });
  assert.deepEqual(await outcome(p2.promise), { ok: { stopReason: "end_turn" } });
  assert.deepEqual(await outcome(p1.promise), { ok: { stopReason: "end_turn" } });
  expectLines(peer.transcript(sid), [
    "user_message_chunk k1 /sleep 800 first",
    "agent_message_chunk a-1-1 /sleep 800 first",
    '/sleep 800 first -> {"stopReason":"end_turn"}',
    "user_message_chunk k2 second",
    "agent_message_chunk a-2-1 second",
    'second -> {"stopReason":"end_turn"}',
  ]);
});

test("v1 a second prompt never aborts the first: all run to the end, FIFO, each answered once", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 one", { key: "one" });
  await peer.waitUpdate(sid, inserted("one"));
  const p2 = peer.prompt(sid, "two", { key: "two" });
  const p3 = peer.prompt(sid, "three", { key: "three" });
  for (const h of [p1, p2, p3]) assert.deepEqual(await outcome(h.promise), { ok: { stopReason: "end_turn" } });
  expectLines(peer.transcript(sid), [
    "user_message_chunk one /sleep 800 one",
    "agent_message_chunk a-1-1 /sleep 800 one",
    '/sleep 800 one -> {"stopReason":"end_turn"}',
    "user_message_chunk two two",
    "agent_message_chunk a-2-1 two",
    'two -> {"stopReason":"end_turn"}',
    "user_message_chunk three three",
    "agent_message_chunk a-3-1 three",
    'three -> {"stopReason":"end_turn"}',
  ]);
  for (const h of [p1, p2, p3]) assert.equal(peer.responseCount(await h.id), 1, h.label);
});

test("v1 a steer is injected into the running turn; the turn's prompt is answered once, after it", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 a", { key: "k-a" });
  await peer.waitUpdate(sid, inserted("k-a"));
  const s = peer.steer(sid, "steer one", { key: "k-steer" });
  assert.deepEqual(await outcome(s.promise), { ok: { outcome: "injected", messageId: "k-steer" } });
  assert.deepEqual(await outcome(p1.promise), { ok: { stopReason: "end_turn" } });
  expectLines(peer.transcript(sid), [
    "user_message_chunk k-a /sleep 800 a",
    'steer steer one -> {"outcome":"injected","messageId":"k-steer"}',
    "agent_message_chunk a-1-1 /sleep 800 a",
    "user_message_chunk k-steer steer one",
    "agent_message_chunk a-1-2 steer one",
    '/sleep 800 a -> {"stopReason":"end_turn"}',
  ]);
  assert.equal(peer.responseCount(await p1.id), 1);
});

test("v1 cancel: held prompts get -32800, the running one stopReason cancelled, a prompt after the cancel runs (S39)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 5000 long", { key: "c1" });
  await peer.waitUpdate(sid, inserted("c1"));
  const p2 = peer.prompt(sid, "held two", { key: "c2" });
  const p3 = peer.prompt(sid, "held three", { key: "c3" });
  await p3.id;
  const cancelAt = Date.now();
  await peer.cancel(sid);
  const p4 = peer.prompt(sid, "after cancel", { key: "c4" });
  assert.deepEqual(await outcome(p4.promise), { ok: { stopReason: "end_turn" } });
  assert.ok(Date.now() - cancelAt < 4000, "the cancel ends the 5 s step at once");
  assert.deepEqual(await outcome(p1.promise), { ok: { stopReason: "cancelled" } });
  assert.deepEqual(await outcome(p2.promise), { error: { code: -32800, message: "Request cancelled" } });
  assert.deepEqual(await outcome(p3.promise), { error: { code: -32800, message: "Request cancelled" } });
  expectLines(peer.transcript(sid), [
    "user_message_chunk c1 /sleep 5000 long",
    "held two -> error -32800 Request cancelled",
    "held three -> error -32800 Request cancelled",
    '/sleep 5000 long -> {"stopReason":"cancelled"}',
    "user_message_chunk c4 after cancel",
    "agent_message_chunk a-2-1 after cancel",
    'after cancel -> {"stopReason":"end_turn"}',
  ]);
});

test("v1 close: held prompts -32800, the running prompt cancelled, then {}", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 5000 long", { key: "x1" });
  await peer.waitUpdate(sid, inserted("x1"));
  peer.prompt(sid, "held a", { key: "x2" });
  const p3 = peer.prompt(sid, "held b", { key: "x3" });
  await p3.id;
  const close = peer.send("session/close", { sessionId: sid }, "close");
  assert.deepEqual(await peer.answer(close), { result: {} });
  await peer.answer(p1);
  expectLines(peer.transcript(sid), [
    "user_message_chunk x1 /sleep 5000 long",
    "held a -> error -32800 Request cancelled",
    "held b -> error -32800 Request cancelled",
    '/sleep 5000 long -> {"stopReason":"cancelled"}',
    "close -> {}",
  ]);
});

test("v1 /fail answers the prompt -32603 with the host's error as data; /refuse is -32012 not inserted", T, async (t) => {
  const { peer, sid } = await open(t);
  const f = await outcome(peer.prompt(sid, "/fail", { key: "f" }).promise);
  assert.deepEqual(f, {
    error: { code: -32603, message: "Internal error", data: { message: "echo: /fail", code: "echo-fail" } },
  });
  const r = await outcome(peer.prompt(sid, "/refuse", { key: "r" }).promise);
  assert.deepEqual(r, {
    error: { code: -32012, message: "not inserted", data: { kind: "not-inserted", turn: 2, end: "blocked" } },
  });
  const m = await outcome(peer.prompt(sid, "/max-tokens", { key: "m" }).promise);
  assert.deepEqual(m, { ok: { stopReason: "max_tokens" } });
});

test("v1 /tools: tool_call then tool_call_update completed per step, the result echoed; the prompt answered end_turn after all", T, async (t) => {
  const { peer, sid } = await open(t);
  const h = peer.prompt(sid, "/tools 1", { key: "tl" });
  assert.deepEqual(await outcome(h.promise), { ok: { stopReason: "end_turn" } });
  assert.deepEqual(peer.updates(sid), [
    { sessionUpdate: "user_message_chunk", messageId: "tl", content: text("/tools 1") },
    { sessionUpdate: "agent_message_chunk", messageId: "a-1-1", content: text("/tools 1") },
    { sessionUpdate: "tool_call", toolCallId: "t-1-1", title: "echo 1", status: "in_progress" },
    {
      sessionUpdate: "tool_call_update",
      toolCallId: "t-1-1",
      status: "completed",
      content: [{ type: "content", content: text("echo 1") }],
    },
    { sessionUpdate: "agent_message_chunk", messageId: "a-1-2", content: text("echo 1") },
  ]);
});

test("version negotiation: a request of 0 is answered 1, of 7 is answered 2 (docs/acp.md Versions)", T, async (t) => {
  for (const [asked, answered] of [
    [0, 1],
    [7, 2],
  ]) {
    const dir = await freshDir(t);
    const peer = Peer.spawn(t, { version: 1, dir });
    const h = peer.send("initialize", { protocolVersion: asked, clientCapabilities: {} }, "initialize");
    const a = await peer.answer(h);
    assert.equal(a.result?.protocolVersion, answered, `asked ${asked}: ${JSON.stringify(a)}`);
  }
});

test("v1 the admission bound: -32011 backpressure beyond it; below it every prompt runs and is answered (S55)", T, async (t) => {
  const dir = await freshDir(t);
  const peer = Peer.spawn(t, { version: 1, dir, args: ["--max-pending", "1"] });
  await peer.init();
  const sid = await peer.newSession();
  const p1 = peer.prompt(sid, "/sleep 800 busy", { key: "b1" });
  await peer.waitUpdate(sid, inserted("b1"));
  const p2 = peer.prompt(sid, "two", { key: "b2" });
  const p3 = peer.prompt(sid, "three", { key: "b3" });
  assert.deepEqual(await peer.answer(p3), {
    error: { code: -32011, message: "backpressure", data: { kind: "full", limit: 1 } },
  });
  for (const h of [p1, p2]) assert.deepEqual(await outcome(h.promise), { ok: { stopReason: "end_turn" } });
  expectLines(peer.transcript(sid), [
    "user_message_chunk b1 /sleep 800 busy",
    "three -> error -32011 backpressure",
    "agent_message_chunk a-1-1 /sleep 800 busy",
    '/sleep 800 busy -> {"stopReason":"end_turn"}',
    "user_message_chunk b2 two",
    "agent_message_chunk a-2-1 two",
    'two -> {"stopReason":"end_turn"}',
  ]);
});
