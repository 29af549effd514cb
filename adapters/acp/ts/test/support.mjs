// Test support for the coxswain-acp TypeScript client suite (issue 53 §5).
//
// Every well-formed exchange goes through the official ACP TypeScript SDK
// (`@agentclientprotocol/sdk`): v1 from the package root, v2 from
// `/experimental/v2`. The child's stdin and stdout are tapped below the SDK so
// that each test can pin the exact wire traffic: which responses, in which
// order, interleaved how with the `session/update` notifications. Only the
// malformed-JSON case writes raw bytes (`Peer.writeRaw`).
//
// Nothing here sleeps on the wall clock: `waitFor` waits on wire traffic, with
// a bound so that a silent binary fails the test instead of hanging it.
//
// Environment:
//   COXSWAIN_ACP_BIN         the binary (default $CARGO_TARGET_DIR/debug/coxswain-acp,
//                            CARGO_TARGET_DIR defaulting to ~/.cache/coxswain-target)
//   COXSWAIN_ACP_WAIT_MS     the bound of every wait on the wire (default 15000)
//   COXSWAIN_ACP_EXTRA_ARGS  extra arguments for every spawn, space-separated: to
//                            break the binary on purpose (`--redelivery 0` fails the
//                            kill -9 tests) and watch the suite notice

import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir, homedir } from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { isDeepStrictEqual } from "node:util";
import assert from "node:assert/strict";

import * as acp1 from "@agentclientprotocol/sdk";
import * as acp2 from "@agentclientprotocol/sdk/experimental/v2";

/** The binary under test. */
export const BIN =
  process.env.COXSWAIN_ACP_BIN ??
  path.join(
    process.env.CARGO_TARGET_DIR ?? path.join(homedir(), ".cache", "coxswain-target"),
    "debug",
    "coxswain-acp",
  );

/** How long any single wait on the wire may take before the test fails. */
export const WAIT_MS = Number(process.env.COXSWAIN_ACP_WAIT_MS ?? 15000);

/** A fresh, empty session directory, removed by `t.after`. */
export async function freshDir(t) {
  const dir = await mkdtemp(path.join(tmpdir(), "coxswain-acp-ts-"));
  t?.after(async () => {
    // Every agent on the directory is gone before it is removed.
    for (const peer of peersOf.get(dir) ?? []) await peer.finish();
    peersOf.delete(dir);
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** The peers spawned on each directory (for `freshDir`'s cleanup). */
const peersOf = new Map();

/**
 * Polls `file` every 10 ms until it contains `needle` (a durable event the
 * agent wrote); fails after `WAIT_MS`. Used where v1 sends no update to wait on.
 */
export async function waitFileContains(file, needle, timeout = WAIT_MS) {
  const until = Date.now() + timeout;
  for (;;) {
    const body = await readFile(file, "utf8").catch(() => "");
    if (body.includes(needle)) return body;
    if (Date.now() > until) throw new Error(`${file} never contained ${needle}:\n${body}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A text content block. */
export const text = (s) => ({ type: "text", text: s });

/** The first text of a content block list (or of one block). */
function firstText(content) {
  const blocks = Array.isArray(content) ? content : content ? [content] : [];
  const b = blocks.find((x) => x && x.type === "text");
  return b ? b.text : JSON.stringify(content);
}

/** Settles a promise into `{ ok }` or `{ error: { code, message, data } }`. */
export async function outcome(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    const error = { code: e?.code, message: e?.message };
    if (e && "data" in e && e.data !== undefined) error.data = e.data;
    return { error };
  }
}

/**
 * One coxswain-acp child process, driven by the SDK over its stdio, with the
 * wire recorded.
 */
export class Peer {
  /**
   * Spawns `coxswain-acp --echo --dir DIR ...args` and connects the SDK's
   * client (v1 or v2) to it. Does not send `initialize` (see `init`).
   */
  static spawn(t, { version = 2, dir, args = [] } = {}) {
    if (!dir) throw new Error("Peer.spawn needs a dir");
    const peer = new Peer(version, dir, args);
    if (!peersOf.has(dir)) peersOf.set(dir, new Set());
    peersOf.get(dir).add(peer);
    t?.after(() => peer.finish());
    return peer;
  }

  constructor(version, dir, args) {
    this.version = version;
    this.dir = dir;
    this.acp = version === 1 ? acp1 : acp2;
    /** Every JSON-RPC message, in wire order: `{ dir: "in" | "out", msg }` or `{ dir, raw }`. */
    this.wire = [];
    this.stderr = "";
    this.labels = new Map(); // request id -> label
    this.pendingOut = []; // { method, params, label, resolveId }
    this.waiters = [];
    this.exited = null;

    // COXSWAIN_ACP_EXTRA_ARGS (split on spaces) is appended to every spawn:
    // a way to break the binary on purpose (e.g. `--redelivery 0`) and watch
    // the tests that depend on the default fail.
    const extra = (process.env.COXSWAIN_ACP_EXTRA_ARGS ?? "").split(" ").filter(Boolean);
    this.child = spawn(BIN, ["--echo", "--dir", dir, ...args, ...extra], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.exitedPromise = new Promise((resolve) => {
      this.child.on("exit", (code, signal) => {
        this.exited = { code, signal };
        this.notify();
        resolve(this.exited);
      });
      // A binary that cannot be spawned (ENOENT, EACCES) never exits: this is its end.
      this.child.on("error", (err) => {
        this.exited ??= { error: `${BIN}: ${err.message}` };
        this.notify();
        resolve(this.exited);
      });
    });
    this.child.stderr.setEncoding("utf8");
    this.child.stderr.on("data", (d) => {
      // Bounded: keep the last 64 KiB of diagnostics for failure messages.
      this.stderr = (this.stderr + d).slice(-65536);
    });
    this.child.stdin.on("error", () => {}); // EPIPE after a kill is expected

    const inLines = lineTap((line) => this.record("in", line));
    const outLines = lineTap((line) => this.record("out", line));
    const stdoutWeb = Readable.toWeb(this.child.stdout).pipeThrough(
      new TransformStream({
        transform(chunk, controller) {
          inLines(chunk);
          controller.enqueue(chunk);
        },
      }),
    );
    const stdinWeb = Writable.toWeb(this.child.stdin);
    const stdinWriter = stdinWeb.getWriter();
    const output = new WritableStream({
      async write(chunk) {
        outLines(chunk);
        await stdinWriter.write(chunk);
      },
      async close() {
        await stdinWriter.close();
      },
    });
    this.rawWriter = stdinWriter;

    const app = this.acp.client({ name: "coxswain-acp-ts-suite" });
    // Updates are read from the wire tap; the handler only has to exist so
    // that the SDK accepts (and validates) them.
    this.sdkUpdates = [];
    app.onNotification("session/update", ({ params }) => {
      this.sdkUpdates.push(params);
    });
    this.conn = app.connect(this.acp.ndJsonStream(output, stdoutWeb));
    this.agent = this.conn.agent;
  }

  record(dir, line) {
    let entry;
    try {
      entry = { dir, msg: JSON.parse(line) };
    } catch {
      entry = { dir, raw: line };
    }
    if (dir === "out" && entry.msg && entry.msg.method && entry.msg.id !== undefined) {
      // Map the SDK's request id to the label of the request it writes, in
      // call order among requests with the same method and params.
      const i = this.pendingOut.findIndex(
        (p) => p.method === entry.msg.method && isDeepStrictEqual(p.params, entry.msg.params),
      );
      if (i >= 0) {
        const [p] = this.pendingOut.splice(i, 1);
        if (p.label) this.labels.set(entry.msg.id, p.label);
        p.resolveId(entry.msg.id);
      }
    }
    this.wire.push(entry);
    this.notify();
  }

  notify() {
    for (const w of [...this.waiters]) w.check();
  }

  /**
   * Every `session/update` on the wire reached the SDK's handler: the
   * official client validated it against its schema (a rejected one is only
   * logged by the SDK, so it is counted here).
   */
  assertSdkAcceptedUpdates() {
    const onWire = this.wire.filter((e) => e.dir === "in" && e.msg?.method === "session/update").length;
    if (onWire !== this.sdkUpdates.length) {
      throw new Error(
        `the SDK (${this.version === 1 ? "v1" : "experimental/v2"}) accepted ${this.sdkUpdates.length} ` +
          `of the ${onWire} session/update notifications on the wire\n${this.dump()}`,
      );
    }
  }

  /** `initialize` at this peer's version; returns the raw result. */
  async init(extra = {}) {
    const params =
      this.version === 1
        ? {
            protocolVersion: 1,
            clientCapabilities: {},
            clientInfo: { name: "coxswain-acp-ts-suite", version: "0.0.0" },
            ...extra,
          }
        : {
            protocolVersion: 2,
            info: { name: "coxswain-acp-ts-suite", version: "0.0.0" },
            capabilities: {},
            ...extra,
          };
    const h = this.send("initialize", params);
    try {
      return await h.promise;
    } catch (e) {
      await new Promise((r) => setTimeout(r, 50)); // let stderr and the exit status arrive
      throw new Error(`initialize failed: ${e?.message ?? e}\n${this.dump()}\nexit: ${JSON.stringify(this.exited)}`);
    }
  }

  /** `session/new` (cwd = the session dir); returns the session id. */
  async newSession() {
    const r = await this.send(
      "session/new",
      this.version === 1 ? { cwd: this.dir, mcpServers: [] } : { cwd: this.dir },
    ).promise;
    return r.sessionId;
  }

  /**
   * Sends a request through the SDK. Returns `{ label, promise, id }`:
   * `promise` is the SDK's (resolved with the validated result or rejected
   * with a `RequestError`), `id` resolves to the JSON-RPC id once written.
   * `label` names the request's response in `transcript`.
   */
  send(method, params, label) {
    let resolveId;
    const id = new Promise((r) => (resolveId = r));
    this.pendingOut.push({ method, params, label, resolveId });
    const promise = this.agent.request(method, params);
    promise.catch(() => {}); // observed through `outcome` or the wire
    return { label, promise, id };
  }

  /** `session/prompt` with text `s`; `key` becomes the `idempotencyKey` extra field. */
  prompt(sessionId, s, { key, label, blocks } = {}) {
    const params = { sessionId, prompt: blocks ?? [text(s)] };
    if (key !== undefined) params.idempotencyKey = key;
    return this.send("session/prompt", params, label ?? s);
  }

  /** `_session/steering`. */
  steer(sessionId, s, { turn, idleBehavior, key, label } = {}) {
    const params = { sessionId, prompt: [text(s)] };
    if (idleBehavior !== undefined) params.idleBehavior = idleBehavior;
    if (turn !== undefined) params.turn = turn;
    if (key !== undefined) params.idempotencyKey = key;
    return this.send("_session/steering", params, label ?? `steer ${s}`);
  }

  /** `session/cancel` (a notification). */
  cancel(sessionId) {
    return this.agent.notify("session/cancel", { sessionId });
  }

  /** Writes bytes straight to the child's stdin, bypassing the SDK. */
  async writeRaw(s) {
    const bytes = new TextEncoder().encode(s);
    // Recorded as the tap would (a line that does not parse is `raw`).
    for (const line of s.split("\n")) if (line.trim()) this.record("out", line);
    await this.rawWriter.write(bytes);
  }

  /** Wire index of the response to request id `id` (-1 while none). */
  responseIndex(id) {
    return this.wire.findIndex(
      (e) => e.dir === "in" && e.msg && !e.msg.method && e.msg.id === id,
    );
  }

  /** The raw response (`{ result }` or `{ error }`) to request id `id`. */
  response(id) {
    const i = this.responseIndex(id);
    if (i < 0) return undefined;
    const { result, error } = this.wire[i].msg;
    return error !== undefined ? { error } : { result };
  }

  /** How many responses carry id `id` (must be 1: every request answered once). */
  responseCount(id) {
    return this.wire.filter((e) => e.dir === "in" && e.msg && !e.msg.method && e.msg.id === id)
      .length;
  }

  /** Waits until the response to handle `h` is on the wire; returns it raw. */
  async answer(h, what) {
    const id = await h.id;
    await this.waitFor((e) => e.dir === "in" && e.msg && !e.msg.method && e.msg.id === id, {
      what: what ?? `the response to ${h.label ?? id}`,
    });
    return this.response(id);
  }

  /** The `session/update` params' `update`s for `sessionId`, from wire index `from`. */
  updates(sessionId, from = 0) {
    return this.wire
      .slice(from)
      .filter(
        (e) =>
          e.dir === "in" &&
          e.msg &&
          e.msg.method === "session/update" &&
          e.msg.params?.sessionId === sessionId,
      )
      .map((e) => e.msg.params.update);
  }

  /**
   * Waits for a wire entry matching `pred` at index `from` or later; returns
   * its index. Fails after `WAIT_MS` (or when the child exits) with the
   * transcript so far.
   */
  waitFor(pred, { from = 0, count = 1, what = "a wire entry", timeout = WAIT_MS } = {}) {
    return new Promise((resolve, reject) => {
      const w = {
        check: () => {
          let seen = 0;
          for (let i = from; i < this.wire.length; i++) {
            if (pred(this.wire[i], i) && ++seen === count) {
              done();
              resolve(i);
              return;
            }
          }
          if (this.exited) {
            done();
            reject(
              new Error(
                `waiting for ${what}: the agent exited ${JSON.stringify(this.exited)}\n` +
                  this.dump(),
              ),
            );
          }
        },
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`waiting for ${what}: nothing after ${timeout} ms\n${this.dump()}`));
      }, timeout);
      const done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((x) => x !== w);
      };
      this.waiters.push(w);
      w.check();
    });
  }

  /** Waits for a `session/update` of `sessionId` whose update matches `pred`. */
  waitUpdate(sessionId, pred, opts = {}) {
    return this.waitFor(
      (e) =>
        e.dir === "in" &&
        e.msg?.method === "session/update" &&
        e.msg.params?.sessionId === sessionId &&
        pred(e.msg.params.update),
      { what: "a session/update", ...opts },
    );
  }

  /** Waits for the n-th (1-based) idle `state_update` of `sessionId` (v2). */
  waitIdle(sessionId, n = 1, opts = {}) {
    return this.waitUpdate(sessionId, (u) => u.sessionUpdate === "state_update" && u.state === "idle", {
      what: `idle state_update #${n}`,
      count: n,
      ...opts,
    });
  }

  /**
   * The incoming traffic from wire index `from`, one line per message:
   * updates of `sessionId` and responses to labelled requests, rendered
   * compactly (see `render`). Responses to unlabelled requests are left out.
   */
  transcript(sessionId, from = 0) {
    const out = [];
    for (const e of this.wire.slice(from)) {
      if (e.dir !== "in") continue;
      if (!e.msg) {
        out.push(`unparsable ${e.raw}`);
        continue;
      }
      const m = e.msg;
      if (m.method === "session/update") {
        if (m.params?.sessionId === sessionId) out.push(renderUpdate(m.params.update));
      } else if (m.method) {
        out.push(`request ${m.method}`);
      } else if (this.labels.has(m.id)) {
        out.push(`${this.labels.get(m.id)} -> ${renderAnswer(m)}`);
      }
    }
    return out;
  }

  /** The whole wire, for failure messages. */
  dump() {
    const lines = this.wire.map((e) =>
      e.msg ? `${e.dir === "in" ? "<-" : "->"} ${JSON.stringify(e.msg)}` : `${e.dir} raw ${e.raw}`,
    );
    return `wire:\n${lines.join("\n")}\nstderr:\n${this.stderr}`;
  }

  /** Kills the child with SIGKILL (no shutdown of any kind) and waits for it. */
  async kill9() {
    if (!this.exited) this.child.kill("SIGKILL");
    const r = await this.exitedPromise;
    this.conn.close();
    return r;
  }

  /**
   * The end of a test (idempotent): checks that the SDK accepted every
   * update, then `kill`. The check runs while the connection is open
   * (closing it drops notifications the SDK has not dispatched yet), and not
   * for a peer killed with SIGKILL, whose last updates may be on the wire but
   * not yet dispatched.
   */
  async finish() {
    if (this.finished) return;
    this.finished = true;
    try {
      if (!this.exited) {
        await new Promise((r) => setTimeout(r, 50));
        this.assertSdkAcceptedUpdates();
      }
    } finally {
      await this.kill();
    }
  }

  /** Closes stdin, waits up to 2 s for a clean exit, then SIGKILL. */
  async kill() {
    this.conn.close();
    if (this.exited) return this.exited;
    try {
      this.child.stdin.end();
    } catch {
      // already closed
    }
    const t = setTimeout(() => this.child.kill("SIGKILL"), 2000);
    const r = await this.exitedPromise;
    clearTimeout(t);
    return r;
  }
}

/** A line splitter over byte chunks, calling `onLine` for each complete line. */
function lineTap(onLine) {
  const decoder = new TextDecoder();
  let buf = "";
  return (chunk) => {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(line);
    }
  };
}

/** One update, compactly: `<kind> <id> <text>` / `state_update <state> ...`. */
export function renderUpdate(u) {
  switch (u.sessionUpdate) {
    case "user_message":
    case "agent_message":
      return `${u.sessionUpdate} ${u.messageId} ${firstText(u.content)}`;
    case "user_message_chunk":
    case "agent_message_chunk":
    case "agent_thought_chunk":
      return `${u.sessionUpdate} ${u.messageId} ${firstText(u.content)}`;
    case "state_update": {
      if (u.state === "running") return `state_update running turn=${u._meta?.coxswain?.turn}`;
      if (u.state === "idle") return `state_update idle ${u.stopReason ?? "(none)"}`;
      return `state_update ${u.state}`;
    }
    case "tool_call":
      return `tool_call ${u.toolCallId} ${u.status ?? ""}`.trimEnd();
    case "tool_call_update":
      return `tool_call_update ${u.toolCallId} ${u.status ?? ""}`.trimEnd();
    default:
      return `${u.sessionUpdate} ${JSON.stringify(u)}`;
  }
}

/** A response, compactly: its result as JSON, or `error <code> <message>`. */
export function renderAnswer(m) {
  if (m.error) return `error ${m.error.code} ${m.error.message}`;
  return JSON.stringify(m.result);
}

/** `n` characters of `c`. */
export const repeat = (c, n) => c.repeat(n);

/**
 * `assert.deepEqual` for transcripts, whose failure message carries the whole
 * actual transcript (the default diff elides lines).
 */
export function expectLines(actual, expected, message) {
  if (!isDeepStrictEqual(actual, expected)) {
    assert.fail(
      `${message ? message + ": " : ""}transcript differs\nactual:\n${JSON.stringify(actual, null, 2)}\n` +
        `expected:\n${JSON.stringify(expected, null, 2)}`,
    );
  }
}
