//! The model's side of the differential property and of crash repair: the spec fed the same
//! input, the spec restored beside the core after a crash, and the logs the model did not write
//! (a seed boundary, renumbered turns) repaired by both (SPEC S46–S50, S53, S59, I15).

use super::*;

impl DeliveryModel {
    /// The differential property: the spec on the same input, compared with the core's outcome
    /// and, after an accepted input, with the machine's observable state. Records the first
    /// mismatch; returns whether they agreed. An accepted input's events join the JSON log.
    pub(super) fn differential(
        &self,
        next: &mut State,
        input: &Input,
        result: Result<(), &coxswain_core::Rejected>,
        outputs: &[Output],
    ) -> bool {
        let input = input_json(input);
        let spec = next.spec.apply(&input);
        let core = differential::core_outcome(&result.map_err(Clone::clone), outputs);
        for output in outputs {
            if let Output::Event(event) = output {
                next.log.push(event.clone());
            }
        }
        if next.mismatch.is_some() {
            return false;
        }
        // Only durable events change a fate (S58): after an input without one, both sides answer
        // as they did before it.
        let ids: &[MessageId] = if outputs.iter().any(|o| matches!(o, Output::Event(_))) {
            &self.ids
        } else {
            &[]
        };
        match differential::compare(&input, &core, &spec, &next.machine, &next.spec, ids) {
            None => true,
            Some(mismatch) => {
                next.mismatch = Some(Arc::new(mismatch));
                false
            }
        }
    }

    /// S49, S53, S59 on the spec's side of a crash: the spec's own crash repair of the JSON log
    /// (allowance `A = 1`) must append exactly the core's `repair` events; the log so repaired
    /// restores the spec with the same `W`, which must agree with the restored machine, fates
    /// included (S58). Then the logs the model does not write (`check_foreign_logs`).
    pub(super) fn restore_spec(&self, next: &mut State, repair: &[coxswain_core::Event]) {
        let before = next.log.events();
        for event in repair {
            next.log.push(event.clone());
        }
        if next.mismatch.is_some() {
            return;
        }
        let core: Vec<Value> = repair.iter().map(event_json).collect();
        match coxswain_spec::repair(&before, 0, REDELIVERY) {
            Ok(spec) if spec == core => {}
            spec => {
                next.mismatch = Some(Arc::new(Mismatch {
                    input: format!("crash repair (S50, S59, A = {REDELIVERY}) of the log so far"),
                    core: core.iter().map(Value::to_string).collect(),
                    spec: match spec {
                        Ok(events) => events.iter().map(Value::to_string).collect(),
                        Err(error) => vec![format!("rejects the log: {error}")],
                    },
                    state: Vec::new(),
                }));
                return;
            }
        }
        let restored = Spec::restore_with_config(&next.log.events(), 0, self.spec_config());
        let mismatch = differential::compare_restored(
            restored.as_ref().map_err(String::as_str),
            &next.machine,
            &self.ids,
        );
        next.mismatch = mismatch.map(Arc::new);
        if let Ok(spec) = restored {
            next.spec = spec;
        }
        if next.mismatch.is_none() {
            self.check_foreign_logs(next, &before);
        }
    }

    /// Logs the model does not write, from the log `log` a crash cut (it may end inside a turn):
    /// the same log with a seed boundary past its start (S46: splices before it are not
    /// replayed), and the log with every turn renumbered `t -> 3t + 2` (numbers the machine
    /// would not write). Each is repaired with `A = 1` and restored by the core and by the
    /// spec, which must agree (the repair's events, the views and every fate); and the
    /// renumbered log must restore the lists of the log itself, with each claim's turn renumbered
    /// alike (I15: a fate names the turn of the claim splice that removed the id).
    fn check_foreign_logs(&self, next: &mut State, log: &[Value]) {
        let half = log.len() / 2;
        for seed in [1, half]
            .into_iter()
            .filter(|&seed| seed > 0 && seed <= log.len())
        {
            if seed == 1 && half == 1 {
                continue;
            }
            let what =
                format!("repair (A = {REDELIVERY}) and restore of the log with seedLength {seed}");
            if let Some(mismatch) = self.foreign(&what, log, seed) {
                next.mismatch = Some(Arc::new(mismatch));
                return;
            }
        }
        let renumbered: Vec<Value> = log.iter().map(renumber).collect();
        let what = format!(
            "repair (A = {REDELIVERY}) and restore of the log with turns renumbered 3t + 2"
        );
        if let Some(mismatch) = self.foreign(&what, &renumbered, 0) {
            next.mismatch = Some(Arc::new(mismatch));
            return;
        }
        if let (Ok((plain, _)), Ok((moved, _))) = (
            self.core_repaired(log, 0),
            self.core_repaired(&renumbered, 0),
        ) {
            for id in &self.ids {
                let expected = match plain.fate(id) {
                    coxswain_core::Fate::Claimed { turn, step, end } => {
                        coxswain_core::Fate::Claimed {
                            turn: 3 * turn + 2,
                            step,
                            end,
                        }
                    }
                    other => other,
                };
                let got = moved.fate(id);
                let lists_equal = [Target::NextTurn, Target::NextStep].into_iter().all(|t| {
                    plain
                        .pending(t)
                        .map(|p| (p.message(), p.is_waking()))
                        .eq(moved.pending(t).map(|p| (p.message(), p.is_waking())))
                });
                if got != expected || !lists_equal {
                    next.monitor.report(
                        Invariant::I15Fate,
                        format!(
                            "the log with turns renumbered 3t + 2 restores fate({id}) = {} \
                             (lists equal: {lists_equal}), the log itself {}",
                            got.to_json(),
                            plain.fate(id).to_json()
                        ),
                    );
                    return;
                }
            }
        }
    }

    /// The core's crash repair (`A = 1`) and restore of a JSON log with seed boundary `seed`:
    /// the restored machine and the repair's events, or the error's text.
    fn core_repaired(&self, log: &[Value], seed: usize) -> Result<(Machine, Vec<Value>), String> {
        let mut restorer = coxswain_core::Restorer::with_config(self.config(), seed);
        for event in log {
            restorer.push_json(event).map_err(|e| e.to_string())?;
        }
        let repair = restorer.repair(REDELIVERY);
        for event in &repair {
            restorer.push_event(event).map_err(|e| e.to_string())?;
        }
        let machine = restorer.finish().map_err(|e| e.to_string())?;
        Ok((machine, repair.iter().map(event_json).collect()))
    }

    /// The core and the spec on one foreign log: both reject it, or both repair it alike and
    /// restore machines that agree.
    fn foreign(&self, what: &str, log: &[Value], seed: usize) -> Option<Mismatch> {
        let core = self.core_repaired(log, seed);
        let spec = Spec::restore_repaired(log, seed, self.spec_config(), REDELIVERY);
        match (core, spec) {
            (Err(_), Err(_)) => None,
            (Ok((machine, core_events)), Ok((spec, spec_events))) => {
                if core_events != spec_events {
                    return Some(Mismatch {
                        input: what.to_string(),
                        core: core_events.iter().map(Value::to_string).collect(),
                        spec: spec_events.iter().map(Value::to_string).collect(),
                        state: Vec::new(),
                    });
                }
                differential::compare_restored_as(what, Ok(&spec), &machine, &self.ids)
            }
            (core, spec) => Some(Mismatch {
                input: what.to_string(),
                core: vec![match core {
                    Ok(_) => "restored".into(),
                    Err(error) => format!("rejects the log: {error}"),
                }],
                spec: vec![match spec {
                    Ok(_) => "restored".into(),
                    Err(error) => format!("rejects the log: {error}"),
                }],
                state: Vec::new(),
            }),
        }
    }
}

/// An event as the log holds it (`{type, data}`).
fn event_json(event: &coxswain_core::Event) -> Value {
    serde_json::to_value(event).unwrap_or_else(|e| Value::String(e.to_string()))
}

/// The event with its `data.turn` renumbered `t -> 3t + 2` (turn and step events).
fn renumber(event: &Value) -> Value {
    let mut event = event.clone();
    if let Some(turn) = event.pointer_mut("/data/turn") {
        if let Some(t) = turn.as_u64() {
            *turn = Value::from(3 * t + 2);
        }
    }
    event
}
