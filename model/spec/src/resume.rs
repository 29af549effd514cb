//! Resume (S57) and the fate query (S58): §13's two inputs a host has beyond SPEC §1–§12.
//! Redelivery (S59) is crash repair's, outside the machine (`repair`); the fate records
//! themselves live in the delivery memory (`memory`).

use serde_json::{json, Value};

use super::wire::{status, Out};
use super::{Phase, Spec};

impl Spec {
    /// S57 `resume`: when idle with waking work (S19), wake from idle exactly as a waking send
    /// would (S24: `status running`, `turn/start`, the claim, the pre-step request). Otherwise
    /// nothing: no latch, no list change, and quiet items alone never open a turn. Once disposed
    /// it is rejected `disposed` by [`Spec::apply`] (S45), like every input.
    pub(super) fn on_resume(&mut self, out: &mut Out) {
        if self.phase == Phase::Idle && self.has_waking_work() {
            out.push(status("running"));
            self.open_turn(out);
        }
    }

    /// The query `fate(id)` (S58), as FORMAT.md's fate value `F`: `{"pending": T}` while the id
    /// is pending (S9), else the record the delivery memory holds for it (`"discarded"` or
    /// `{"claimed": {"turn": n, "step"?: n, "end"?: K}}`), else `"unknown"`. A query: it changes
    /// nothing, emits nothing, and is answered in every phase, also once disposed.
    pub fn fate(&self, id: &str) -> Value {
        if let Some((target, _)) = self.find(id) {
            return json!({ "pending": target.name() });
        }
        match self.memory.record(id) {
            Some(record) => record.to_json(),
            None => json!("unknown"),
        }
    }

    /// S58: every held id with its fate (as [`Spec::fate`] answers it), oldest first: what a
    /// restored machine must answer alike once the live one is idle (S49, I15).
    pub fn fates(&self) -> Vec<(String, Value)> {
        self.memory.held_fates()
    }
}
