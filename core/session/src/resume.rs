//! [`ResumePlan`]: everything a driver does to resume a session from its stored log, decided in
//! one place: which torn tail to cut (S50), which closers to append before anything else (S50),
//! the machine restored with the host's configuration (S46–S48, S53), and the `seq` the next
//! record takes. Every log (a file, a segment, a database, the Python and Node logs) reads its
//! bytes or rows, asks for the plan, then carries it out.

use coxswain_core::{Config, Event, Machine};
use coxswain_log::{parse, CorruptLine, Record, RepairError, Repairer, TornTail};

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
    /// open, then `turn/end {kind: "interrupted"}`). Empty when the log was balanced.
    pub closers: Vec<Event>,
    /// The turn the crash interrupted, if the log ended inside one.
    pub interrupted: Option<u64>,
    /// The number of complete records read.
    pub records: usize,
    /// The `seq` of the next record written (the closers take the first ones).
    pub next_seq: u64,
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
    /// The plan for a JSON-lines log's bytes, restored into a machine with `config`.
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_bytes(bytes: &[u8], config: Config) -> Result<ResumePlan, ResumeError> {
        let parsed = parse(bytes)?;
        let mut plan = ResumePlan::from_records(&parsed.records, parsed.next_seq, config)?;
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
        config: Config,
    ) -> Result<ResumePlan, ResumeError> {
        let mut resuming = Resuming::new(config);
        records
            .iter()
            .try_for_each(|record| resuming.push(record))?;
        Ok(resuming.finish(next_seq)?)
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
pub struct Resuming(Repairer);

impl Resuming {
    /// A plan restoring into a machine with `config`.
    pub fn new(config: Config) -> Self {
        Resuming(Repairer::new(config))
    }

    /// Restores the next record read back.
    ///
    /// # Errors
    ///
    /// [`RepairError`] naming its line when the core does not accept it.
    pub fn push(&mut self, record: &Record) -> Result<(), RepairError> {
        self.0.push(record)
    }

    /// The plan, once every record was pushed; `next_seq` is the `seq` after the last one.
    /// Nothing to cut: a log that streams its records cuts its own torn tail.
    ///
    /// # Errors
    ///
    /// [`RepairError`] when the log cannot end where it does.
    pub fn finish(self, next_seq: u64) -> Result<ResumePlan, RepairError> {
        let repaired = self.0.finish()?;
        Ok(ResumePlan {
            machine: repaired.machine,
            cut_to: None,
            torn: None,
            terminate: false,
            closers: repaired.closers,
            interrupted: repaired.interrupted,
            records: repaired.records,
            next_seq,
        })
    }
}
