//! Bench 5 as a test: a follow-up cycle allocates nothing once warm (the message aside), counted
//! with a counting global allocator. Its own test binary, so the counting allocator touches no
//! other test. An allocation count is deterministic, so this is a plain `#[test]`.

use std::sync::Mutex;

use coxswain_benches::alloc::{Counting, Snapshot};
use coxswain_benches::{
    followup_cycle, machine_in_step, messages, session_cycle, steer_burst, CYCLE_OUTPUTS,
};
use coxswain_core::{Machine, BATCH_INLINE};
use coxswain_session::{Options, Session};

#[global_allocator]
static ALLOC: Counting = Counting::new();

/// Counters are per thread; tests also run one at a time, to keep the measure simple to read.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `region` and returns what it allocated.
fn count(region: impl FnOnce()) -> Snapshot {
    let before = ALLOC.snapshot();
    region();
    ALLOC.snapshot().since(&before)
}

#[test]
fn followup_cycle_allocates_nothing_once_warm() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CYCLES: usize = 1_000;
    // Every message is created before the counted region, and kept alive past it.
    let pool = messages(CYCLES + 1);
    let mut machine = Machine::new();
    // Warm-up: the output buffer and the pending index get their capacity.
    followup_cycle(&mut machine, pool[CYCLES].clone());
    let counted = count(|| {
        for message in &pool[..CYCLES] {
            assert_eq!(followup_cycle(&mut machine, message.clone()), CYCLE_OUTPUTS);
        }
    });
    assert_eq!(
        (counted.allocations, counted.reallocations),
        (0, 0),
        "{CYCLES} cycles allocated: {counted:?}"
    );
    // Nothing was freed either: the machine hands every clone of a message back.
    assert_eq!(counted.deallocations, 0, "{counted:?}");
}

/// The same cycle through the session layer, each input a batch of its own: what group commit
/// with rollback armed costs in allocations per cycle (pinned, so a change shows).
#[test]
fn session_cycle_allocations_are_pinned() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CYCLES: usize = 1_000;
    let pool = messages(CYCLES + 1);
    let mut session = Session::new(Machine::new(), Options::default());
    session_cycle(&mut session, pool[CYCLES].clone());
    let counted = count(|| {
        for message in &pool[..CYCLES] {
            std::hint::black_box(session_cycle(&mut session, message.clone()));
        }
    });
    // None: `persisted` releases out of the staging buffers (it allocated one release list per
    // batch, four a cycle, before issue 54). The journal, the staged entries and effects reuse
    // their buffers.
    assert_eq!(
        (counted.allocations, counted.reallocations),
        (0, 0),
        "{CYCLES} cycles allocated: {counted:?}"
    );
}

#[test]
fn fresh_machine_owns_no_heap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let counted = count(|| {
        let machine = Machine::new();
        std::hint::black_box(&machine);
        drop(machine);
    });
    assert_eq!(counted.allocations, 0, "{counted:?}");
    // Bench 6's idle machine: 256 bytes inline (issue 54's goal; 296 before it), pinned so that
    // a field added to `Machine` shows here.
    assert_eq!(std::mem::size_of::<Machine>(), 256);
}

#[test]
fn steering_burst_within_the_inline_batch_allocates_nothing_once_warm() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = messages(BATCH_INLINE);
    let mut machine = machine_in_step();
    steer_burst(&mut machine, &pool);
    let counted = count(|| {
        for _ in 0..100 {
            steer_burst(&mut machine, &pool);
        }
    });
    assert_eq!(
        (counted.allocations, counted.reallocations),
        (0, 0),
        "{counted:?}"
    );
}
