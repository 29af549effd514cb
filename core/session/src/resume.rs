//! [`ResumePlan`]: everything a driver does to resume a session from its stored log, decided in
//! one place: which torn tail to cut (S50), which closers to append before anything else (S50),
//! the machine restored with the host's configuration (S46–S48, S53), and the `seq` the next
//! record takes. Every log (a file, a segment, a database, the Python and Node logs) reads its
//! bytes or rows, asks for the plan, then carries it out.

use coxswain_core::{Config, Event, Machine};
use coxswain_log::{
    encode, parse, CorruptLine, EncodeError, Entry, Record, RepairError, Repairer, TornTail,
};

use crate::session::{Options, Session};

/// How to resume a session from what its log holds.
#[derive(Clone, Debug)]
pub struct ResumePlan {
    /// The machine restored from the log and its closers (idle, its items parked: S48), with
    /// the host's configuration: its delivery memory rebuilt from the log (S53), its admission
    /// bound, and the hash seed the host drew for this process.
    pub machine: Machine,
    /// Cut the stored log to this many bytes first: it ends in a torn record (S50). `None`:
    /// keep every byte.
    pub cut_to: Option<u64>,
    /// The torn record that cut drops, if any (its line and length, for the host's report).
    pub torn: Option<TornTail>,
    /// The last record is whole but lacks its `\n`: write one before the next record.
    pub terminate: bool,
    /// Append these first, as one batch, before any new record (S50: `step/end` if a step was
    /// open, then `turn/end {kind: "interrupted"}`; then S59's redelivery splices, the last
    /// [`redelivered`](ResumePlan::redelivered) ones). Empty when the log was balanced.
    pub closers: Vec<Event>,
    /// How many of the `closers` (the last ones) are redelivery splices (S59): 0 with the
    /// default allowance.
    pub redelivered: usize,
    /// The turn the crash interrupted, if the log ended inside one.
    pub interrupted: Option<u64>,
    /// The number of complete records read.
    pub records: usize,
    /// The `seq` of the next record written (the closers take the first ones).
    pub next_seq: u64,
}

/// How a JSON-lines log carries a [`ResumePlan`] out, as bytes: cut the stored bytes to
/// `cut_to` (if any), append `append` as one write and make it durable; the next record takes
/// `next_seq`. The one way every file-shaped log (the threads driver's, the simulation's, the
/// Python and Node logs) repairs its tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByteRepair {
    /// Cut the stored log to this many bytes first (a torn record, S50); `None`: keep them.
    pub cut_to: Option<u64>,
    /// Then append these bytes: the missing `\n` of a whole last record, then the closers'
    /// records (S50). Empty when the log was balanced.
    pub append: Vec<u8>,
    /// The `seq` of the next record written after them.
    pub next_seq: u64,
}

/// What a resume takes from the host besides the log: the machine's [`Config`] and crash
/// repair's redelivery allowance `A` (S59). Neither is in the log. A bare [`Config`] converts
/// into options with `A = 0` (S50 unchanged), so `ResumePlan::from_bytes(bytes, config)` keeps
/// its meaning.
///
/// ```
/// use coxswain_core::Config;
/// use coxswain_session::ResumeOptions;
///
/// let options = ResumeOptions::from(Config::new()).with_redelivery(1);
/// assert_eq!((options.config, options.redelivery), (Config::new(), 1));
/// assert_eq!(ResumeOptions::default().redelivery, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumeOptions {
    /// The restored machine's configuration (delivery memory, bound, hash seed).
    pub config: Config,
    /// The redelivery allowance `A ≥ 0` (S59): how many times crash repair may re-insert one
    /// id, over the log's life; 0 (the default) never. Unsigned: a negative allowance cannot be
    /// expressed (a host reading one from its user refuses it before it gets here).
    pub redelivery: u64,
}

impl ResumeOptions {
    /// These options with the redelivery allowance `allowance` (S59).
    pub const fn with_redelivery(self, allowance: u64) -> Self {
        ResumeOptions {
            redelivery: allowance,
            ..self
        }
    }
}

/// The largest redelivery allowance `A` a host may choose (S59): a message whose model call
/// crashed its process a thousand times is not run a thousand-and-first time. A larger value is
/// refused when the log is opened ([`RedeliveryTooLarge`]), changing nothing.
pub const MAX_REDELIVERY: u64 = 1_000;

/// A redelivery allowance above [`MAX_REDELIVERY`] (S59): refused when the log is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the redelivery allowance {0} is above {max} (S59)", max = MAX_REDELIVERY)]
pub struct RedeliveryTooLarge(pub u64);

impl ResumeOptions {
    /// These options with the redelivery allowance `allowance` (S59), checked against
    /// [`MAX_REDELIVERY`]: every log open takes the allowance through here.
    ///
    /// # Errors
    ///
    /// [`RedeliveryTooLarge`] above [`MAX_REDELIVERY`].
    ///
    /// ```
    /// use coxswain_core::Config;
    /// use coxswain_session::{ResumeOptions, MAX_REDELIVERY};
    ///
    /// let options = ResumeOptions::from(Config::new());
    /// assert_eq!(options.try_with_redelivery(MAX_REDELIVERY).map(|o| o.redelivery), Ok(1_000));
    /// let refused = options.try_with_redelivery(1_001).unwrap_err();
    /// assert_eq!(refused.to_string(), "the redelivery allowance 1001 is above 1000 (S59)");
    /// ```
    pub fn try_with_redelivery(self, allowance: u64) -> Result<Self, RedeliveryTooLarge> {
        match allowance {
            0..=MAX_REDELIVERY => Ok(self.with_redelivery(allowance)),
            _ => Err(RedeliveryTooLarge(allowance)),
        }
    }
}

impl From<Config> for ResumeOptions {
    fn from(config: Config) -> Self {
        ResumeOptions {
            config,
            redelivery: 0,
        }
    }
}

/// A log that cannot be resumed: a complete line is not a record, or the records are not a
/// log the core accepts (S46, S47). Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// A complete line is not a valid record.
    #[error(transparent)]
    Corrupt(#[from] CorruptLine),
    /// The records do not restore.
    #[error(transparent)]
    Invalid(#[from] RepairError),
}

impl ResumePlan {
    /// The plan for a JSON-lines log's bytes, restored into a machine with `options`' config
    /// (a [`Config`] alone: no redelivery), repaired with its redelivery allowance (S59).
    ///
    /// # Errors
    ///
    /// [`ResumeError`] for a corrupt line or a log the core does not accept.
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{Config, Machine, Message};
    /// use coxswain_log::{encode, Entry};
    /// use coxswain_session::ResumePlan;
    ///
    /// let mut machine = Machine::new();
    /// let mut bytes = Vec::new();
    /// let events = machine.followup(Message::user("m1", "hi"))?.events().to_vec();
    /// for (seq, event) in (1..).zip(events) {
    ///     encode(seq, &Entry::Machine(event), &mut bytes)?;
    /// }
    /// bytes.extend_from_slice(b"{\"seq\":4,\"ty"); // the crash tore the next record
    /// let plan = ResumePlan::from_bytes(&bytes, Config::new().with_hash_seed(7))?;
    /// assert_eq!(plan.cut_to, Some(bytes.len() as u64 - 12));
    /// assert_eq!(plan.torn.map(|torn| (torn.line, torn.bytes)), Some((4, 12)));
    /// assert_eq!(plan.interrupted, Some(1));
    /// assert_eq!(plan.closers.len(), 1); // turn/end {kind: "interrupted"}
    /// assert_eq!((plan.records, plan.next_seq), (3, 4));
    /// assert_eq!(plan.machine.config().hash_seed, 7);
    /// // As bytes: cut the torn record, append the closer as record 4.
    /// let repair = plan.byte_repair()?;
    /// assert_eq!(repair.cut_to, plan.cut_to);
    /// assert!(repair.append.starts_with(b"{\"seq\":4,"));
    /// assert_eq!(repair.next_seq, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_bytes(
        bytes: &[u8],
        options: impl Into<ResumeOptions>,
    ) -> Result<ResumePlan, ResumeError> {
        let parsed = parse(bytes)?;
        let mut plan = ResumePlan::from_records(&parsed.records, parsed.next_seq, options)?;
        plan.cut_to = parsed.torn.map(|_| parsed.complete_len as u64);
        plan.torn = parsed.torn;
        plan.terminate = parsed.unterminated;
        Ok(plan)
    }

    /// The plan for records read back by a log that keeps them itself (a segment's session
    /// stream, database rows): nothing to cut; `next_seq` is the `seq` after the last one.
    ///
    /// # Errors
    ///
    /// [`ResumeError::Invalid`] for a log the core does not accept.
    pub fn from_records(
        records: &[Record],
        next_seq: u64,
        options: impl Into<ResumeOptions>,
    ) -> Result<ResumePlan, ResumeError> {
        let mut resuming = Resuming::with_options(options.into());
        records
            .iter()
            .try_for_each(|record| resuming.push(record))?;
        Ok(resuming.finish(next_seq)?)
    }

    /// The plan as bytes for a JSON-lines log: what to cut and what to append (S50).
    ///
    /// # Errors
    ///
    /// [`EncodeError`] for a closer that cannot be encoded (not one the core emits).
    pub fn byte_repair(&self) -> Result<ByteRepair, EncodeError> {
        let mut append = Vec::new();
        if self.terminate {
            append.push(b'\n');
        }
        for (seq, closer) in (self.next_seq..).zip(&self.closers) {
            encode(seq, &Entry::Machine(closer.clone()), &mut append)?;
        }
        Ok(ByteRepair {
            cut_to: self.cut_to,
            append,
            next_seq: self.next_seq + self.closers.len() as u64,
        })
    }

    /// A session over the resumed machine whose first batch is the closers: seal it, append it,
    /// and report it [`persisted`](Session::persisted) before anything else. `None` closers:
    /// the session starts empty.
    pub fn into_session(self, options: Options) -> (Session, Vec<Event>) {
        (Session::new(self.machine, options), self.closers)
    }
}

/// A [`ResumePlan`] built from records handed over one at a time, for a log that streams its
/// records back (its memory does not grow with the log).
#[derive(Debug)]
pub struct Resuming {
    repairer: Repairer,
    /// The `seq` after the last record offered (1 before any).
    next_seq: u64,
}

impl Resuming {
    /// A plan restoring into a machine with `config`.
    pub fn new(config: Config) -> Self {
        Resuming::with_options(ResumeOptions::from(config))
    }

    /// A plan restoring into a machine with `options.config`, whose repair redelivers with
    /// `options.redelivery` (S59).
    pub fn with_options(options: ResumeOptions) -> Self {
        Resuming {
            repairer: Repairer::new(options.config).with_redelivery(options.redelivery),
            next_seq: 1,
        }
    }

    /// Restores the next record read back.
    ///
    /// # Errors
    ///
    /// [`RepairError`] naming its line when the core does not accept it.
    pub fn push(&mut self, record: &Record) -> Result<(), RepairError> {
        self.repairer.push(record)
    }

    /// A log's read-back callback: restores `record` and notes the `seq` after it; stops the
    /// read at the first record the core refuses (the repairer keeps the refusal, and
    /// [`finish_read`](Resuming::finish_read) returns it). The one way a log that streams its records (a file, a segment, a database)
    /// feeds a plan.
    pub fn offer(&mut self, record: &Record) -> std::ops::ControlFlow<()> {
        self.next_seq = record
            .seq
            .map_or(self.next_seq, |seq| seq.saturating_add(1));
        match self.repairer.push(record) {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(_) => std::ops::ControlFlow::Break(()),
        }
    }

    /// The plan once a read fed by [`offer`](Resuming::offer) ended; the next record takes the
    /// `seq` after the last one offered.
    ///
    /// # Errors
    ///
    /// The first [`RepairError`] `offer` met, else as [`finish`](Resuming::finish).
    pub fn finish_read(self) -> Result<ResumePlan, RepairError> {
        let next_seq = self.next_seq;
        self.finish(next_seq)
    }

    /// The plan, once every record was pushed; `next_seq` is the `seq` after the last one.
    /// Nothing to cut: a log that streams its records cuts its own torn tail.
    ///
    /// # Errors
    ///
    /// [`RepairError`] when the log cannot end where it does.
    pub fn finish(self, next_seq: u64) -> Result<ResumePlan, RepairError> {
        let repaired = self.repairer.finish()?;
        Ok(ResumePlan {
            machine: repaired.machine,
            cut_to: None,
            torn: None,
            terminate: false,
            closers: repaired.closers,
            redelivered: repaired.redelivered,
            interrupted: repaired.interrupted,
            records: repaired.records,
            next_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::Message;
    use serde_json::Value;
    use std::ops::ControlFlow;

    /// A streamed read: `offer` notes the `seq` after each record and stops at the first one
    /// the core refuses (S46, S47), which `finish_read` returns; a clean read plans on from the
    /// last `seq` offered.
    #[test]
    fn offer_stops_at_the_first_refused_record_and_finish_read_returns_it() {
        let mut machine = Machine::new();
        let Ok(transition) = machine.followup(Message::user("m1", "hi")) else {
            panic!("a fresh machine takes a follow-up");
        };
        let events: Vec<Value> = transition
            .events()
            .iter()
            .map(|event| serde_json::to_value(event).unwrap_or_default())
            .collect();
        let record = |line: usize, event: &Value| Record {
            line,
            seq: Some(line as u64 + 6),
            event: event.clone(),
        };
        let mut resuming = Resuming::new(Config::new());
        for (line, event) in (1..).zip(&events) {
            assert_eq!(
                resuming.offer(&record(line, event)),
                ControlFlow::Continue(())
            );
        }
        let Ok(plan) = resuming.finish_read() else {
            panic!("an open turn is repaired, not refused");
        };
        // Three records, seq 7..=9: the closer takes 10.
        assert_eq!(
            (plan.records, plan.next_seq, plan.closers.len()),
            (3, 10, 1)
        );
        // A splice into no list is refused (S47): the read stops there, the records after it
        // are never offered, and `finish_read` returns the refusal.
        let bad = serde_json::json!({"type": "agent/inbox/spliced", "data": {"target": "nowhere"}});
        let mut resuming = Resuming::new(Config::new());
        let log = [&events[0], &bad, &events[1]];
        let flows: Vec<ControlFlow<()>> = (1..)
            .zip(log)
            .map(|(line, event)| resuming.offer(&record(line, event)))
            .take_while(|flow| flow.is_continue())
            .collect();
        assert_eq!(flows.len(), 1, "the read stops at the refused record");
        assert!(
            matches!(resuming.finish_read(), Err(error) if error.to_string().contains("line 2"))
        );
    }

    /// S50: a whole last record without its `\n` is ended, then the closers follow it, numbered
    /// on; a balanced, terminated log needs nothing.
    #[test]
    fn byte_repair_ends_an_unterminated_record_then_appends_the_closers() {
        let mut machine = Machine::new();
        let mut bytes = Vec::new();
        let Ok(transition) = machine.followup(Message::user("m1", "hi")) else {
            panic!("a fresh machine takes a follow-up");
        };
        for (seq, event) in (1..).zip(transition.events().to_vec()) {
            assert!(encode(seq, &Entry::Machine(event), &mut bytes).is_ok());
        }
        let whole = bytes.clone();
        assert_eq!(bytes.pop(), Some(b'\n'));
        let Ok(plan) = ResumePlan::from_bytes(&bytes, Config::new()) else {
            panic!("the log resumes");
        };
        let Ok(repair) = plan.byte_repair() else {
            panic!("the closers encode");
        };
        assert_eq!(repair.cut_to, None);
        let mut closer = Vec::new();
        let turn_end = Entry::Machine(plan.closers[0].clone());
        assert!(encode(4, &turn_end, &mut closer).is_ok());
        assert_eq!(repair.append, [b"\n".as_slice(), &closer].concat());
        assert_eq!(repair.next_seq, 5);
        // Carried out, the log is balanced and terminated: resumed again, nothing to do.
        let repaired = [whole, closer].concat();
        let Ok(again) = ResumePlan::from_bytes(&repaired, Config::new()) else {
            panic!("the repaired log resumes");
        };
        let Ok(nothing) = again.byte_repair() else {
            panic!("nothing to encode");
        };
        assert_eq!(
            nothing,
            ByteRepair {
                cut_to: None,
                append: Vec::new(),
                next_seq: 5
            }
        );
    }

    /// S59: the allowance rides in `ResumeOptions`; the redelivery splices follow the closers
    /// into the bytes, each record numbered on, and a log resumed again after them is
    /// balanced: nothing more to append (the redelivered item is pending, not claimed).
    #[test]
    fn s59_a_resume_with_an_allowance_appends_the_redelivery_after_the_closers() {
        let mut machine = Machine::new();
        let mut bytes = Vec::new();
        let Ok(transition) = machine.followup(Message::user("m1", "hi")) else {
            panic!("a fresh machine takes a follow-up");
        };
        for (seq, event) in (1..).zip(transition.events().to_vec()) {
            assert!(encode(seq, &Entry::Machine(event), &mut bytes).is_ok());
        }
        let options = ResumeOptions::from(Config::new()).with_redelivery(1);
        let Ok(plan) = ResumePlan::from_bytes(&bytes, options) else {
            panic!("the log resumes");
        };
        assert_eq!((plan.closers.len(), plan.redelivered), (2, 1));
        assert!(plan.machine.is_pending(&"m1".into()));
        let Ok(repair) = plan.byte_repair() else {
            panic!("the closers encode");
        };
        assert_eq!(repair.next_seq, 6);
        let text = String::from_utf8_lossy(&repair.append).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with(r#"{"seq":4,"type":"turn/end""#),
            "{text}"
        );
        assert_eq!(
            lines[1],
            r#"{"seq":5,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","content":"hi","source":{"kind":"user"}}],"wakeup":true,"redelivery":1}}"#
        );
        let repaired = [bytes.clone(), repair.append].concat();
        let Ok(again) = ResumePlan::from_bytes(&repaired, options) else {
            panic!("the repaired log resumes");
        };
        assert_eq!((again.closers.len(), again.redelivered), (0, 0));
        // A bare Config is A = 0: S50 unchanged.
        let Ok(plain) = ResumePlan::from_bytes(&bytes, Config::new()) else {
            panic!("the log resumes");
        };
        assert_eq!((plain.closers.len(), plain.redelivered), (1, 0));
        assert!(!plain.machine.is_pending(&"m1".into()));
    }
}
