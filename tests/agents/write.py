"""Writes tests/agents/scenarios/*.json: the agent parity scenarios (issue 51, part 5).

Each expected log below is transcribed from docs/SPEC.md and the wave's decisions
(/work/briefs/common.md, decisions 1-8), never from a driver's output. Run it from anywhere:
`python3 tests/agents/write.py`; the JSON files are what the runners read (FORMAT.md)."""

import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent / "scenarios"


def enc(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def msg(id, content="hi"):
    """A scenario message (the runner adds `source: {kind: user}`)."""
    return {"id": id, "content": content}


def rec(message):
    """A message as a record holds it (the encoder's key order: id, content, source)."""
    return {"id": message["id"], "content": message["content"], "source": {"kind": "user"}}


class Log:
    """The expected log, numbered from 1 (or after `given`)."""

    def __init__(self, given=()):
        self.lines = []
        self.given = list(given)
        self.seq = len(self.given) + 1

    def add(self, type, data):
        self.lines.append(enc({"seq": self.seq, "type": type, "data": data}))
        self.seq += 1
        return self

    def insert(self, target, start, message, wakeup):
        data = {"target": target, "start": start, "inserted": [rec(message)]}
        if wakeup:
            data["wakeup"] = True
        return self.add("agent/inbox/spliced", data)

    def followup(self, message, start=0):
        return self.insert("next-turn", start, message, True)

    def steer(self, message, start=0):
        return self.insert("next-step", start, message, True)

    def inject(self, message, start=0):
        return self.insert("next-step", start, message, False)

    def claim(self, target, count, start=0):
        return self.add("agent/inbox/spliced",
                        {"target": target, "start": start, "removedCount": count, "inserted": []})

    def cancel_splice(self, target, count, start=0):
        return self.add("agent/inbox/spliced", {"target": target, "start": start,
                                                "removedCount": count, "inserted": [],
                                                "outcome": "canceled"})

    def turn_start(self, turn):
        return self.add("turn/start", {"turn": turn})

    def step_start(self, turn, step):
        return self.add("step/start", {"turn": turn, "step": step})

    def user(self, message):
        return self.add("user/message", rec(message))

    def step_end(self, turn, step):
        return self.add("step/end", {"turn": turn, "step": step})

    def turn_end(self, turn, reason):
        return self.add("turn/end", {"turn": turn, "reason": reason})

    def quiet_turn(self, turn, message, reason=None):
        """S24, S27-S35: a follow-up to an idle agent, entered as claimed, one step, completed."""
        self.followup(message).turn_start(turn).claim("next-turn", 1)
        self.step_start(turn, 1).user(message).step_end(turn, 1)
        return self.turn_end(turn, reason or COMPLETED)


COMPLETED = {"kind": "completed"}
MAX_TOKENS = {"kind": "max-tokens"}
BLOCKED = {"kind": "blocked"}


def aborted(cause):
    return {"kind": "aborted", "reason": {"kind": cause}}


def error(call, what, detail, code):
    return {"kind": "error",
            "error": {"message": f"the host's {call} call {what}: {detail}", "code": code}}


OK = {"ok": None}
M1, M2, M3 = msg("m1"), msg("m2"), msg("m3")
#: Decision 2's detail for a step that returned nothing: the session layer's spelling
#: (`Session::returned_nothing`).
NOTHING = "it returned nothing"
#: S38 with decision 7: a hook that raised, its error's own message as the detail.
BOOM = "boom"
#: Rust hosts cannot return nothing (their hooks return typed answers): those scenarios are the
#: bindings'.
NO_NOTHING = "a Rust hook cannot return nothing (its answer is typed)"
#: A tokio hook cannot raise: it answers `Fail(ErrorInfo)` itself (the host's own error, not
#: the session's `host-raised`), or panics, which is `host-panicked` by design.
NO_RAISE = {"tokio": "a tokio hook cannot raise (it answers Fail itself, or panics: host-panicked)"}


def fate_claimed(turn, step=None, end=None):
    claimed = {"turn": turn}
    if step is not None:
        claimed["step"] = step
    if end is not None:
        claimed["end"] = end
    return {"ok": {"claimed": claimed}}


SCENARIOS = {}


def scenario(name, about, steps, log, appends=None, options=None, hooks=None, faults=None,
             given=None, skip=None, needs=None):
    body = {"about": about}
    if options:
        body["options"] = options
    body["hooks"] = hooks or {}
    if faults:
        body["faults"] = faults
    if given:
        body["given"] = given
    if skip:
        body["skip"] = skip
    if needs:
        body["needs"] = needs
    body["steps"] = steps
    body["log"] = log.given + log.lines
    if appends is not None:
        body["appends"] = appends
    SCENARIOS[name] = body


# ----- deliveries ---------------------------------------------------------------------------

scenario(
    "followup-quiet-turn",
    "Decision 1, S24, S27-S35: a host that writes only `step` (no pre-step, no turn-stopping "
    "hook). The follow-up's batch carries the wake, the claim and the session's own pre-step "
    "answer (enter the claimed batch); the step's answer carries the session's turn-stopping "
    "answer (done): a quiet turn costs 2 appends.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1), appends=2,
    hooks={"step": ["completed"]})

scenario(
    "followup-every-hook",
    "S29-S35, S31: a host that writes all three hooks (enter the claimed batch, record a host "
    "event then complete, done). Every host answer is its own append: 5 appends.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .add("model/output", {"text": "hello"}).step_end(1, 1).turn_end(1, COMPLETED),
    appends=5,
    hooks={"pre_step": ["enter-claimed"],
           "step": [{"record": [{"type": "model/output", "data": {"text": "hello"}}],
                     "then": "completed"}],
           "turn_stopping": ["done"]})

I1, S1 = msg("i1", "ctx"), msg("s1", "go")
scenario(
    "inject-steer-followup",
    "S20/I7: an idle inject opens no turn (one append, one splice, no wakeup); S24/S28: a steer "
    "to an idle agent wakes it and the turn claims all of NS as one splice (the inject rides "
    "along, NS order); S22: a follow-up after it gets a turn of its own.",
    [{"do": "inject", "message": I1, "expect": OK},
     {"do": "fate", "id": "i1", "expect": {"ok": {"pending": "next-step"}}},
     {"do": "steer", "message": S1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "followup", "message": M2, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "i1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "fate", "id": "s1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "fate", "id": "m2", "expect": fate_claimed(2, 1, "completed")},
     {"do": "fate", "id": "never-sent", "expect": {"ok": "unknown"}},
     {"do": "close", "expect": OK}],
    Log().inject(I1).steer(S1, start=1).turn_start(1).claim("next-step", 2)
    .step_start(1, 1).user(I1).user(S1).step_end(1, 1).turn_end(1, COMPLETED)
    .quiet_turn(2, M2),
    appends=5,
    hooks={"step": ["completed"]})

scenario(
    "remove-pending",
    "S15: remove answers whether the id was pending (an ordinary removal: outcome canceled); "
    "absent: false, nothing written. S51/S58: the removed id is held as discarded.",
    [{"do": "inject", "message": I1, "expect": OK},
     {"do": "remove", "id": "i1", "expect": {"ok": True}},
     {"do": "remove", "id": "i1", "expect": {"ok": False}},
     {"do": "fate", "id": "i1", "expect": {"ok": "discarded"}},
     {"do": "close", "expect": OK}],
    Log().inject(I1).cancel_splice("next-step", 1),
    appends=2)

# ----- host answers -------------------------------------------------------------------------

scenario(
    "step-continue-then-max-tokens",
    "S30, S32-S34: a continue step is followed by a pre-step with an empty batch (NS is empty, "
    "S28 claims nothing between steps, so no splice); the default pre-step enters it as it is, "
    "which after a continue opens a step with no message; a max-tokens step is terminal, the "
    "turn-stopping default is done, and the turn ends max-tokens.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1).step_start(1, 2).step_end(1, 2).turn_end(1, MAX_TOKENS),
    appends=3,
    hooks={"step": ["continue", "max-tokens"]})

scenario(
    "prestep-reject",
    "S29, S30, S35: a pre-step hook that rejects: the turn ends blocked, with no step.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, None, "blocked")},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).turn_end(1, BLOCKED),
    appends=2,
    hooks={"pre_step": ["reject"], "step": ["completed"]})

scenario(
    "prestep-enter-ids",
    "S29: the pre-step answer is the complete batch: it may drop claimed messages. The turn "
    "claims i1 and s1 (all of NS) and enters only s1.",
    [{"do": "inject", "message": I1, "expect": OK},
     {"do": "steer", "message": S1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "i1", "expect": fate_claimed(1, None, "completed")},
     {"do": "fate", "id": "s1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log().inject(I1).steer(S1, start=1).turn_start(1).claim("next-step", 2)
    .step_start(1, 1).user(S1).step_end(1, 1).turn_end(1, COMPLETED),
    appends=4,
    hooks={"pre_step": [{"enter": ["s1"]}], "step": ["completed"]})

scenario(
    "prestep-raise",
    "S38, decision 7: a pre-step hook that raises (Rust: returns an error / panics) fails the "
    "turn with code host-raised; the detail is the error's own message.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, None, "error")},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1)
    .turn_end(1, error("preStep", "raised", BOOM, "host-raised")),
    appends=2,
    hooks={"pre_step": [{"raise": BOOM}], "step": ["completed"]},
    skip=NO_RAISE)

scenario(
    "step-raise",
    "S32, S38: a step that records a host event then raises: step/end closes the step (the "
    "event stays inside it, S40), then the turn ends error host-raised.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .add("model/output", {"text": "partial"}).step_end(1, 1)
    .turn_end(1, error("step", "raised", BOOM, "host-raised")),
    appends=3,
    hooks={"step": [{"record": [{"type": "model/output", "data": {"text": "partial"}}],
                     "then": {"raise": BOOM}}]},
    skip=NO_RAISE)

scenario(
    "step-nothing",
    "Decision 2: a step that returns nothing is an invalid answer: the session answers fail "
    "host-invalid-answer on the host's behalf, the turn ends error.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1)
    .turn_end(1, error("step", "gave an invalid answer", NOTHING, "host-invalid-answer")),
    appends=2,
    hooks={"step": ["nothing"]},
    skip={"tokio": NO_NOTHING, "threads": NO_NOTHING})

scenario(
    "turnstopping-nothing",
    "Decision 2: a turn-stopping hook that returns nothing answers done (as a missing one "
    "would); it is a host call of its own (3 appends).",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1), appends=3,
    hooks={"step": ["completed"], "turn_stopping": ["nothing"]},
    skip={"tokio": NO_NOTHING, "threads": NO_NOTHING})

DEEP = msg("x1", {"$nest": 130})
scenario(
    "refused-answer-too-deep",
    "Decision 3: a pre-step answer the session refuses (it enters a message nesting 131 levels, "
    "deeper than a log record holds, S5 / MAX_MESSAGE_DEPTH 124) is an invalid answer: fail "
    "host-invalid-answer with the refusal's text, and the turn ends; the agent goes on.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, None, "error")},
     {"do": "followup", "message": M2, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1)
    .turn_end(1, error("preStep", "gave an invalid answer",
                       "the value nests 131 levels deep; at most 124 fit in a log record",
                       "host-invalid-answer"))
    .followup(M2).turn_start(2).claim("next-turn", 1).step_start(2, 1).user(M2)
    .step_end(2, 1).turn_end(2, COMPLETED),
    hooks={"pre_step": [{"enter": ["m1", DEEP]}, "enter-claimed"], "step": ["completed"]})

# ----- refusals: one vocabulary of kinds (decision 7) ---------------------------------------

scenario(
    "refused-deliveries",
    "Decision 7, the session's admission: an id longer than 256 bytes (id-too-long), a message "
    "larger than 1 MiB as JSON (message-too-large), a message nesting deeper than a record "
    "holds (too-deep): refused before anything is written, the agent goes on (S5).",
    [{"do": "followup", "message": msg("x" * 257), "expect": {"error": "id-too-long"}},
     {"do": "followup", "message": msg("big", {"$text": 1_100_000}),
      "expect": {"error": "message-too-large"}},
     {"do": "followup", "message": msg("deep", {"$nest": 130}), "expect": {"error": "too-deep"}},
     {"do": "remove", "id": "y" * 257, "expect": {"error": "id-too-long"}},
     {"do": "inject", "message": I1, "expect": OK},
     {"do": "close", "expect": OK}],
    Log().inject(I1),
    appends=1)

scenario(
    "d3-refusal-shape",
    "Difference 3: the same refusal is the same typed outcome in every binding (decision 7's "
    "kind names): turn-mismatch (S54: a steer guarded on turn 1 while idle), full (S55, "
    "max_pending 1), already-pending (S13), conflict (S56), "
    "already-delivered (S52), disposed (S45, also for resume, S57); fate is still answered "
    "once disposed (S58).",
    [{"do": "steer", "message": S1, "turn": 1, "expect": {"error": "turn-mismatch"}},
     {"do": "inject", "message": I1, "expect": OK},
     {"do": "inject", "message": msg("i2"), "expect": {"error": "full"}},
     {"do": "inject", "message": I1, "expect": {"error": "already-pending"}},
     {"do": "inject", "message": msg("i1", "other"), "expect": {"error": "conflict"}},
     {"do": "remove", "id": "i1", "expect": {"ok": True}},
     {"do": "inject", "message": I1, "expect": {"error": "already-delivered"}},
     {"do": "dispose", "expect": OK},
     {"do": "inject", "message": msg("i3"), "expect": {"error": "disposed"}},
     {"do": "resume", "expect": {"error": "disposed"}},
     {"do": "fate", "id": "i1", "expect": {"ok": "discarded"}}],
    Log().inject(I1).cancel_splice("next-step", 1),
    appends=2,
    options={"max_pending": 1})

# ----- cancels, resume ----------------------------------------------------------------------

STEP_STARTED = {"do": "await-record", "type": "step/start", "count": 1, "expect": OK}

scenario(
    "cancel-running-step",
    "S39-S41: a cancel while the step runs (no keepInbox, lists empty: nothing durable of its "
    "own, only the abort); the step answers once cancelled and the turn ends aborted with the "
    "cause (S33, S36).",
    [{"do": "followup", "message": M1, "expect": OK},
     STEP_STARTED,
     {"do": "cancel", "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "aborted")},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1).turn_end(1, aborted("user")),
    hooks={"step": ["until-cancelled"]})

scenario(
    "cancel-keep-inbox-then-resume",
    "S24, S26, S35, S41: a follow-up sent while a turn runs waits in NT (not latched); a cancel "
    "with keepInbox keeps it, the aborted turn has no continuation, so it parks. S57: resume "
    "wakes it as a waking send would.",
    [{"do": "followup", "message": M1, "expect": OK},
     STEP_STARTED,
     {"do": "followup", "message": M2, "expect": OK},
     {"do": "cancel", "keep_inbox": True, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "pending", "expect": {"ok": {"next-turn": ["m2"], "next-step": []}}},
     {"do": "fate", "id": "m2", "expect": {"ok": {"pending": "next-turn"}}},
     {"do": "resume", "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m2", "expect": fate_claimed(2, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .followup(M2).step_end(1, 1).turn_end(1, aborted("user"))
    .turn_start(2).claim("next-turn", 1).step_start(2, 1).user(M2).step_end(2, 1)
    .turn_end(2, COMPLETED),
    hooks={"step": ["until-cancelled", "completed"]})

PARKED = Log().followup(M1).lines
scenario(
    "resume-restored",
    "S48: a restored waking follow-up parks at open; S57: resume starts it.",
    [{"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": {"ok": {"pending": "next-turn"}}},
     {"do": "resume", "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "resume", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log(PARKED).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1).turn_end(1, COMPLETED),
    appends=2,
    given=PARKED,
    hooks={"step": ["completed"]})

scenario(
    "deaf-host-past-the-grace",
    "S38-S40, decision 1/6: a step that ignores its cancellation is abandoned after the abort "
    "grace (300 ms here): the session answers it fail host-abandoned, which, cancellation "
    "having been requested, ends the turn aborted (S38). Decision 3: its late answer (released "
    "after the turn ended) is stale and dropped: the agent goes on and runs the next turn.",
    [{"do": "followup", "message": M1, "expect": OK},
     STEP_STARTED,
     {"do": "cancel", "expect": OK},
     {"do": "wait-idle", "within_ms": 3000, "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "aborted")},
     {"do": "release"},
     {"do": "sleep", "ms": 100},
     {"do": "followup", "message": M2, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1).turn_end(1, aborted("user")).quiet_turn(2, M2),
    options={"abort_grace_ms": 300},
    hooks={"step": ["deaf", "completed"]})

# ----- failed appends (decision 4) ----------------------------------------------------------

scenario(
    "failed-append",
    "Decision 4: a failed append fails every member of its batch (persistence) and the agent "
    "goes on, as if the input had never been sent: sent again it runs once.",
    [{"do": "followup", "message": M1, "expect": {"error": "persistence"}},
     {"do": "fate", "id": "m1", "expect": {"ok": "unknown"}},
     {"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1), appends=2,
    faults=[{"append": 1, "fault": "fail"}],
    hooks={"step": ["completed"]})

scenario(
    "failed-append-of-an-answer",
    "Decision 4: the batch holding the step's answer fails; the session stages the answer "
    "again after the retry pause and the turn ends once, with no record twice.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1), appends=2,
    faults=[{"append": 2, "fault": "fail"}],
    hooks={"step": ["completed"]})

scenario(
    "indeterminate-append",
    "Decision 4, 7: an indeterminate append stops the agent: its caller gets indeterminate, "
    "every later call stopped; nothing is in the log.",
    [{"do": "followup", "message": M1, "expect": {"error": "indeterminate"}},
     {"do": "followup", "message": M2, "expect": {"error": "stopped"}},
     {"do": "wait-idle", "expect": {"error": "stopped"}}],
    Log(), appends=0,
    faults=[{"append": 1, "fault": "indeterminate"}],
    hooks={"step": ["completed"]})

scenario(
    "fenced-append",
    "Decision 4, 7: an append refused because another writer owns the session (fenced) fails "
    "its caller (persistence) and stops the agent: every later call is stopped.",
    [{"do": "followup", "message": M1, "expect": {"error": "persistence"}},
     {"do": "followup", "message": M2, "expect": {"error": "stopped"}},
     {"do": "wait-idle", "expect": {"error": "stopped"}}],
    Log(), appends=0,
    faults=[{"append": 1, "fault": "fenced"}],
    hooks={"step": ["completed"]})

# ----- close and dispose --------------------------------------------------------------------

scenario(
    "dispose-while-running",
    "S45: dispose = cancel {kind: disposed} without keepInbox: the pending follow-up is cleared "
    "(one ordinary splice, outcome canceled), the step is aborted and answers, the turn ends "
    "aborted disposed; dispose returns once disposed; every input is then refused disposed; "
    "fate is still answered (S58).",
    [{"do": "followup", "message": M1, "expect": OK},
     STEP_STARTED,
     {"do": "followup", "message": M2, "expect": OK},
     {"do": "dispose", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "aborted")},
     {"do": "fate", "id": "m2", "expect": {"ok": "discarded"}},
     {"do": "followup", "message": M3, "expect": {"error": "disposed"}},
     {"do": "wait-idle", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .followup(M2).cancel_splice("next-turn", 1).step_end(1, 1).turn_end(1, aborted("disposed")),
    hooks={"step": ["until-cancelled"]})

scenario(
    "close-then-send",
    "Decision 7: close ends the agent; a later input fails closed; fate is still answered.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "close", "expect": OK},
     {"do": "followup", "message": M2, "expect": {"error": "closed"}},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "completed")}],
    Log().quiet_turn(1, M1), appends=2,
    hooks={"step": ["completed"]})

# ----- the six differences (d4, d5 are direct tests in the binding runners) -----------------

scenario(
    "d1-js-prestep-nothing",
    "Difference 1, decision 2: a pre-step hook that returns nothing (Python None, JS "
    "undefined) enters the claimed batch, as a missing hook would; it is a host call of its "
    "own (3 appends).",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "wait-idle", "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1), appends=3,
    hooks={"pre_step": ["nothing"], "step": ["completed"]},
    skip={"tokio": NO_NOTHING, "threads": NO_NOTHING})

scenario(
    "d2-default-abort-grace",
    "Difference 2, decision 6: with no abort grace given, every driver has the session's "
    "default, 5 s: a deaf step cancelled is still running 4 s later and abandoned by 7 s.",
    [{"do": "followup", "message": M1, "expect": OK},
     STEP_STARTED,
     {"do": "cancel", "expect": OK},
     {"do": "sleep", "ms": 4000},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1)},
     {"do": "wait-idle", "within_ms": 3000, "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "aborted")},
     {"do": "close", "expect": OK}],
    Log().followup(M1).turn_start(1).claim("next-turn", 1).step_start(1, 1).user(M1)
    .step_end(1, 1).turn_end(1, aborted("user")),
    hooks={"step": ["deaf"]})

scenario(
    "d6-python-retry-pause",
    "Difference 6, decision 6: every driver sets the retry pause (1500 ms here): the pre-step "
    "hook's answer, whose append failed, is held through it (700 ms later no step has begun: "
    "m1 is claimed by turn 1, with no step), then written and the turn runs.",
    [{"do": "followup", "message": M1, "expect": OK},
     {"do": "sleep", "ms": 700},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1)},
     {"do": "wait-idle", "within_ms": 3000, "expect": OK},
     {"do": "fate", "id": "m1", "expect": fate_claimed(1, 1, "completed")},
     {"do": "close", "expect": OK}],
    Log().quiet_turn(1, M1),
    options={"retry_after_ms": 1500},
    faults=[{"append": 2, "fault": "fail"}],
    hooks={"pre_step": ["enter-claimed"], "step": ["completed"]})


def main():
    HERE.mkdir(exist_ok=True)
    for old in HERE.glob("*.json"):
        if old.stem not in SCENARIOS:
            old.unlink()
    for name, body in SCENARIOS.items():
        (HERE / f"{name}.json").write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(SCENARIOS)} scenarios")


if __name__ == "__main__":
    main()
