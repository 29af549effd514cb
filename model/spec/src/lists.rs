//! The pending lists NT and NS and the one splice that changes them (S10–S14, S19).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::memory::Left;
use super::wire::{event, msg_id, notify, Out, Target};
use super::Spec;

/// A pending item: the message value verbatim (S6–S8) and whether it was delivered waking (S19).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Item {
    /// Shared, so that copying the spec (S5's copy, a model checker's states) copies no message.
    pub(super) msg: Arc<Value>,
    pub(super) waking: bool,
}

impl Item {
    pub(super) fn id(&self) -> &str {
        msg_id(&self.msg)
    }
}

impl Spec {
    pub(super) fn list(&self, t: Target) -> &Vec<Item> {
        match t {
            Target::NextTurn => &self.nt,
            Target::NextStep => &self.ns,
        }
    }

    pub(super) fn list_mut(&mut self, t: Target) -> &mut Vec<Item> {
        match t {
            Target::NextTurn => &mut self.nt,
            Target::NextStep => &mut self.ns,
        }
    }

    /// S15: an id is looked up in NT, then NS.
    pub(super) fn find(&self, id: &str) -> Option<(Target, usize)> {
        for t in [Target::NextTurn, Target::NextStep] {
            for (i, item) in self.list(t).iter().enumerate() {
                if item.id() == id {
                    return Some((t, i));
                }
            }
        }
        None
    }

    /// S19: waking work = at least one pending item, in either list, delivered waking.
    pub(super) fn has_waking_work(&self) -> bool {
        self.nt.iter().chain(self.ns.iter()).any(|i| i.waking)
    }

    /// One splice on one list (S10, S14), already validated by the caller.
    ///
    /// Emits, in order: the durable `agent/inbox/spliced` (only if non-empty), then (list change),
    /// one `discarded` per removed message if `canceled` (an ordinary removal, S12), then one
    /// `inserted` per inserted message. Claims pass `canceled = false` and insert nothing, so they
    /// emit only the splice (S12, S28). Returns the removed items.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn splice(
        &mut self,
        out: &mut Out,
        target: Target,
        start: usize,
        removed_count: usize,
        inserted: Vec<Item>,
        canceled: bool,
        wakeup: bool,
    ) -> Vec<Item> {
        if removed_count == 0 && inserted.is_empty() {
            // S10: an empty splice emits nothing.
            return Vec::new();
        }
        let inserted_msgs: Vec<Value> = inserted.iter().map(|i| (*i.msg).clone()).collect();
        out.push(event(
            "agent/inbox/spliced",
            splice_data(
                target,
                start,
                removed_count,
                &inserted_msgs,
                canceled,
                wakeup,
            ),
        ));
        // S14: then the list change.
        let removed: Vec<Item> = self
            .list_mut(target)
            .splice(start..start + removed_count, inserted)
            .collect();
        // S51: the ids that left the lists enter the delivery memory; S58: an ordinary removal
        // records `discarded`, a claim (a pure deletion, only while a turn is open, S28)
        // `claimed` by the open turn.
        let left = if canceled {
            Left::Discarded
        } else {
            Left::Claimed(self.last_turn)
        };
        self.memory_after_splice(&removed, left);
        // S14: then `discarded` per removed message (ordinary removals only, S12).
        if canceled {
            for item in &removed {
                out.push(notify(
                    "agent/inbox/discarded",
                    json!({ "message": item.msg.as_ref() }),
                ));
            }
        }
        // S14: then `inserted` per inserted message, batch order.
        for msg in inserted_msgs {
            out.push(notify("agent/inbox/inserted", json!({ "message": msg })));
        }
        removed
    }
}

/// S10: the data of an `agent/inbox/spliced` event; optional keys only when they apply.
fn splice_data(
    target: Target,
    start: usize,
    removed_count: usize,
    inserted: &[Value],
    canceled: bool,
    wakeup: bool,
) -> Value {
    let mut data = Map::new();
    data.insert("target".into(), json!(target.name()));
    data.insert("start".into(), json!(start));
    if removed_count > 0 {
        data.insert("removedCount".into(), json!(removed_count));
    }
    data.insert("inserted".into(), Value::Array(inserted.to_vec()));
    // S12: only an ordinary removal is `canceled`.
    if canceled && removed_count > 0 {
        data.insert("outcome".into(), json!("canceled"));
    }
    if wakeup {
        data.insert("wakeup".into(), json!(true));
    }
    Value::Object(data)
}
