//! The tape: how a transition crosses to JavaScript without JSON text. Outputs are written as a
//! string of UTF-16 code units (one N-API value for a whole transition), which `tape.js`
//! decodes into object literals with interned strings. Messages cross by handle: a message the
//! caller delivered is named by the handle of the caller's own (frozen) object, so every output
//! that carries it — notifications, pre-step batches, `user/message` events, splices, the
//! pending lists — hands back that one object (S8); only a message the caller never gave (one
//! restored from a log) crosses once, as its JSON text.
//!
//! Units: a number below 2^15 is one unit; a larger one is `0x8000 | k` then `k` 15-bit
//! chunks, most significant first. A string is its length in units, then its units. A message
//! reference is `2h` (handle `h`, known to JavaScript) or `2h + 1` followed by where the new
//! handle's object comes from: `k + 1` (the input's `k`-th message, in the order `tape.js`'s
//! `messagesOf` walks an input) or `0` and the message's JSON text.

use std::sync::Arc;

use coxswain_binding_kit::Table;
use napi_derive::napi;
use smallvec::SmallVec;

use coxswain_core::{
    Abort, Activity, CancelCause, Effect, ErrorInfo, Event, Input, Machine, Notification, Request,
    SharedMessage, Status, Target, TurnEndKind, TurnEndReason,
};

/// The messages JavaScript holds an object for, by handle (the kit's identity table, keyed by
/// handle); a message the core no longer holds (its only owner is this table) is swept, and its
/// handle given to JavaScript to forget.
#[derive(Default)]
pub(crate) struct Handles {
    table: Table<()>,
    next: u64,
}

impl Handles {
    /// The message behind a handle JavaScript gave back (a pre-step batch of the messages it
    /// was handed), if the table still holds it.
    pub(crate) fn get(&self, handle: u64) -> Option<&SharedMessage> {
        self.table.message(handle)
    }

    /// Drops the messages nothing but this table holds, once it has grown to twice its size at
    /// the last sweep (amortized O(1) per message); the handles dropped.
    fn sweep(&mut self) -> Vec<u64> {
        self.table
            .sweep()
            .into_iter()
            .map(|(handle, ())| handle)
            .collect()
    }
}

/// Declares one opcode table of the tape: an enum whose codes are its variants' places, and
/// `NAMES`, the words of the same places, which `tape.js` reads at load ([`tape_table`]) and
/// decodes by. One list makes both, so the codes and the words cannot disagree.
macro_rules! opcodes {
    ($(#[$doc:meta])* $table:ident { $($(#[$vdoc:meta])* $op:ident = $word:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $table {
            $($(#[$vdoc])* $op,)*
        }

        impl $table {
            /// The words of the codes, in code order.
            pub(crate) const NAMES: &'static [&'static str] = &[$($word,)*];

            /// The code written on the tape.
            #[inline]
            pub(crate) const fn code(self) -> u64 {
                self as u64
            }
        }
    };
}

opcodes! {
    /// An event's code: its `type` (the core's `Event::TYPES`, in order).
    EventOp {
        /// `agent/inbox/spliced`.
        Spliced = Event::SPLICED,
        /// `turn/start`.
        TurnStart = Event::TURN_START,
        /// `step/start`.
        StepStart = Event::STEP_START,
        /// `user/message`.
        UserMessage = Event::USER_MESSAGE,
        /// `step/end`.
        StepEnd = Event::STEP_END,
        /// `turn/end`.
        TurnEnd = Event::TURN_END,
    }
}

opcodes! {
    /// An effect's code.
    EffectOp {
        /// `agent/inbox/inserted`.
        Inserted = "inserted",
        /// `agent/inbox/discarded`.
        Discarded = "discarded",
        /// `agent/inbox/claimed`.
        Claimed = "claimed",
        /// `agent/status`.
        Status = "status",
        /// `agent/error`.
        Error = "error",
        /// A turn begins.
        BeginTurn = "beginTurn",
        /// Maintenance begins.
        BeginMaintenance = "beginMaintenance",
        /// The `preStep` request.
        PreStep = "preStep",
        /// The `step` request.
        Step = "step",
        /// The `turnStopping` request.
        TurnStopping = "turnStopping",
        /// An abort.
        Abort = "abort",
        /// The machine is disposed.
        Disposed = "disposed",
    }
}

opcodes! {
    /// A turn end's reason's code: its `kind` (the core's `TurnEndKind` words).
    ReasonOp {
        /// `completed`.
        Completed = TurnEndKind::Completed.as_str(),
        /// `max-tokens`.
        MaxTokens = TurnEndKind::MaxTokens.as_str(),
        /// `blocked`.
        Blocked = TurnEndKind::Blocked.as_str(),
        /// `aborted`, with its cause.
        Aborted = TurnEndKind::Aborted.as_str(),
        /// `error`, with its error.
        Error = TurnEndKind::Error.as_str(),
        /// `interrupted`.
        Interrupted = TurnEndKind::Interrupted.as_str(),
    }
}

opcodes! {
    /// The code of one output of an agent's turn (`src/session.rs`; `session.js` decodes them).
    AgentOutputOp {
        /// An effect to carry out.
        Effect = "effect",
        /// A reply: an input is durable, with `found`.
        Delivered = "delivered",
        /// A reply with no value: host events recorded, a job's end durable.
        Done = "done",
        /// A reply: the pending lists.
        Pending = "pending",
        /// A reply: a fate (its JSON text).
        Fate = "fate",
        /// A reply: the agent closed, with the ending's kind.
        Closed = "closed",
        /// A reply: refused (the refusal's JSON text).
        Refused = "refused",
        /// A reply: failed, with the failure's kind.
        Failed = "failed",
        /// A maintenance job to start.
        StartJob = "startJob",
        /// The running call is abandoned.
        Abandon = "abandon",
        /// The agent ended: the ending's kind and why.
        Ended = "ended",
    }
}

opcodes! {
    /// A cancel cause's code: its `kind`.
    CauseOp {
        /// `user`.
        User = "user",
        /// `parent`.
        Parent = "parent",
        /// `hook`, with its reason.
        Hook = "hook",
        /// `disposed`.
        Disposed = "disposed",
    }
}

opcodes! {
    /// Which of the core's outputs follows, in wire order.
    OutputOp {
        /// An event.
        Event = "event",
        /// An effect.
        Effect = "effect",
    }
}

/// The tape's opcode tables as JSON text: `{"events": [TYPE…], "effects": [NAME…], "reasons":
/// [KIND…], "causes": [KIND…], "outputs": [NAME…], "targets": [TARGET…], "statuses":
/// [STATUS…]}`, each the words of its codes in code order (`targets` and `statuses`: the
/// core's own lists, a flag's `0` and `1`). `tape.js` reads it once, at load, and refuses to
/// load when its decoders do not cover exactly these words: the codes have one source.
#[napi]
pub fn tape_table() -> String {
    let table = serde_json::json!({
        "events": EventOp::NAMES,
        "effects": EffectOp::NAMES,
        "reasons": ReasonOp::NAMES,
        "causes": CauseOp::NAMES,
        "outputs": OutputOp::NAMES,
        "agentOutputs": AgentOutputOp::NAMES,
        "targets": Target::ALL.map(Target::as_str),
        "statuses": Status::ALL.map(Status::as_str),
    });
    crate::wire::text(&table)
}

/// The messages of one input (most carry one).
pub(crate) type Given = SmallVec<[SharedMessage; 1]>;

/// One reply being written.
pub(crate) struct Tape<'h> {
    units: Vec<u16>,
    handles: &'h mut Handles,
    /// The messages of the input being answered, in `messagesOf` order.
    inputs: Given,
    /// The address and handle of the message named last: a transition names one message
    /// several times in a row (its splice, its notification, the request), looked up once.
    last: Option<(usize, u64)>,
}

impl<'h> Tape<'h> {
    /// A reply that starts with the handles swept since the last one (JavaScript forgets them).
    pub(crate) fn new(handles: &'h mut Handles, inputs: Given) -> Self {
        let freed = handles.sweep();
        let mut tape = Tape {
            units: Vec::with_capacity(64),
            handles,
            inputs,
            last: None,
        };
        tape.num(freed.len() as u64);
        for handle in freed {
            tape.num(handle);
        }
        tape
    }

    /// The units written.
    pub(crate) fn finish(self) -> Vec<u16> {
        self.units
    }

    /// A non-negative number.
    #[inline]
    pub(crate) fn num(&mut self, n: u64) {
        if n < 0x8000 {
            self.units.push(n as u16);
            return;
        }
        let chunks = (64 - n.leading_zeros()).div_ceil(15);
        self.units.push(0x8000 | chunks as u16);
        for i in (0..chunks).rev() {
            self.units.push(((n >> (15 * i)) & 0x7fff) as u16);
        }
    }

    /// A flag.
    #[inline]
    pub(crate) fn flag(&mut self, flag: bool) {
        self.units.push(u16::from(flag));
    }

    /// A string: its length in UTF-16 units, then its units.
    pub(crate) fn str(&mut self, s: &str) {
        let start = self.units.len();
        self.units.push(0);
        if s.is_ascii() {
            // One unit a byte (log lines, JSON text): a plain widening copy.
            self.units.extend(s.bytes().map(u16::from));
        } else {
            self.units.extend(s.encode_utf16());
        }
        let len = self.units.len() - start - 1;
        if len < 0x8000 {
            self.units[start] = len as u16;
        } else {
            // Rare (a long text): write the length in full before the units.
            let body = self.units.split_off(start + 1);
            self.units.truncate(start);
            self.num(len as u64);
            self.units.extend(body);
        }
    }

    /// A reference to a message (see the module's header).
    pub(crate) fn message(&mut self, message: &SharedMessage) {
        let key = Arc::as_ptr(message) as usize;
        if let Some((last, handle)) = self.last {
            if last == key {
                self.num(handle * 2);
                return;
            }
        }
        if let Some(handle) = self.handles.table.key_of(message) {
            self.last = Some((key, handle));
            self.num(handle * 2);
            return;
        }
        let handle = self.handles.next;
        self.last = Some((key, handle));
        self.handles.next += 1;
        self.handles.table.bind(message, handle, ());
        self.num(handle * 2 + 1);
        match self
            .inputs
            .iter()
            .position(|given| Arc::ptr_eq(given, message))
        {
            Some(slot) => self.num(slot as u64 + 1),
            None => {
                self.num(0);
                // The one encoder's bytes (coxswain-log), as serde_json wrote them.
                let mut text = Vec::new();
                coxswain_log::encode_message(message, &mut text);
                self.str(&String::from_utf8_lossy(&text));
            }
        }
    }

    /// The count of the input's messages, then a reference to each: binds the caller's objects
    /// to their handles when no output of this tape carries them (S8: a later tape names them
    /// by handle, never as a copy).
    pub(crate) fn bind_inputs(&mut self) {
        let inputs = self.inputs.clone();
        self.num(inputs.len() as u64);
        for message in &inputs {
            self.message(message);
        }
    }

    /// An event ([`EventOp`]).
    pub(crate) fn event(&mut self, event: &Event) {
        match event {
            Event::Spliced(splice) => {
                self.num(EventOp::Spliced.code());
                self.target(splice.target);
                self.num(splice.start as u64);
                self.num(splice.removed_count as u64);
                self.num(splice.inserted.len() as u64);
                for message in &splice.inserted {
                    self.message(message);
                }
                self.flag(splice.outcome.is_some());
                self.flag(splice.wakeup);
            }
            Event::TurnStart { turn } => {
                self.num(EventOp::TurnStart.code());
                self.num(*turn);
            }
            Event::StepStart { turn, step } => {
                self.num(EventOp::StepStart.code());
                self.num(*turn);
                self.num(*step);
            }
            Event::UserMessage(message) => {
                self.num(EventOp::UserMessage.code());
                self.message(message);
            }
            Event::StepEnd { turn, step } => {
                self.num(EventOp::StepEnd.code());
                self.num(*turn);
                self.num(*step);
            }
            Event::TurnEnd { turn, reason } => {
                self.num(EventOp::TurnEnd.code());
                self.num(*turn);
                self.reason(reason);
            }
        }
    }

    /// An effect ([`EffectOp`]).
    pub(crate) fn effect(&mut self, effect: &Effect) {
        match effect {
            Effect::Notify(Notification::Inserted { message }) => {
                self.num(EffectOp::Inserted.code());
                self.message(message);
            }
            Effect::Notify(Notification::Discarded { message }) => {
                self.num(EffectOp::Discarded.code());
                self.message(message);
            }
            Effect::Notify(Notification::Claimed { message, turn }) => {
                self.num(EffectOp::Claimed.code());
                self.message(message);
                self.num(*turn);
            }
            Effect::Notify(Notification::Status { status }) => {
                self.num(EffectOp::Status.code());
                self.flag(*status == Status::ALL[1]); // the table's `statuses`
            }
            Effect::Notify(Notification::Error { turn, step, error }) => {
                self.num(EffectOp::Error.code());
                self.num(*turn);
                self.num(*step);
                self.error(error);
            }
            Effect::Begin(Activity::Turn(turn)) => {
                self.num(EffectOp::BeginTurn.code());
                self.num(*turn);
            }
            Effect::Begin(Activity::Maintenance) => self.num(EffectOp::BeginMaintenance.code()),
            Effect::Request(Request::PreStep {
                turn,
                step,
                messages,
            }) => {
                self.num(EffectOp::PreStep.code());
                self.num(*turn);
                self.num(*step);
                self.num(messages.len() as u64);
                for message in messages.iter() {
                    self.message(message);
                }
            }
            Effect::Request(Request::Step { turn, step }) => {
                self.num(EffectOp::Step.code());
                self.num(*turn);
                self.num(*step);
            }
            Effect::Request(Request::TurnStopping { turn }) => {
                self.num(EffectOp::TurnStopping.code());
                self.num(*turn);
            }
            Effect::Abort(Abort { cause }) => {
                self.num(EffectOp::Abort.code());
                self.cause(cause);
            }
            Effect::Disposed => self.num(EffectOp::Disposed.code()),
        }
    }

    /// One of the core's outputs in wire order: an event or an effect, each after its [`OutputOp`].
    pub(crate) fn output(&mut self, output: &coxswain_core::Output) {
        match output {
            coxswain_core::Output::Event(event) => {
                self.num(OutputOp::Event.code());
                self.event(event);
            }
            coxswain_core::Output::Effect(effect) => {
                self.num(OutputOp::Effect.code());
                self.effect(effect);
            }
        }
    }

    /// A transition's events, then its effects (each list its length, then its items).
    pub(crate) fn transition(&mut self, transition: &coxswain_core::Transition<'_>) {
        self.num(transition.events().len() as u64);
        for event in transition.events() {
            self.event(event);
        }
        self.num(transition.effects().len() as u64);
        for effect in transition.effects() {
            self.effect(effect);
        }
    }

    /// Both pending lists: each its length, then per item its message and whether it wakes.
    pub(crate) fn pending(&mut self, machine: &Machine) {
        for target in [Target::NextTurn, Target::NextStep] {
            self.num(machine.pending(target).len() as u64);
            for item in machine.pending(target) {
                self.message(item.message());
                self.flag(item.is_waking());
            }
        }
    }

    /// A target: its place in the core's `Target::ALL` (the table's `targets`).
    fn target(&mut self, target: Target) {
        self.flag(target == Target::ALL[1]);
    }

    fn reason(&mut self, reason: &TurnEndReason) {
        match reason {
            TurnEndReason::Completed => self.num(ReasonOp::Completed.code()),
            TurnEndReason::MaxTokens => self.num(ReasonOp::MaxTokens.code()),
            TurnEndReason::Blocked => self.num(ReasonOp::Blocked.code()),
            TurnEndReason::Aborted { reason } => {
                self.num(ReasonOp::Aborted.code());
                self.cause(reason);
            }
            TurnEndReason::Error { error } => {
                self.num(ReasonOp::Error.code());
                self.error(error);
            }
            TurnEndReason::Interrupted => self.num(ReasonOp::Interrupted.code()),
        }
    }

    fn cause(&mut self, cause: &CancelCause) {
        match cause {
            CancelCause::User => self.num(CauseOp::User.code()),
            CancelCause::Parent => self.num(CauseOp::Parent.code()),
            CancelCause::Hook { reason } => {
                self.num(CauseOp::Hook.code());
                self.str(reason);
            }
            CancelCause::Disposed => self.num(CauseOp::Disposed.code()),
        }
    }

    /// An error: its message, its code, then `0`, or `1` and the JSON text of its other
    /// fields (a host's error is kept whole).
    fn error(&mut self, error: &ErrorInfo) {
        self.str(&error.message);
        self.str(&error.code);
        if error.details.is_empty() {
            self.num(0);
        } else {
            self.num(1);
            let text = serde_json::to_string(&error.details).unwrap_or_else(|_| "{}".into());
            self.str(&text);
        }
    }
}

/// The messages an input carries, in the order `tape.js`'s `messagesOf` walks its JavaScript
/// form (the core's [`Input::messages`]).
pub(crate) fn messages_of(input: &Input) -> Given {
    input.messages().cloned().collect()
}
