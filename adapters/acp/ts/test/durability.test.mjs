// Durability (docs/acp.md "Durability", issue 53 §5): kill -9 while a
// pre-step is outstanding, restart on the same --dir, session/resume (v2) or
// session/load (v1), retry with the same key: the same messageId, the prompt
// inserted once, nothing run twice (S57, S58, S59, I16). And two agent
// processes on one session: the second is refused -32013.

import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";

import { Peer, expectLines, freshDir, outcome, waitFileContains } from "./support.mjs";

const T = { timeout: 60000 };
const CRASH = "/sleep-pre 1500 crash me";

const count = (lines, prefix) => lines.filter((l) => l.startsWith(prefix)).length;

test("v2 kill -9 during a pre-step, restart, session/resume replayFrom start, retry: same messageId, inserted once, run once", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  // A finished turn first, so that the replay has history.
  assert.deepEqual(await outcome(a.prompt(sid, "hello", { key: "k-hello" }).promise), {
    ok: { messageId: "k-hello" },
  });
  await a.waitIdle(sid);
  const from = a.wire.length;
  a.prompt(sid, CRASH, { key: "k-crash" });
  // The claim is in the same transition as the running status (S24): kill now.
  await a.waitUpdate(sid, (u) => u.sessionUpdate === "state_update" && u.state === "running", { from });
  assert.deepEqual(await a.kill9(), { code: null, signal: "SIGKILL" });
  const before = a.transcript(sid);
  assert.deepEqual(before, [
    "state_update running turn=1",
    "user_message k-hello hello",
    'hello -> {"messageId":"k-hello"}',
    "agent_message_chunk a-1-1 hello",
    "state_update idle end_turn",
    "state_update running turn=2",
  ]);

  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir, replayFrom: { type: "start" } }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  const retry = b.prompt(sid, CRASH, { key: "k-crash", label: "retry" });
  assert.deepEqual(await outcome(retry.promise), { ok: { messageId: "k-crash" } });
  const idleAt = await b.waitUpdate(
    sid,
    (u) => u.sessionUpdate === "state_update" && u.state === "idle" && u.stopReason === "end_turn",
    { from: b.responseIndex(await resume.id) },
  );
  assert.ok(idleAt > 0);
  const after = b.transcript(sid);
  // The whole stream: the replay (turn 2's end is crash repair's
  // `interrupted`, an idle `error`), the state snapshot (idle: restored work
  // parks until resume), the response, then what resume starts: the
  // redelivered prompt's turn 3.
  expectLines(after, [
    "state_update running turn=1",
    "user_message k-hello hello",
    "agent_message_chunk a-1-1 hello",
    "state_update idle end_turn",
    "state_update running turn=2",
    "state_update idle error",
    "state_update idle (none)",
    "resume -> {}",
    "state_update running turn=3",
    "user_message k-crash " + CRASH,
    'retry -> {"messageId":"k-crash"}',
    "agent_message_chunk a-3-1 " + CRASH,
    "state_update idle end_turn",
  ]);
  // Across both processes: one user_message for the key, one echo of it.
  const all = [...before, ...after];
  assert.equal(count(all, "user_message k-crash "), 1, all.join("\n"));
  assert.equal(all.filter((l) => l.startsWith("agent_message_chunk") && l.endsWith(CRASH)).length, 1);
  assert.equal(b.responseCount(await retry.id), 1);
  // And a retry now (inserted) is answered at once, with nothing new.
  const again = b.prompt(sid, CRASH, { key: "k-crash", label: "again" });
  assert.deepEqual(await b.answer(again), { result: { messageId: "k-crash" } });
});

test("v2 session/resume without replayFrom replays nothing and still runs the redelivered prompt", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  a.prompt(sid, CRASH, { key: "k-crash" });
  await a.waitUpdate(sid, (u) => u.sessionUpdate === "state_update" && u.state === "running");
  await a.kill9();
  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  const c = await b.waitUpdate(sid, (u) => u.sessionUpdate === "agent_message_chunk");
  await b.waitIdle(sid, 1, { from: c });
  // No replay: only the snapshot (idle after turn 1, which crash repair
  // closed), the response, then the redelivered prompt's turn 2.
  expectLines(b.transcript(sid), [
    "state_update idle (none)",
    "resume -> {}",
    "state_update running turn=2",
    "user_message k-crash " + CRASH,
    "agent_message_chunk a-2-1 " + CRASH,
    "state_update idle end_turn",
  ]);
});

test("v1 kill -9 during a pre-step, restart, session/load, retry: the turn's stop reason, inserted once, run once", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 1, dir });
  await a.init();
  const sid = await a.newSession();
  assert.deepEqual(await outcome(a.prompt(sid, "hello", { key: "k-hello" }).promise), {
    ok: { stopReason: "end_turn" },
  });
  a.prompt(sid, CRASH, { key: "k-crash" });
  // v1 has no running update: wait for the claim's turn to be durable in the
  // session's log (docs/acp.md: DIR/<sessionId>.jsonl; SPEC S27 turn/start).
  await waitFileContains(path.join(dir, `${sid}.jsonl`), '"turn":2');
  await a.kill9();
  const before = a.transcript(sid);
  assert.deepEqual(before, [
    "user_message_chunk k-hello hello",
    "agent_message_chunk a-1-1 hello",
    'hello -> {"stopReason":"end_turn"}',
  ]);

  const b = Peer.spawn(t, { version: 1, dir });
  await b.init();
  const load = b.send("session/load", { sessionId: sid, cwd: dir, mcpServers: [] }, "load");
  assert.deepEqual(await b.answer(load), { result: {} });
  const retry = b.prompt(sid, CRASH, { key: "k-crash", label: "retry" });
  assert.deepEqual(await outcome(retry.promise), { ok: { stopReason: "end_turn" } });
  const after = b.transcript(sid);
  assert.deepEqual(after, [
    "user_message_chunk k-hello hello",
    "agent_message_chunk a-1-1 hello",
    "load -> {}",
    "user_message_chunk k-crash " + CRASH,
    "agent_message_chunk a-3-1 " + CRASH,
    'retry -> {"stopReason":"end_turn"}',
  ]);
  const all = [...before, ...after];
  assert.equal(count(all, "user_message_chunk k-crash "), 1);
  assert.equal(all.filter((l) => l.startsWith("agent_message_chunk") && l.endsWith(CRASH)).length, 1);
});

for (const version of [2, 1]) {
  const method = version === 2 ? "session/resume" : "session/load";
  test(`v${version} two agent processes on one session: the second's ${method} gets -32013 session locked`, T, async (t) => {
    const dir = await freshDir(t);
    const a = Peer.spawn(t, { version, dir });
    await a.init();
    const sid = await a.newSession();
    const b = Peer.spawn(t, { version, dir });
    await b.init();
    const params = version === 2 ? { sessionId: sid, cwd: dir } : { sessionId: sid, cwd: dir, mcpServers: [] };
    const h = b.send(method, params, method);
    const log = path.join(dir, `${sid}.jsonl`);
    assert.deepEqual(await b.answer(h), {
      error: {
        code: -32013,
        message: "session locked",
        data: { kind: "locked", message: `the log ${log} is locked by another writer` },
      },
    });
    // Nothing was replayed to the refused process.
    expectLines(b.transcript(sid), [`${method} -> error -32013 session locked`]);
    // The refused process still answers; so does the owner.
    const sid2 = await b.newSession();
    const ok = version === 2 ? { messageId: "mine" } : { stopReason: "end_turn" };
    assert.deepEqual(await outcome(b.prompt(sid2, "second process", { key: "mine" }).promise), { ok });
    const ok2 = version === 2 ? { messageId: "owner" } : { stopReason: "end_turn" };
    assert.deepEqual(await outcome(a.prompt(sid, "owner process", { key: "owner" }).promise), { ok: ok2 });
    // A prompt from the refused process into the locked session: unknown there.
    const stray = b.prompt(sid, "stray", { key: "stray" });
    assert.deepEqual(await b.answer(stray), {
      error: { code: -32002, message: "Resource not found", data: { sessionId: sid } },
    });
  });
}

test("v2 kill -9 with one prompt inserted and one held: after resume the held one runs (S57); retries answered from fate (S58)", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  const long = a.prompt(sid, "/sleep 5000 long", { key: "k-long" });
  assert.deepEqual(await a.answer(long), { result: { messageId: "k-long" } });
  const held = a.prompt(sid, "/sleep 1000 held", { key: "k-held" });
  await held.id;
  // The held prompt is durable before the next message is read (docs/acp.md
  // "The mapping"): a revoke of an unknown id answers only after it.
  const probe = a.send("_session/revoke", { sessionId: sid, messageId: "nobody" }, "probe");
  assert.deepEqual(await a.answer(probe), { result: { revoked: false } });
  await a.kill9();

  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir, replayFrom: { type: "start" } }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  // Inserted before the crash: answered at once, with the original messageId.
  const r1 = b.prompt(sid, "/sleep 5000 long", { key: "k-long", label: "retry long" });
  assert.deepEqual(await b.answer(r1), { result: { messageId: "k-long" } });
  // Held at the crash: pending again after restore, run by resume; the retry
  // waits for its insertion.
  const r2 = b.prompt(sid, "/sleep 1000 held", { key: "k-held", label: "retry held" });
  assert.deepEqual(await outcome(r2.promise), { ok: { messageId: "k-held" } });
  const c = await b.waitUpdate(sid, (u) => u.sessionUpdate === "agent_message_chunk");
  await b.waitIdle(sid, 1, { from: c });
  // The retry of k-long races the turn resume opened: where its answer lands
  // is not pinned, beyond "after the resume's".
  const retryLong = 'retry long -> {"messageId":"k-long"}';
  const lines = b.transcript(sid);
  assert.equal(lines.filter((l) => l === retryLong).length, 1);
  assert.ok(lines.indexOf(retryLong) > lines.indexOf("resume -> {}"));
  expectLines(
    lines.filter((l) => l !== retryLong),
    [
      "state_update running turn=1",
      "user_message k-long /sleep 5000 long",
      "state_update idle error",
      "state_update idle (none)",
      "resume -> {}",
      "state_update running turn=2",
      "user_message k-held /sleep 1000 held",
      'retry held -> {"messageId":"k-held"}',
      "agent_message_chunk a-2-1 /sleep 1000 held",
      "state_update idle end_turn",
    ],
  );
  // The interrupted turn's step never echoed (it was killed), and is not run again.
  assert.equal(b.transcript(sid).filter((l) => l.includes("agent_message_chunk a-1-1")).length, 0);
});

test("v2 resume after a crash mid-turn: the replay ends the interrupted turn (idle error), then an idle snapshot before the response", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  const long = a.prompt(sid, "/sleep 5000 long", { key: "L" });
  await a.answer(long);
  await a.kill9();
  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir, replayFrom: { type: "start" } }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  const at = b.responseIndex(await resume.id);
  const states = b.wire
    .slice(0, at)
    .filter((e) => e.dir === "in" && e.msg?.method === "session/update" && e.msg.params.update.sessionUpdate === "state_update")
    .map((e) => e.msg.params.update);
  // The replayed turn 1 ends with crash repair's `interrupted`, an idle
  // `error` naming it (docs/acp.md is silent; H1's decision). Then ACP v2's
  // current-state snapshot, after the replay and before the response:
  // nothing is pending, the session is idle.
  const message = "the agent stopped before the turn ended; crash repair closed it";
  assert.deepEqual(states, [
    { sessionUpdate: "state_update", state: "running", _meta: { coxswain: { turn: 1 } } },
    {
      sessionUpdate: "state_update",
      state: "idle",
      stopReason: "error",
      error: { code: -32603, message, data: { kind: "interrupted", message, turn: 1 } },
      _meta: { coxswain: { turn: 1 } },
    },
    { sessionUpdate: "state_update", state: "idle", _meta: { coxswain: { turn: 1 } } },
  ]);
});

test("v2 session/close releases the log: another process resumes the session, its history replays, prompts go on", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  assert.deepEqual(await outcome(a.prompt(sid, "before close", { key: "bc" }).promise), { ok: { messageId: "bc" } });
  await a.waitIdle(sid);
  // Resuming a session already open on this connection is refused.
  const again = a.send("session/resume", { sessionId: sid, cwd: dir }, "resume open");
  assert.deepEqual(await a.answer(again), {
    error: { code: -32602, message: "Invalid params", data: `session ${sid} is already open on this connection` },
  });
  assert.deepEqual(await outcome(a.send("session/close", { sessionId: sid }).promise), { ok: {} });
  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir, replayFrom: { type: "start" } }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  const p = b.prompt(sid, "after close", { key: "ac" });
  assert.deepEqual(await outcome(p.promise), { ok: { messageId: "ac" } });
  await b.waitIdle(sid, 1, { from: b.responseIndex(await p.id) });
  expectLines(b.transcript(sid), [
    "state_update running turn=1",
    "user_message bc before close",
    "agent_message_chunk a-1-1 before close",
    "state_update idle end_turn",
    "state_update idle (none)",
    "resume -> {}",
    "state_update running turn=2",
    "user_message ac after close",
    'after close -> {"messageId":"ac"}',
    "agent_message_chunk a-2-1 after close",
    "state_update idle end_turn",
  ]);
  // The retry of a key from before the close: the original messageId (S58, across processes).
  const retry = b.prompt(sid, "before close", { key: "bc", label: "retry bc" });
  assert.deepEqual(await b.answer(retry), { result: { messageId: "bc" } });
});

test("v2 session/resume sends a current-state snapshot before its response, also without replayFrom", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  assert.deepEqual(await outcome(a.prompt(sid, "one turn", { key: "o" }).promise), { ok: { messageId: "o" } });
  await a.waitIdle(sid);
  assert.deepEqual(await outcome(a.send("session/close", { sessionId: sid }).promise), { ok: {} });
  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  const resume = b.send("session/resume", { sessionId: sid, cwd: dir }, "resume");
  assert.deepEqual(await b.answer(resume), { result: {} });
  // ACP v2 (SDK 2.4 StateUpdate docs): "Resume MUST send a current-state
  // snapshot after any replay and before its response." Nothing replayed,
  // nothing runs: one idle snapshot, for the last turn.
  assert.deepEqual(b.updates(sid), [
    { sessionUpdate: "state_update", state: "idle", _meta: { coxswain: { turn: 1 } } },
  ]);
});

test("v1 a prompt whose turn the crash interrupted: after session/load its retry is -32603 { kind: interrupted }, nothing runs again", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 1, dir });
  await a.init();
  const sid = await a.newSession();
  a.prompt(sid, "/sleep 5000 long", { key: "L" });
  await a.waitUpdate(sid, (u) => u.sessionUpdate === "user_message_chunk" && u.messageId === "L");
  await a.kill9();
  const b = Peer.spawn(t, { version: 1, dir });
  await b.init();
  const load = b.send("session/load", { sessionId: sid, cwd: dir, mcpServers: [] }, "load");
  assert.deepEqual(await b.answer(load), { result: {} });
  const retry = b.prompt(sid, "/sleep 5000 long", { key: "L", label: "retry" });
  const message = "the agent stopped before the turn ended; crash repair closed it";
  assert.deepEqual(await b.answer(retry), {
    error: { code: -32603, message: "Internal error", data: { kind: "interrupted", message, turn: 1 } },
  });
  // The replay, the response, the retry's error: the step is not run again.
  expectLines(b.transcript(sid), [
    "user_message_chunk L /sleep 5000 long",
    "load -> {}",
    "retry -> error -32603 Internal error",
  ]);
  // A new prompt runs as turn 2.
  assert.deepEqual(await outcome(b.prompt(sid, "next", { key: "N" }).promise), { ok: { stopReason: "end_turn" } });
});

test("v2 a key's fate survives a restart: discarded stays -32800, inserted stays its messageId, other content conflicts (S58, S56)", T, async (t) => {
  const dir = await freshDir(t);
  const a = Peer.spawn(t, { version: 2, dir });
  await a.init();
  const sid = await a.newSession();
  const p1 = a.prompt(sid, "/sleep 5000 long", { key: "f-in" });
  await a.answer(p1);
  const p2 = a.prompt(sid, "held", { key: "f-out" });
  await p2.id;
  await a.cancel(sid);
  assert.deepEqual(await a.answer(p2), { error: { code: -32800, message: "Request cancelled" } });
  await a.waitIdle(sid);
  await a.kill9();
  const b = Peer.spawn(t, { version: 2, dir });
  await b.init();
  assert.deepEqual(await b.answer(b.send("session/resume", { sessionId: sid, cwd: dir }, "resume")), { result: {} });
  const cases = [
    [b.prompt(sid, "held", { key: "f-out", label: "discarded" }), { error: { code: -32800, message: "Request cancelled" } }],
    [b.prompt(sid, "/sleep 5000 long", { key: "f-in", label: "inserted" }), { result: { messageId: "f-in" } }],
    [
      b.prompt(sid, "other", { key: "f-in", label: "other content" }),
      { error: { code: -32010, message: "conflict", data: { kind: "conflict", messageId: "f-in" } } },
    ],
  ];
  for (const [h, expected] of cases) assert.deepEqual(await b.answer(h), expected, h.label);
  // Nothing ran: only the snapshot came.
  expectLines(b.transcript(sid), [
    "state_update idle (none)",
    "resume -> {}",
    "discarded -> error -32800 Request cancelled",
    'inserted -> {"messageId":"f-in"}',
    "other content -> error -32010 conflict",
  ]);
});
