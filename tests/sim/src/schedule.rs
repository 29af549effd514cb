//! The seeded schedule of one life: its options, its clients and what each does when, and how
//! the life ends (a crash at a virtual instant, dispose, close, or dropping every handle).

use coxswain_core::{CancelCause, Target};

use crate::rng::Rng;

/// One client call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `followup` a fresh message.
    Followup,
    /// `steer` a fresh message.
    Steer,
    /// `inject` a fresh message.
    Inject,
    /// `send` a fresh message with an explicit target and wakeup.
    Send {
        /// The list.
        target: Target,
        /// Whether it wakes.
        wakeup: bool,
    },
    /// `prepend` a fresh message.
    Prepend(Target),
    /// `replace` a minted id with a fresh message.
    Replace,
    /// `remove` a minted id.
    Remove,
    /// `clear`.
    Clear,
    /// `cancel`.
    Cancel {
        /// The cause.
        cause: CancelCause,
        /// `keepInbox`.
        keep_inbox: bool,
    },
    /// A maintenance job of `ms`, honouring its token or not.
    Maintenance {
        /// How long it runs.
        ms: u64,
        /// Whether it returns early when its token trips.
        obeys: bool,
    },
    /// A retry: the delivery of an acknowledged id again (S52).
    Resend,
    /// A message above the size limit.
    Oversize,
    /// An id above the length limit.
    LongId,
    /// A snapshot of the pending lists (checked against the limit).
    Pending,
    /// `fate` of this many minted ids (S58), each answer held to the log.
    Fate(u64),
    /// `dispose` mid-life.
    Dispose,
}

/// How a life ends once its clients are done (unless it crashed before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `dispose()`.
    Dispose,
    /// `close()`.
    Close,
    /// Every handle dropped.
    Drop,
}

/// The schedule of one life.
#[derive(Clone, Debug)]
pub struct Life {
    /// Per client: (pause in ms before the call, the call).
    pub clients: Vec<Vec<(u64, Op)>>,
    /// A crash at this virtual instant (ms after the open), if any.
    pub crash_at: Option<u64>,
    /// How the life ends without a crash.
    pub end: End,
    /// `Options::channel_capacity`.
    pub channel_capacity: usize,
    /// `Options::max_batch`.
    pub max_batch: usize,
    /// `Options::delivery_memory`.
    pub delivery_memory: usize,
    /// `Options::resume_on_open` (S57): the open sends `resume`; else a call right after it.
    pub resume_on_open: bool,
}

impl Life {
    /// Rolls a life.
    pub fn roll(rng: &mut Rng) -> Life {
        let clients = (0..rng.range(1, 4))
            .map(|_| {
                (0..rng.range(1, 20))
                    .map(|_| (rng.below(400), roll_op(rng)))
                    .collect()
            })
            .collect();
        let crash_at = rng.chance(400).then(|| rng.range(0, 6_000));
        let end = match rng.below(3) {
            0 => End::Dispose,
            1 => End::Close,
            _ => End::Drop,
        };
        Life {
            clients,
            crash_at,
            end,
            channel_capacity: rng.range(1, 8) as usize,
            max_batch: rng.range(1, 8) as usize,
            delivery_memory: rng.below(5) as usize,
            resume_on_open: rng.chance(500),
        }
    }
}

fn target(rng: &mut Rng) -> Target {
    if rng.chance(500) {
        Target::NextTurn
    } else {
        Target::NextStep
    }
}

fn roll_op(rng: &mut Rng) -> Op {
    match rng.below(100) {
        0..=17 => Op::Followup,
        18..=27 => Op::Steer,
        28..=37 => Op::Inject,
        38..=45 => Op::Send {
            target: target(rng),
            wakeup: rng.chance(500),
        },
        46..=50 => Op::Prepend(target(rng)),
        51..=56 => Op::Replace,
        57..=62 => Op::Remove,
        63..=65 => Op::Clear,
        66..=74 => Op::Cancel {
            cause: match rng.below(3) {
                0 => CancelCause::User,
                1 => CancelCause::Parent,
                _ => CancelCause::Hook {
                    reason: "sim".into(),
                },
            },
            keep_inbox: rng.chance(500),
        },
        75..=79 => Op::Maintenance {
            ms: rng.range(0, 3_000),
            obeys: rng.chance(700),
        },
        80..=85 => Op::Resend,
        86..=88 => Op::Oversize,
        89..=91 => Op::LongId,
        92..=96 => Op::Pending,
        97..=98 => Op::Fate(rng.range(1, 3)),
        _ if rng.chance(300) => Op::Dispose,
        _ => Op::Pending,
    }
}
