// The v2 prompt lifecycle (docs/acp.md "The mapping", issue 53 §5), driven by
// the official TypeScript SDK's experimental v2 client. Each test pins the
// responses, their order relative to the updates, and the updates.

import { test } from "node:test";
import assert from "node:assert/strict";

import { Peer, expectLines, freshDir, outcome, text } from "./support.mjs";

const T = { timeout: 60000 };

async function open(t, { args = [] } = {}) {
  const dir = await freshDir(t);
  const peer = Peer.spawn(t, { version: 2, dir, args });
  const init = await peer.init();
  const sid = await peer.newSession();
  return { dir, peer, sid, init };
}

const running = (u) => u.sessionUpdate === "state_update" && u.state === "running";

test("v2 initialize advertises exactly what is implemented; session ids are s-<32 hex>", T, async (t) => {
  const { peer, sid, init } = await open(t);
  assert.equal(init.protocolVersion, 2);
  const raw = peer.wire.find((e) => e.dir === "in" && e.msg?.id !== undefined && e.msg.result?.protocolVersion);
  // docs/acp.md "Versions", the whole answer: `session: {}` is the v2
  // baseline (new, resume with replayFrom, close, prompt, cancel) with no
  // optional prompt content (no image, audio, embeddedContext); the extension
  // methods under the capabilities' `_meta.coxswain.methods`.
  assert.deepEqual(raw.msg.result, {
    protocolVersion: 2,
    info: { name: "coxswain-acp", version: "0.1.0" },
    capabilities: {
      session: {},
      _meta: {
        coxswain: { methods: ["_session/steering", "_session/queue", "_session/revoke", "_session/replace"] },
      },
    },
  });
  assert.match(sid, /^s-[0-9a-f]{32}$/);
});

test("v2 shapes: a prompt's response is its messageId; user_message, echo chunk and state updates", T, async (t) => {
  const { peer, sid } = await open(t);
  const from = peer.wire.length;
  const p = peer.prompt(sid, "hello", { key: "k-hello" });
  assert.deepEqual(await outcome(p.promise), { ok: { messageId: "k-hello" } });
  await peer.waitIdle(sid, 1, { from });
  const updates = peer.updates(sid, from);
  // The exact JSON of each update (docs/acp.md mapping rows).
  assert.deepEqual(updates, [
    { sessionUpdate: "state_update", state: "running", _meta: { coxswain: { turn: 1 } } },
    { sessionUpdate: "user_message", messageId: "k-hello", content: [text("hello")] },
    { sessionUpdate: "agent_message_chunk", messageId: "a-1-1", content: text("hello") },
    { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn", _meta: { coxswain: { turn: 1 } } },
  ]);
  // Without a key, the message id is a fresh p-<32 hex>, and the user_message carries it.
  const from2 = peer.wire.length;
  const q = await outcome(peer.prompt(sid, "no key").promise);
  assert.match(q.ok?.messageId ?? "", /^p-[0-9a-f]{32}$/, JSON.stringify(q));
  await peer.waitIdle(sid, 1, { from: from2 });
  expectLines(peer.transcript(sid, from2), [
    "state_update running turn=2",
    `user_message ${q.ok.messageId} no key`,
    `no key -> {"messageId":"${q.ok.messageId}"}`,
    "agent_message_chunk a-2-1 no key",
    "state_update idle end_turn",
  ]);
});

test("v2 a prompt during a running turn is held and answered at its insertion, in its own turn (S2, S22)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 first", { key: "k1" });
  assert.deepEqual(await peer.answer(p1), { result: { messageId: "k1" } });
  // Turn 1 is running its 800 ms step: the next prompt is held.
  const p2 = peer.prompt(sid, "second", { key: "k2" });
  assert.deepEqual(await peer.answer(p2), { result: { messageId: "k2" } });
  await peer.waitIdle(sid, 2);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message k1 /sleep 800 first",
    '/sleep 800 first -> {"messageId":"k1"}',
    "agent_message_chunk a-1-1 /sleep 800 first",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message k2 second",
    'second -> {"messageId":"k2"}',
    "agent_message_chunk a-2-1 second",
    "state_update idle end_turn",
  ]);
  // Held: not answered before turn 1's step ended.
  const chunk1 = peer.wire.findIndex((e) => e.msg?.params?.update?.messageId === "a-1-1");
  assert.ok(peer.responseIndex(await p2.id) > chunk1);
  assert.deepEqual(await outcome(p2.promise), { ok: { messageId: "k2" } });
});

test("v2 a second prompt never aborts the first: all run to the end, FIFO, each answered once", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 one", { key: "one" });
  await peer.answer(p1);
  const p2 = peer.prompt(sid, "two", { key: "two" });
  const p3 = peer.prompt(sid, "three", { key: "three" });
  await peer.answer(p3);
  await peer.waitIdle(sid, 3);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message one /sleep 800 one",
    '/sleep 800 one -> {"messageId":"one"}',
    "agent_message_chunk a-1-1 /sleep 800 one",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message two two",
    'two -> {"messageId":"two"}',
    "agent_message_chunk a-2-1 two",
    "state_update idle end_turn",
    "state_update running turn=3",
    "user_message three three",
    'three -> {"messageId":"three"}',
    "agent_message_chunk a-3-1 three",
    "state_update idle end_turn",
  ]);
  for (const h of [p1, p2, p3]) assert.equal(peer.responseCount(await h.id), 1, h.label);
});

test("v2 every turn's prompt is answered exactly once, also after a steer (injected into its turn, S54)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 a", { key: "k-a" });
  await peer.answer(p1);
  const s = peer.steer(sid, "steer one", { turn: 1, key: "k-steer" });
  assert.deepEqual(await outcome(s.promise), { ok: { outcome: "injected", messageId: "k-steer" } });
  await peer.waitIdle(sid);
  const p2 = peer.prompt(sid, "after", { key: "k-after" });
  await peer.answer(p2);
  await peer.waitIdle(sid, 2);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message k-a /sleep 800 a",
    '/sleep 800 a -> {"messageId":"k-a"}',
    'steer steer one -> {"outcome":"injected","messageId":"k-steer"}',
    "agent_message_chunk a-1-1 /sleep 800 a",
    "user_message k-steer steer one",
    "agent_message_chunk a-1-2 steer one",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message k-after after",
    'after -> {"messageId":"k-after"}',
    "agent_message_chunk a-2-1 after",
    "state_update idle end_turn",
  ]);
  for (const h of [p1, s, p2]) assert.equal(peer.responseCount(await h.id), 1, h.label);
});

test("v2 a steer without turn targets the running turn; at idle it starts a new turn or, promptRequired, nothing", T, async (t) => {
  const { peer, sid } = await open(t);
  // Idle, default idleBehavior: a follow-up, a new turn.
  const s1 = peer.steer(sid, "idle steer", { key: "k-idle" });
  assert.deepEqual(await outcome(s1.promise), { ok: { outcome: "startedNewTurn", messageId: "k-idle" } });
  await peer.waitIdle(sid);
  // Idle, promptRequired: nothing is inserted.
  const from = peer.wire.length;
  const s2 = peer.steer(sid, "not inserted", { idleBehavior: "promptRequired", key: "k-none" });
  assert.deepEqual(await outcome(s2.promise), { ok: { outcome: "promptRequired" } });
  // Running, no turn given: the turn running when it is read.
  const p = peer.prompt(sid, "/sleep 600 run", { key: "k-run" });
  await peer.answer(p);
  const s3 = peer.steer(sid, "joins", { key: "k-joins", idleBehavior: "promptRequired" });
  assert.deepEqual(await outcome(s3.promise), { ok: { outcome: "injected", messageId: "k-joins" } });
  await peer.waitIdle(sid, 1, { from });
  // At idle the steer is a follow-up answered once accepted (durable), so its
  // answer races the wake's updates; where it lands is not pinned.
  const idleSteer = 'steer idle steer -> {"outcome":"startedNewTurn","messageId":"k-idle"}';
  const lines = peer.transcript(sid);
  assert.equal(lines.filter((l) => l === idleSteer).length, 1, lines.join("\n"));
  expectLines(lines.filter((l) => l !== idleSteer), [
    "state_update running turn=1",
    "user_message k-idle idle steer",
    "agent_message_chunk a-1-1 idle steer",
    "state_update idle end_turn",
    'steer not inserted -> {"outcome":"promptRequired"}',
    "state_update running turn=2",
    "user_message k-run /sleep 600 run",
    '/sleep 600 run -> {"messageId":"k-run"}',
    'steer joins -> {"outcome":"injected","messageId":"k-joins"}',
    "agent_message_chunk a-2-1 /sleep 600 run",
    "user_message k-joins joins",
    "agent_message_chunk a-2-2 joins",
    "state_update idle end_turn",
  ]);
  // The promptRequired steer's key was never used: a prompt may take it now.
  const p2 = peer.prompt(sid, "fresh", { key: "k-none" });
  assert.deepEqual(await outcome(p2.promise), { ok: { messageId: "k-none" } });
});

test("v2 a steer racing its turn's end is injected into that turn or takes the idle answer, never both", T, async (t) => {
  const { peer, sid } = await open(t);
  const seen = new Set();
  let turn = 0;
  for (let round = 1; round <= 12; round++) {
    const from = peer.wire.length;
    const ms = 3 * (round - 1);
    const p = peer.prompt(sid, `/sleep ${ms} r${round}`, { key: `r${round}` });
    const runAt = await peer.waitUpdate(sid, running, { from });
    const t0 = peer.wire[runAt].msg.params.update._meta.coxswain.turn;
    assert.equal(t0, ++turn);
    // Fire the steer as the prompt is inserted: its step of 0..33 ms is
    // running or already over, the turn ending or ended.
    await peer.waitUpdate(sid, (u) => u.sessionUpdate === "user_message" && u.messageId === `r${round}`, { from });
    const s = peer.steer(sid, `race ${round}`, { turn: t0, key: `s${round}` });
    const o = await outcome(s.promise);
    await peer.answer(p);
    assert.ok(o.ok, JSON.stringify(o));
    seen.add(o.ok.outcome);
    if (o.ok.outcome === "injected") {
      await peer.waitIdle(sid, 1, { from });
      expectLines(peer.transcript(sid, from).filter((l) => !l.includes(" -> ")), [
        `state_update running turn=${t0}`,
        `user_message r${round} /sleep ${ms} r${round}`,
        `agent_message_chunk a-${t0}-1 /sleep ${ms} r${round}`,
        `user_message s${round} race ${round}`,
        `agent_message_chunk a-${t0}-2 race ${round}`,
        "state_update idle end_turn",
      ]);
    } else {
      // The idle answer (startNewTurn by default): a turn of its own, after t0.
      assert.deepEqual(o.ok, { outcome: "startedNewTurn", messageId: `s${round}` });
      const t1 = ++turn;
      const c = await peer.waitUpdate(
        sid,
        (u) => u.sessionUpdate === "agent_message_chunk" && u.messageId === `a-${t1}-1`,
        { from },
      );
      await peer.waitIdle(sid, 1, { from: c });
      const lines = peer.transcript(sid, from).filter((l) => !l.includes(" -> ") && !l.startsWith("state_update"));
      assert.deepEqual(lines, [
        `user_message r${round} /sleep ${ms} r${round}`,
        `agent_message_chunk a-${t0}-1 /sleep ${ms} r${round}`,
        `user_message s${round} race ${round}`,
        `agent_message_chunk a-${t1}-1 race ${round}`,
      ]);
    }
  }
  t.diagnostic(`outcomes seen: ${[...seen].join(", ")}`);
});

test("v2 a steer meant for turn n is not injected into turn n+1", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "turn one", { key: "n1" });
  await peer.answer(p1);
  await peer.waitIdle(sid);
  const p2 = peer.prompt(sid, "/sleep 800 turn two", { key: "n2" });
  await peer.answer(p2);
  // Turn 2 runs; both steers name turn 1, which has ended.
  const late1 = peer.steer(sid, "late one", { turn: 1, idleBehavior: "promptRequired", key: "late1" });
  assert.deepEqual(await outcome(late1.promise), { ok: { outcome: "promptRequired" } });
  const late2 = peer.steer(sid, "late two", { turn: 1, key: "late2" });
  assert.deepEqual(await outcome(late2.promise), { ok: { outcome: "startedNewTurn", messageId: "late2" } });
  await peer.waitIdle(sid, 3);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message n1 turn one",
    'turn one -> {"messageId":"n1"}',
    "agent_message_chunk a-1-1 turn one",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message n2 /sleep 800 turn two",
    '/sleep 800 turn two -> {"messageId":"n2"}',
    'steer late one -> {"outcome":"promptRequired"}',
    'steer late two -> {"outcome":"startedNewTurn","messageId":"late2"}',
    "agent_message_chunk a-2-1 /sleep 800 turn two",
    "state_update idle end_turn",
    "state_update running turn=3",
    "user_message late2 late two",
    "agent_message_chunk a-3-1 late two",
    "state_update idle end_turn",
  ]);
});

test("v2 cancel: two held prompts get -32800, the inserted one keeps its messageId, a prompt after the cancel runs (S39)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 5000 long", { key: "c1" });
  await peer.answer(p1);
  const p2 = peer.prompt(sid, "held two", { key: "c2" });
  const p3 = peer.prompt(sid, "held three", { key: "c3" });
  await p3.id;
  const cancelAt = Date.now();
  await peer.cancel(sid);
  const p4 = peer.prompt(sid, "after cancel", { key: "c4" });
  await peer.answer(p4);
  await peer.waitIdle(sid, 2);
  assert.ok(Date.now() - cancelAt < 4000, "the cancel ends the 5 s step at once");
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message c1 /sleep 5000 long",
    '/sleep 5000 long -> {"messageId":"c1"}',
    "held two -> error -32800 Request cancelled",
    "held three -> error -32800 Request cancelled",
    "state_update idle cancelled",
    "state_update running turn=2",
    "user_message c4 after cancel",
    'after cancel -> {"messageId":"c4"}',
    "agent_message_chunk a-2-1 after cancel",
    "state_update idle end_turn",
  ]);
  assert.deepEqual(await outcome(p2.promise), { error: { code: -32800, message: "Request cancelled" } });
  // A discarded key's retry is answered -32800 (docs/acp.md "Retries").
  const retry = peer.prompt(sid, "held two", { key: "c2", label: "retry c2" });
  assert.deepEqual(await peer.answer(retry), { error: { code: -32800, message: "Request cancelled" } });
  // The inserted key's retry: at once, the original messageId.
  const retry1 = peer.prompt(sid, "/sleep 5000 long", { key: "c1", label: "retry c1" });
  assert.deepEqual(await peer.answer(retry1), { result: { messageId: "c1" } });
});

test("v2 close answers held prompts -32800, then {}; the closed session is -32002", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 5000 long", { key: "x1" });
  await peer.answer(p1);
  const p2 = peer.prompt(sid, "held a", { key: "x2" });
  const p3 = peer.prompt(sid, "held b", { key: "x3" });
  await p3.id;
  const close = peer.send("session/close", { sessionId: sid }, "close");
  assert.deepEqual(await peer.answer(close), { result: {} });
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message x1 /sleep 5000 long",
    '/sleep 5000 long -> {"messageId":"x1"}',
    "held a -> error -32800 Request cancelled",
    "held b -> error -32800 Request cancelled",
    "state_update idle cancelled",
    "close -> {}",
  ]);
  const after = peer.prompt(sid, "into the closed session", { key: "x4" });
  assert.deepEqual(await peer.answer(after), {
    error: { code: -32002, message: "Resource not found", data: { sessionId: sid } },
  });
  // The connection still answers: a new session takes a prompt.
  const sid2 = await peer.newSession();
  assert.deepEqual(await outcome(peer.prompt(sid2, "still here", { key: "x5" }).promise), {
    ok: { messageId: "x5" },
  });
});

test("v2 retries: an identical retry is held and answered as the first; other content under the key is -32010 (S56)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 busy", { key: "busy" });
  await peer.answer(p1);
  const q1 = peer.prompt(sid, "queued", { key: "q" });
  const q2 = peer.prompt(sid, "queued", { key: "q", label: "queued (retry)" });
  const qx = peer.prompt(sid, "different", { key: "q" });
  assert.deepEqual(await peer.answer(qx), {
    error: { code: -32010, message: "conflict", data: { kind: "conflict", messageId: "q" } },
  });
  await peer.answer(q2);
  await peer.waitIdle(sid, 2);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message busy /sleep 800 busy",
    '/sleep 800 busy -> {"messageId":"busy"}',
    "different -> error -32010 conflict",
    "agent_message_chunk a-1-1 /sleep 800 busy",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message q queued",
    'queued -> {"messageId":"q"}',
    'queued (retry) -> {"messageId":"q"}',
    "agent_message_chunk a-2-1 queued",
    "state_update idle end_turn",
  ]);
  assert.equal(peer.responseCount(await q1.id), 1);
  // Once inserted: an identical retry at once, a different one conflicts.
  const from = peer.wire.length;
  assert.deepEqual(await peer.answer(peer.prompt(sid, "queued", { key: "q", label: "late retry" })), {
    result: { messageId: "q" },
  });
  assert.deepEqual(await peer.answer(peer.prompt(sid, "queued!", { key: "q", label: "late conflict" })), {
    error: { code: -32010, message: "conflict", data: { kind: "conflict", messageId: "q" } },
  });
  expectLines(peer.transcript(sid, from), [
    'late retry -> {"messageId":"q"}',
    "late conflict -> error -32010 conflict",
  ]);
});

test("v2 the admission bound: -32011 backpressure beyond it, and below it nothing is dropped (S55)", T, async (t) => {
  const { peer, sid } = await open(t, { args: ["--max-pending", "2"] });
  const p1 = peer.prompt(sid, "/sleep 1000 busy", { key: "b1" });
  await peer.answer(p1);
  // Follow-ups wait in the next-turn list: two fit, the third is refused.
  const p2 = peer.prompt(sid, "two", { key: "b2" });
  const p3 = peer.prompt(sid, "three", { key: "b3" });
  const p4 = peer.prompt(sid, "four", { key: "b4" });
  assert.deepEqual(await peer.answer(p4), {
    error: { code: -32011, message: "backpressure", data: { kind: "full", limit: 2 } },
  });
  // Steers wait in the next-step list, bounded on their own: two fit, the third fails.
  const s1 = peer.steer(sid, "s1", { turn: 1, key: "bs1" });
  const s2 = peer.steer(sid, "s2", { turn: 1, key: "bs2" });
  const s3 = peer.steer(sid, "s3", { turn: 1, key: "bs3" });
  assert.deepEqual(await outcome(s1.promise), { ok: { outcome: "injected", messageId: "bs1" } });
  assert.deepEqual(await outcome(s2.promise), { ok: { outcome: "injected", messageId: "bs2" } });
  const so = await outcome(s3.promise);
  await peer.answer(p3);
  await peer.waitIdle(sid, 3);
  const p5 = peer.prompt(sid, "five", { key: "b5" });
  await peer.answer(p5);
  await peer.waitIdle(sid, 4);
  expectLines(peer.transcript(sid), [
    "state_update running turn=1",
    "user_message b1 /sleep 1000 busy",
    '/sleep 1000 busy -> {"messageId":"b1"}',
    "four -> error -32011 backpressure",
    'steer s1 -> {"outcome":"injected","messageId":"bs1"}',
    'steer s2 -> {"outcome":"injected","messageId":"bs2"}',
    `steer s3 -> ${JSON.stringify(so.ok)}`,
    "agent_message_chunk a-1-1 /sleep 1000 busy",
    "user_message bs1 s1",
    "user_message bs2 s2",
    "agent_message_chunk a-1-2 s1",
    "agent_message_chunk a-1-2 s2",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message b2 two",
    'two -> {"messageId":"b2"}',
    "agent_message_chunk a-2-1 two",
    "state_update idle end_turn",
    "state_update running turn=3",
    "user_message b3 three",
    'three -> {"messageId":"b3"}',
    "agent_message_chunk a-3-1 three",
    "state_update idle end_turn",
    "state_update running turn=4",
    "user_message b5 five",
    'five -> {"messageId":"b5"}',
    "agent_message_chunk a-4-1 five",
    "state_update idle end_turn",
  ]);
  for (const h of [p2, p3]) assert.equal(peer.responseCount(await h.id), 1, h.label);
  // The refused keys were never inserted: they are free.
  assert.deepEqual(await outcome(peer.prompt(sid, "four", { key: "b4", label: "four again" }).promise), {
    ok: { messageId: "b4" },
  });
  await peer.waitIdle(sid, 5);
  assert.deepEqual(await outcome(peer.steer(sid, "s3", { key: "bs3", label: "s3 again" }).promise), {
    ok: { outcome: "startedNewTurn", messageId: "bs3" },
  });  // docs/acp.md "Steering": failed, with the error as the errors table gives
  // it (-32011 backpressure, data { kind: "full", limit }). Checked last, so
  // the rest runs first.
  assert.deepEqual(so, {
    ok: { outcome: "failed", error: { code: -32011, message: "backpressure", data: { kind: "full", limit: 2 } } },
  });
});

test("v2 echo host: /tools, /max-tokens, /fail and /refuse map to their stop reasons", T, async (t) => {
  const { peer, sid } = await open(t);
  const run = async (s, key) => {
    const from = peer.wire.length;
    const h = peer.prompt(sid, s, { key });
    const o = outcome(h.promise);
    await peer.waitIdle(sid, 1, { from });
    await peer.answer(h);
    return { from, o: await o };
  };
  const mt = await run("/max-tokens", "mt");
  assert.deepEqual(mt.o, { ok: { messageId: "mt" } });
  expectLines(peer.transcript(sid, mt.from), [
    "state_update running turn=1",
    "user_message mt /max-tokens",
    '/max-tokens -> {"messageId":"mt"}',
    "agent_message_chunk a-1-1 /max-tokens",
    "state_update idle max_tokens",
  ]);
  const fail = await run("/fail", "fl");
  assert.deepEqual(fail.o, { ok: { messageId: "fl" } });
  expectLines(peer.transcript(sid, fail.from), [
    "state_update running turn=2",
    "user_message fl /fail",
    '/fail -> {"messageId":"fl"}',
    "agent_message_chunk a-2-1 /fail",
    "state_update idle error",
  ]);
  // The idle state carries the failure (ErrorStopReason.error), the host's error as data.
  assert.deepEqual(peer.updates(sid, fail.from).at(-1), {
    sessionUpdate: "state_update",
    state: "idle",
    stopReason: "error",
    error: { code: -32603, message: "echo: /fail", data: { message: "echo: /fail", code: "echo-fail" } },
    _meta: { coxswain: { turn: 2 } },
  });
  // /refuse: the pre-step refuses, the prompt is never inserted: -32012 not inserted.
  const refuse = await run("/refuse", "rf");
  assert.deepEqual(refuse.o, {
    error: { code: -32012, message: "not inserted", data: { kind: "not-inserted", turn: 3, end: "blocked" } },
  });
  expectLines(peer.transcript(sid, refuse.from), [
    "state_update running turn=3",
    "state_update idle refusal",
    "/refuse -> error -32012 not inserted",
  ]);
  // /tools K: one tool call per step (v2 has no tool_call update: the call is a
  // tool_call_update upsert), its result injected and echoed at the next step;
  // the injected result is not a user message.
  const tools = await run("/tools 2", "tl");
  assert.deepEqual(tools.o, { ok: { messageId: "tl" } });
  assert.deepEqual(peer.updates(sid, tools.from), [
    { sessionUpdate: "state_update", state: "running", _meta: { coxswain: { turn: 4 } } },
    { sessionUpdate: "user_message", messageId: "tl", content: [text("/tools 2")] },
    { sessionUpdate: "agent_message_chunk", messageId: "a-4-1", content: text("/tools 2") },
    { sessionUpdate: "tool_call_update", toolCallId: "t-4-1", title: "echo 1", status: "in_progress" },
    {
      sessionUpdate: "tool_call_update",
      toolCallId: "t-4-1",
      status: "completed",
      content: [{ type: "content", content: text("echo 1") }],
    },
    { sessionUpdate: "agent_message_chunk", messageId: "a-4-2", content: text("echo 1") },
    { sessionUpdate: "tool_call_update", toolCallId: "t-4-2", title: "echo 2", status: "in_progress" },
    {
      sessionUpdate: "tool_call_update",
      toolCallId: "t-4-2",
      status: "completed",
      content: [{ type: "content", content: text("echo 2") }],
    },
    { sessionUpdate: "agent_message_chunk", messageId: "a-4-3", content: text("echo 2") },
    { sessionUpdate: "state_update", state: "idle", stopReason: "end_turn", _meta: { coxswain: { turn: 4 } } },
  ]);
});

test("v2 session/inject extensions: _session/queue answers at acceptance, _session/revoke and _session/replace (S12, S14)", T, async (t) => {
  const { peer, sid } = await open(t);
  const p1 = peer.prompt(sid, "/sleep 800 busy", { key: "e1" });
  await peer.answer(p1);
  // Queue: a follow-up answered once durable, before its insertion.
  const q = peer.send("_session/queue", { sessionId: sid, prompt: [text("queued")], idempotencyKey: "e-q" }, "queue");
  assert.deepEqual(await peer.answer(q), { result: { messageId: "e-q" } });
  // Revoke a held prompt: its session/prompt gets -32800.
  const held = peer.prompt(sid, "to revoke", { key: "e-rv" });
  await held.id;
  const rv = peer.send("_session/revoke", { sessionId: sid, messageId: "e-rv" }, "revoke");
  assert.deepEqual(await peer.answer(rv), { result: { revoked: true } });
  assert.deepEqual(await peer.answer(held), { error: { code: -32800, message: "Request cancelled" } });
  // Replace a held prompt: it keeps waiting, and is inserted with the new content.
  const old = peer.prompt(sid, "old content", { key: "e-rp" });
  await old.id;
  const rp = peer.send(
    "_session/replace",
    { sessionId: sid, messageId: "e-rp", prompt: [text("new content")] },
    "replace",
  );
  assert.deepEqual(await peer.answer(rp), { result: { replaced: true } });
  assert.deepEqual(await outcome(old.promise), { ok: { messageId: "e-rp" } });
  await peer.waitIdle(sid, 3);
  // Once inserted: neither revocable nor replaceable.
  const rv2 = peer.send("_session/revoke", { sessionId: sid, messageId: "e1" }, "revoke inserted");
  assert.deepEqual(await peer.answer(rv2), { result: { revoked: false } });
  const rp2 = peer.send(
    "_session/replace",
    { sessionId: sid, messageId: "e1", prompt: [text("too late")] },
    "replace inserted",
  );
  assert.deepEqual(await peer.answer(rp2), { result: { replaced: false } });
  // The revoked prompt's -32800 and the revoke's answer race (docs/acp.md
  // orders neither); both come before the replace's answer.
  const revoked = "to revoke -> error -32800 Request cancelled";
  const lines = peer.transcript(sid);
  assert.ok(lines.indexOf(revoked) > lines.indexOf('queue -> {"messageId":"e-q"}'), lines.join("\n"));
  assert.ok(lines.indexOf(revoked) < lines.indexOf('replace -> {"replaced":true}'), lines.join("\n"));
  expectLines(lines.filter((l) => l !== revoked), [
    "state_update running turn=1",
    "user_message e1 /sleep 800 busy",
    '/sleep 800 busy -> {"messageId":"e1"}',
    'queue -> {"messageId":"e-q"}',
    'revoke -> {"revoked":true}',
    'replace -> {"replaced":true}',
    "agent_message_chunk a-1-1 /sleep 800 busy",
    "state_update idle end_turn",
    "state_update running turn=2",
    "user_message e-q queued",
    "agent_message_chunk a-2-1 queued",
    "state_update idle end_turn",
    "state_update running turn=3",
    "user_message e-rp new content",
    'old content -> {"messageId":"e-rp"}',
    "agent_message_chunk a-3-1 new content",
    "state_update idle end_turn",
    'revoke inserted -> {"revoked":false}',
    'replace inserted -> {"replaced":false}',
  ]);
});
