//! Cancellation, maintenance and disposal (S39–S45).

use serde_json::{json, Value};

use super::wire::{request, Out};
use super::{Phase, Spec};

impl Spec {
    /// S39 `cancel(cause, {keepInbox})`: the clear (if any), then `abort` (first cancel only).
    pub(super) fn on_cancel(&mut self, out: &mut Out, cause: Value, keep_inbox: bool) {
        let idle = self.phase == Phase::Idle;
        if !keep_inbox {
            // S39 (1): clear in any phase; if not idle, clear the latch too (S26).
            self.clear(out);
            if !idle {
                self.wake_requested = false;
            }
        }
        // S39 (2): the first cause of an activity wins; `abort` only on its first cancel; an idle
        // machine never emits `abort`.
        if !idle && self.cancel.is_none() {
            self.cancel = Some(cause.clone());
            out.push(request("abort", json!({ "cause": cause })));
        }
    }

    /// S43 `beginMaintenance()`: only when idle, else `busy`. No output.
    pub(super) fn on_begin_maintenance(&mut self) -> Result<(), &'static str> {
        if self.phase != Phase::Idle {
            return Err("busy");
        }
        self.start_activity(Phase::Maintenance);
        Ok(())
    }

    /// S43 `endMaintenance()`: back to idle (no status output), then `disposed` if disposing (S45),
    /// else replay the latch (S25: only `status running` appears).
    pub(super) fn on_end_maintenance(&mut self, out: &mut Out) -> Result<(), &'static str> {
        if self.phase != Phase::Maintenance {
            return Err("unexpected-completion");
        }
        let latch = self.end_activity();
        self.after_activity(out, latch);
        Ok(())
    }

    /// S45 `dispose()`: `cancel({kind:"disposed"})` without keepInbox, then disposing; `disposed`
    /// at once if already quiescent (idle).
    pub(super) fn on_dispose(&mut self, out: &mut Out) {
        self.on_cancel(out, json!({ "kind": "disposed" }), false);
        self.disposing = true;
        if self.phase == Phase::Idle {
            self.become_disposed(out);
        }
    }

    /// S45: the final `disposed` output.
    pub(super) fn become_disposed(&mut self, out: &mut Out) {
        self.phase = Phase::Disposed;
        self.disposing = false;
        out.push(json!({ "disposed": {} }));
    }
}
