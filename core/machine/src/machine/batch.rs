//! Batches (group commit): open, seal, roll back, the journal of what a rolled-back batch puts back.

use super::*;

impl Machine {
    /// Opens a batch: the inputs fed from now on can be taken back together with
    /// [`roll_back_batch`](Machine::roll_back_batch), as if none had been fed, when the host
    /// fails to persist their events (a group commit that failed: S5 extended to persistence);
    /// [`commit_batch`](Machine::commit_batch) keeps them once they are durable. Each input is
    /// still persisted and drained as usual; a batch only changes what can be undone. The cost
    /// is proportional to what the batch changes, not to the machine's size.
    ///
    /// # Errors
    ///
    /// [`BatchError::AlreadyOpen`] while a batch is open; [`BatchError::Undrained`] while a
    /// dropped transition's outputs wait for [`drain`](Machine::drain).
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{BatchError, Machine, Message};
    ///
    /// let mut machine = Machine::new();
    /// let before = machine.clone();
    /// machine.begin_batch()?;
    /// assert!(machine.is_batch_open());
    /// assert_eq!(machine.begin_batch(), Err(BatchError::AlreadyOpen));
    /// let events = machine.followup(Message::user("m1", "hi"))?.events().to_vec();
    /// machine.drain().persisted().for_each(drop); // the host holds the effects back
    /// assert_eq!(events.len(), 3);
    /// // The append of `events` failed: take the batch back.
    /// machine.roll_back_batch()?;
    /// assert_eq!(machine, before);
    /// assert_eq!(machine.last_turn(), 0);
    ///
    /// // Fed again and appended: keep it.
    /// machine.begin_batch()?;
    /// machine.followup(Message::user("m1", "hi"))?.persisted().for_each(drop);
    /// machine.commit_batch()?;
    /// assert_eq!((machine.last_turn(), machine.is_batch_open()), (1, false));
    /// assert_eq!(machine.commit_batch(), Err(BatchError::NotOpen));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_batch(&mut self) -> Result<(), BatchError> {
        if self.is_batch_open() {
            return Err(BatchError::AlreadyOpen);
        }
        if !self.queue.is_empty() {
            return Err(BatchError::Undrained);
        }
        let (phase, last_turn) = (self.phase.clone(), self.last_turn);
        match self.batch.0.as_deref_mut() {
            Some(before) => {
                *before = Before {
                    open: true,
                    phase,
                    last_turn,
                }
            }
            None => {
                self.batch.0 = Some(Box::new(Before {
                    open: true,
                    phase,
                    last_turn,
                }))
            }
        }
        self.inbox.begin_batch();
        Ok(())
    }

    /// Closes the open batch and keeps its inputs: their events are durable
    /// ([example](Machine::begin_batch)).
    ///
    /// # Errors
    ///
    /// [`BatchError::NotOpen`] without an open batch.
    pub fn commit_batch(&mut self) -> Result<(), BatchError> {
        let Some(before) = self.open_batch() else {
            return Err(BatchError::NotOpen);
        };
        before.open = false;
        self.inbox.commit_batch();
        Ok(())
    }

    /// Closes the open batch and takes back every input accepted since it was opened: the
    /// machine equals what it was before the batch (lists, delivery memory, phase, turn number),
    /// and outputs still queued are dropped. The host must not carry out the effects it held for
    /// the batch; it answers each of its inputs with the persistence failure instead
    /// ([example](Machine::begin_batch)).
    ///
    /// # Errors
    ///
    /// [`BatchError::NotOpen`] without an open batch.
    pub fn roll_back_batch(&mut self) -> Result<(), BatchError> {
        let Some(before) = self.open_batch() else {
            return Err(BatchError::NotOpen);
        };
        before.open = false;
        let (phase, last_turn) = (before.phase.clone(), before.last_turn);
        self.inbox.roll_back_batch();
        self.phase = phase;
        self.last_turn = last_turn;
        self.queue.clear_all();
        Ok(())
    }

    /// Whether a batch is open ([example](Machine::begin_batch)).
    pub fn is_batch_open(&self) -> bool {
        self.batch.open().is_some()
    }

    fn open_batch(&mut self) -> Option<&mut Before> {
        self.batch.0.as_deref_mut().filter(|before| before.open)
    }
}
