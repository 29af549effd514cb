//! Where a log stands: which turn came last, which turn and step are open.
//!
//! The one owner of that fact. The [`Restorer`](crate::Restorer) keeps one as it reads a log
//! (S46), the log auditor validates each boundary event against it (I5), and crash repair asks
//! it for the events that close an interrupted turn (S50).

use crate::output::{Event, TurnEndReason};

/// The position of a log after the events read so far. Only turn and step boundaries move it;
/// it takes them as written (S46: turn numbers are not checked here, the auditor checks them).
///
/// # Examples
///
/// ```
/// use coxswain_core::{Event, LogPosition, OpenTurn, TurnEndReason};
///
/// let mut position = LogPosition::new();
/// position.advance(&Event::TurnStart { turn: 3 });
/// position.advance(&Event::StepStart { turn: 3, step: 1 }); // the log ends here: a crash
/// assert_eq!(position.last_turn(), 3);
/// assert_eq!(position.open(), Some(OpenTurn { turn: 3, last_step: 1, step_open: true }));
/// assert_eq!((position.open_turn(), position.open_step()), (Some(3), Some(1)));
/// assert_eq!(position.closers(), [ // what crash repair appends (S50)
///     Event::StepEnd { turn: 3, step: 1 },
///     Event::TurnEnd { turn: 3, reason: TurnEndReason::Interrupted },
/// ]);
///
/// // The same, one boundary at a time.
/// let mut by_hand = LogPosition::new();
/// by_hand.turn_started(3);
/// by_hand.step_started(1);
/// assert_eq!(by_hand, position);
/// by_hand.step_ended();
/// by_hand.turn_ended();
/// assert!(by_hand.closers().is_empty());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LogPosition {
    last_turn: u64,
    open: Option<OpenTurn>,
}

/// The turn a log leaves open ([example](LogPosition#examples)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpenTurn {
    /// Its number.
    pub turn: u64,
    /// The number of its last `step/start`, 0 before the first.
    pub last_step: u64,
    /// Whether that step has not ended yet.
    pub step_open: bool,
}

impl LogPosition {
    /// The position of an empty log.
    pub fn new() -> Self {
        LogPosition::default()
    }

    /// Moves past one event; events other than turn and step boundaries leave it where it is.
    pub fn advance(&mut self, event: &Event) {
        match event {
            Event::TurnStart { turn } => self.turn_started(*turn),
            Event::TurnEnd { .. } => self.turn_ended(),
            Event::StepStart { step, .. } => self.step_started(*step),
            Event::StepEnd { .. } => self.step_ended(),
            Event::Spliced(_) | Event::UserMessage(_) => {}
        }
    }

    /// A `turn/start`: this turn is open and is the last one.
    pub fn turn_started(&mut self, turn: u64) {
        self.last_turn = turn;
        self.open = Some(OpenTurn {
            turn,
            last_step: 0,
            step_open: false,
        });
    }

    /// A `turn/end`: no turn is open.
    pub fn turn_ended(&mut self) {
        self.open = None;
    }

    /// A `step/start` inside the open turn (outside one it means nothing here).
    pub fn step_started(&mut self, step: u64) {
        if let Some(open) = self.open.as_mut() {
            open.last_step = step;
            open.step_open = true;
        }
    }

    /// A `step/end`: the open turn's step, if any, has ended.
    pub fn step_ended(&mut self) {
        if let Some(open) = self.open.as_mut() {
            open.step_open = false;
        }
    }

    /// The number of the last `turn/start` (0 if none): the machine's `lastTurn` (S27, S46).
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }

    /// The turn the log leaves open, if any.
    pub fn open(&self) -> Option<OpenTurn> {
        self.open
    }

    /// The number of the turn the log leaves open, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open.map(|open| open.turn)
    }

    /// The number of the step the log leaves open inside the open turn, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.open
            .filter(|open| open.step_open)
            .map(|open| open.last_step)
    }

    /// Crash repair's closers (S50): `step/end` if a step is open, then
    /// `turn/end {kind: "interrupted"}` if a turn is open. Empty for a balanced log.
    pub fn closers(&self) -> Vec<Event> {
        let Some(open) = self.open else {
            return Vec::new();
        };
        let turn = open.turn;
        let step_end = open.step_open.then_some(Event::StepEnd {
            turn,
            step: open.last_step,
        });
        let turn_end = Event::TurnEnd {
            turn,
            reason: TurnEndReason::Interrupted,
        };
        step_end.into_iter().chain([turn_end]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s50_closers_close_the_open_step_then_the_turn() {
        let mut position = LogPosition::new();
        assert_eq!(position.closers(), []);
        position.advance(&Event::TurnStart { turn: 7 });
        position.advance(&Event::StepStart { turn: 7, step: 1 });
        assert_eq!(
            (position.open_turn(), position.open_step()),
            (Some(7), Some(1))
        );
        let interrupted = Event::TurnEnd {
            turn: 7,
            reason: TurnEndReason::Interrupted,
        };
        assert_eq!(
            position.closers(),
            [Event::StepEnd { turn: 7, step: 1 }, interrupted.clone()]
        );
        position.advance(&Event::StepEnd { turn: 7, step: 1 });
        assert_eq!(position.closers(), std::slice::from_ref(&interrupted));
        for closer in position.closers() {
            position.advance(&closer);
        }
        assert_eq!((position.last_turn(), position.open()), (7, None));
    }
}
