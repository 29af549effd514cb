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

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use smallvec::SmallVec;

use coxswain_core::{
    Abort, Activity, CancelCause, Effect, ErrorInfo, Event, Input, Machine, Notification, Request,
    SharedMessage, Status, Target, TurnEndReason,
};

/// The messages JavaScript holds an object for, by handle; a message the core no longer holds
/// (its only owner is this table) is swept, and its handle given to JavaScript to forget.
#[derive(Default)]
pub(crate) struct Handles {
    by_ptr: HashMap<usize, u64, Cheap>,
    by_handle: HashMap<u64, SharedMessage, Cheap>,
    next: u64,
    sweep_at: usize,
}

impl Handles {
    /// The message behind a handle JavaScript gave back (a pre-step batch of the messages it
    /// was handed), if the table still holds it.
    pub(crate) fn get(&self, handle: u64) -> Option<&SharedMessage> {
        self.by_handle.get(&handle)
    }

    /// Drops the messages nothing but this table holds, once it has grown to twice its size at
    /// the last sweep (amortized O(1) per message); the handles dropped.
    fn sweep(&mut self) -> Vec<u64> {
        if self.by_handle.len() < self.sweep_at {
            return Vec::new();
        }
        let mut freed = Vec::new();
        self.by_handle.retain(|handle, message| {
            let keep = Arc::strong_count(message) > 1;
            if !keep {
                freed.push(*handle);
            }
            keep
        });
        if !freed.is_empty() {
            let held = &self.by_handle;
            self.by_ptr.retain(|_, handle| held.contains_key(handle));
        }
        self.sweep_at = (self.by_handle.len() * 2).max(64);
        freed
    }
}

/// The hasher of the handle maps: their keys are addresses and counters the table makes
/// itself, never a caller's, so a multiply-shift is as good as SipHash and a tenth of its cost.
type Cheap = BuildHasherDefault<Mix>;

/// A multiply-shift hasher of one integer key.
#[derive(Default)]
pub(crate) struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
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
        if let Some(&handle) = self.handles.by_ptr.get(&key) {
            self.last = Some((key, handle));
            self.num(handle * 2);
            return;
        }
        let handle = self.handles.next;
        self.last = Some((key, handle));
        self.handles.next += 1;
        self.handles.by_ptr.insert(key, handle);
        self.handles.by_handle.insert(handle, Arc::clone(message));
        self.num(handle * 2 + 1);
        match self
            .inputs
            .iter()
            .position(|given| Arc::ptr_eq(given, message))
        {
            Some(slot) => self.num(slot as u64 + 1),
            None => {
                self.num(0);
                let text = serde_json::to_string(&**message).unwrap_or_else(|_| "null".into());
                self.str(&text);
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

    /// An event (codes 0–5).
    pub(crate) fn event(&mut self, event: &Event) {
        match event {
            Event::Spliced(splice) => {
                self.num(0);
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
                self.num(1);
                self.num(*turn);
            }
            Event::StepStart { turn, step } => {
                self.num(2);
                self.num(*turn);
                self.num(*step);
            }
            Event::UserMessage(message) => {
                self.num(3);
                self.message(message);
            }
            Event::StepEnd { turn, step } => {
                self.num(4);
                self.num(*turn);
                self.num(*step);
            }
            Event::TurnEnd { turn, reason } => {
                self.num(5);
                self.num(*turn);
                self.reason(reason);
            }
        }
    }

    /// An effect (codes 0–11).
    pub(crate) fn effect(&mut self, effect: &Effect) {
        match effect {
            Effect::Notify(Notification::Inserted { message }) => {
                self.num(0);
                self.message(message);
            }
            Effect::Notify(Notification::Discarded { message }) => {
                self.num(1);
                self.message(message);
            }
            Effect::Notify(Notification::Claimed { message, turn }) => {
                self.num(2);
                self.message(message);
                self.num(*turn);
            }
            Effect::Notify(Notification::Status { status }) => {
                self.num(3);
                self.flag(*status == Status::Running);
            }
            Effect::Notify(Notification::Error { turn, step, error }) => {
                self.num(4);
                self.num(*turn);
                self.num(*step);
                self.error(error);
            }
            Effect::Begin(Activity::Turn(turn)) => {
                self.num(5);
                self.num(*turn);
            }
            Effect::Begin(Activity::Maintenance) => self.num(6),
            Effect::Request(Request::PreStep {
                turn,
                step,
                messages,
            }) => {
                self.num(7);
                self.num(*turn);
                self.num(*step);
                self.num(messages.len() as u64);
                for message in messages.iter() {
                    self.message(message);
                }
            }
            Effect::Request(Request::Step { turn, step }) => {
                self.num(8);
                self.num(*turn);
                self.num(*step);
            }
            Effect::Request(Request::TurnStopping { turn }) => {
                self.num(9);
                self.num(*turn);
            }
            Effect::Abort(Abort { cause }) => {
                self.num(10);
                self.cause(cause);
            }
            Effect::Disposed => self.num(11),
        }
    }

    /// One of the core's outputs in wire order: `0` and an event, or `1` and an effect.
    pub(crate) fn output(&mut self, output: &coxswain_core::Output) {
        match output {
            coxswain_core::Output::Event(event) => {
                self.num(0);
                self.event(event);
            }
            coxswain_core::Output::Effect(effect) => {
                self.num(1);
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

    fn target(&mut self, target: Target) {
        self.flag(target == Target::NextStep);
    }

    fn reason(&mut self, reason: &TurnEndReason) {
        match reason {
            TurnEndReason::Completed => self.num(0),
            TurnEndReason::MaxTokens => self.num(1),
            TurnEndReason::Blocked => self.num(2),
            TurnEndReason::Aborted { reason } => {
                self.num(3);
                self.cause(reason);
            }
            TurnEndReason::Error { error } => {
                self.num(4);
                self.error(error);
            }
            TurnEndReason::Interrupted => self.num(5),
        }
    }

    fn cause(&mut self, cause: &CancelCause) {
        match cause {
            CancelCause::User => self.num(0),
            CancelCause::Parent => self.num(1),
            CancelCause::Hook { reason } => {
                self.num(2);
                self.str(reason);
            }
            CancelCause::Disposed => self.num(3),
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
