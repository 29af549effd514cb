//! Queries: what a host reads of the machine (pending lists, status, the outstanding request, counters).

use super::*;
use crate::fate::Fate;

impl Machine {
    /// The public status (S23): `running` while a driver runs, otherwise `idle`.
    pub fn status(&self) -> Status {
        match self.phase {
            Phase::Running(_) => Status::Running,
            _ => Status::Idle,
        }
    }

    /// No driver and no maintenance is active (S44).
    pub fn is_quiescent(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Disposed)
    }

    /// `disposed` was emitted: every input is now rejected (S45).
    pub fn is_disposed(&self) -> bool {
        matches!(self.phase, Phase::Disposed)
    }

    /// A maintenance job is active (S43).
    pub fn is_maintenance(&self) -> bool {
        matches!(self.phase, Phase::Maintenance(_))
    }

    /// The current activity's cancellation was requested (S18), `dispose` included.
    pub fn is_cancel_requested(&self) -> bool {
        self.activity().is_some_and(|a| a.cancel().is_some())
    }

    /// The first cancel cause of the current activity, if its cancellation was requested (S39).
    pub fn cancel_cause(&self) -> Option<&CancelCause> {
        self.activity().and_then(|a| a.cancel()).map(|c| &c.cause)
    }

    /// `dispose` was accepted while an activity ran: the machine becomes disposed when it ends
    /// (S45).
    pub fn is_disposing(&self) -> bool {
        self.activity()
            .and_then(|a| a.cancel())
            .is_some_and(|c| c.disposing)
    }

    /// The current activity's wake latch is set: waking work will open a turn when it ends
    /// (S24–S26).
    pub fn is_wake_latched(&self) -> bool {
        self.activity().is_some_and(|a| a.wake_requested())
    }

    /// The items pending in one list, in order.
    pub fn pending(&self, target: Target) -> impl ExactSizeIterator<Item = &Pending> + '_ {
        self.inbox.items(target).iter()
    }

    /// Whether `id` is pending in either list.
    pub fn is_pending(&self, id: &MessageId) -> bool {
        self.inbox.contains(id)
    }

    /// The ids the delivery memory holds (S51), oldest first: a delivery of any of them is
    /// rejected `already-delivered` (S52).
    pub fn delivered(&self) -> impl ExactSizeIterator<Item = &MessageId> + '_ {
        self.inbox.memory().ids()
    }

    /// Whether the delivery memory holds `id` (S51).
    pub fn remembers(&self, id: &MessageId) -> bool {
        self.inbox.memory().holds(id)
    }

    /// The query `fate(id)` (S58): [`Fate::Pending`] while `id` is pending (S9), else the record
    /// the delivery memory holds for it ([`Fate::Discarded`] or [`Fate::Claimed`]), else
    /// [`Fate::Unknown`] (a machine without a memory answers only pending or unknown). A query:
    /// it changes nothing, emits nothing, and is answered in every phase, also once disposed
    /// ([example](Fate)).
    pub fn fate(&self, id: &MessageId) -> Fate {
        if let Some((target, _)) = self.inbox.locate(id) {
            return Fate::Pending { target };
        }
        match self.inbox.memory().record(id) {
            Some(record) => record.fate(),
            None => Fate::Unknown,
        }
    }

    /// The request the machine waits on, if any (S4).
    pub fn outstanding(&self) -> Option<Outstanding> {
        let Phase::Running(run) = &self.phase else {
            return None;
        };
        let turn = self.last_turn;
        Some(match run.awaiting {
            RequestKind::PreStep => Outstanding::PreStep {
                turn,
                step: run.step + 1,
            },
            RequestKind::Step => Outstanding::Step {
                turn,
                step: run.step,
            },
            RequestKind::TurnStopping => Outstanding::TurnStopping { turn },
        })
    }

    /// The number of the last opened turn, 0 before the first (S27, S46).
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }
}
