//! The breadth-first exploration behind `coxswain traces`: the model's states and actions
//! (`coxswain_checker::DeliveryModel`, the same generator `coxswain check` explores), the real core
//! as the transition, and a trie of the shortest input paths that witness each core state and
//! each distinct transition.
//!
//! Coverage is counted on the core, not on the model's states (which also hold the monitor's
//! history, the spec and the budget left): a *state* is a [`Machine`] up to its behaviour
//! ([`Machine::behaviour`], what the model checker compares), and a *distinct transition* is a pair (state, input), the input compared as its
//! FORMAT.md JSON. Breadth-first order makes the first path to reach each the shortest.

use std::collections::{HashMap, HashSet, VecDeque};

use coxswain_checker::stateright::Model;
use coxswain_checker::{DeliveryModel, State};
use coxswain_conformance::input_json;
use coxswain_core::{Input, Machine};

/// A core state: a machine compared and hashed by its [`Machine::behaviour`].
#[derive(Clone, Debug)]
struct CoreState(Machine);

impl PartialEq for CoreState {
    fn eq(&self, other: &Self) -> bool {
        self.0.behaviour() == other.0.behaviour()
    }
}

impl Eq for CoreState {}

impl std::hash::Hash for CoreState {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.behaviour().hash(state);
    }
}

/// One node of the trie of witness paths: an accepted input from its parent (none at the root),
/// and the new rejected transitions first seen in the state it leads to.
#[derive(Debug)]
struct Node {
    input: Option<Input>,
    children: Vec<usize>,
    rejections: Vec<Input>,
}

/// What the exploration covered, and the maximal witness paths (the traces to write).
#[derive(Debug)]
pub(crate) struct Explored {
    /// Model states explored (deduplicated as the model checker does, without symmetry).
    pub(crate) model_states: usize,
    /// Distinct core states reached.
    pub(crate) states: usize,
    /// Distinct (state, input) transitions taken, accepted or rejected.
    pub(crate) transitions: usize,
    /// Of those, rejected inputs.
    pub(crate) rejections: usize,
    trie: Vec<Node>,
}

/// A model state in the search: its parent and the trie node of its path, once it has one.
struct Visit {
    state: State,
    parent: Option<(usize, Option<Input>)>,
    trie: Option<usize>,
}

/// Explores every state the model reaches from its initial state.
pub(crate) fn explore(model: &DeliveryModel) -> Explored {
    let mut explored = Explored {
        model_states: 0,
        states: 0,
        transitions: 0,
        rejections: 0,
        trie: vec![Node {
            input: None,
            children: Vec::new(),
            rejections: Vec::new(),
        }],
    };
    let mut children: HashMap<(usize, String), usize> = HashMap::new();
    let mut visits: Vec<Visit> = Vec::new();
    let mut seen: HashSet<State> = HashSet::new();
    let mut machines: HashMap<CoreState, usize> = HashMap::new();
    let mut transitions: HashSet<(usize, String)> = HashSet::new();
    let mut queue = VecDeque::new();
    for state in model.init_states() {
        if seen.insert(state.clone()) {
            let id = machines.len();
            machines
                .entry(CoreState(state.machine.clone()))
                .or_insert(id);
            visits.push(Visit {
                state,
                parent: None,
                trie: Some(0),
            });
            queue.push_back(visits.len() - 1);
        }
    }
    let mut actions = Vec::new();
    while let Some(at) = queue.pop_front() {
        actions.clear();
        let state = visits[at].state.clone();
        model.actions(&state, &mut actions);
        let machine_id = machines
            .get(&CoreState(state.machine.clone()))
            .copied()
            .unwrap_or_default();
        for &action in &actions {
            let input = model.input(&state, action);
            let mut trie_of_next = None;
            if let Some(input) = &input {
                let key = input_json(input).to_string();
                if transitions.insert((machine_id, key.clone())) {
                    let from = trie_node(&mut visits, &mut explored.trie, &mut children, at);
                    if state.machine.clone().handle(input.clone()).is_ok() {
                        trie_of_next =
                            Some(child(&mut explored.trie, &mut children, from, key, input));
                    } else {
                        explored.rejections += 1;
                        explored.trie[from].rejections.push(input.clone());
                    }
                }
            }
            let Some(next) = model.next_state(&state, action) else {
                continue;
            };
            if !seen.insert(next.clone()) {
                continue;
            }
            let core_state = CoreState(next.machine.clone());
            let new_machine = !machines.contains_key(&core_state);
            if new_machine {
                let id = machines.len();
                machines.insert(core_state, id);
            }
            visits.push(Visit {
                state: next,
                parent: Some((at, input)),
                trie: trie_of_next,
            });
            let index = visits.len() - 1;
            if new_machine {
                trie_node(&mut visits, &mut explored.trie, &mut children, index);
            }
            queue.push_back(index);
        }
    }
    explored.model_states = visits.len();
    explored.states = machines.len();
    explored.transitions = transitions.len();
    explored
}

/// The trie node of a visit's path (creating it and its missing ancestors).
fn trie_node(
    visits: &mut [Visit],
    trie: &mut Vec<Node>,
    children: &mut HashMap<(usize, String), usize>,
    at: usize,
) -> usize {
    // Walk up to the nearest visit that has a trie node, then down again creating them.
    let mut chain = Vec::new();
    let mut cursor = at;
    let mut node = loop {
        if let Some(node) = visits[cursor].trie {
            break node;
        }
        match visits[cursor].parent {
            Some((parent, _)) => {
                chain.push(cursor);
                cursor = parent;
            }
            None => break 0,
        }
    };
    for &visit in chain.iter().rev() {
        if let Some((_, Some(input))) = &visits[visit].parent {
            let input = input.clone();
            node = child(trie, children, node, input_json(&input).to_string(), &input);
        }
        visits[visit].trie = Some(node);
    }
    node
}

fn child(
    trie: &mut Vec<Node>,
    children: &mut HashMap<(usize, String), usize>,
    parent: usize,
    key: String,
    input: &Input,
) -> usize {
    *children.entry((parent, key)).or_insert_with(|| {
        trie.push(Node {
            input: Some(input.clone()),
            children: Vec::new(),
            rejections: Vec::new(),
        });
        let node = trie.len() - 1;
        trie[parent].children.push(node);
        node
    })
}

impl Explored {
    /// The traces: one per leaf of the trie (a maximal witness path, so no trace is a prefix of
    /// another), depth-first in discovery order. Each node's new rejected inputs are sent, once,
    /// in the first trace through it, right after the input that reached it (a rejection leaves
    /// the machine unchanged, S5, so the path goes on from the same state).
    pub(crate) fn paths(&self) -> Vec<Vec<Input>> {
        let mut paths = Vec::new();
        let mut path: Vec<Input> = self.trie[0].rejections.clone();
        if self.trie[0].children.is_empty() {
            paths.push(path.clone());
        }
        // (node, next child to visit, path length on entering it, before its rejections)
        let mut stack = vec![(0usize, 0usize, 0usize)];
        while let Some(frame) = stack.last_mut() {
            let (node, next, base) = *frame;
            let Some(&child) = self.trie[node].children.get(next) else {
                stack.pop();
                continue;
            };
            frame.1 += 1;
            // Later children go on without this node's rejections: they were sent already.
            path.truncate(if next == 0 { path.len() } else { base });
            if let Some(input) = &self.trie[child].input {
                path.push(input.clone());
            }
            let child_base = path.len();
            path.extend(self.trie[child].rejections.iter().cloned());
            if self.trie[child].children.is_empty() {
                paths.push(path.clone());
            }
            stack.push((child, 0, child_base));
        }
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_checker::Bound;

    fn bound(operations: u8) -> Bound {
        Bound {
            messages: 2,
            operations,
            tool_steps: 1,
            crashes: false,
            memory: 0,
            max_pending: 0,
        }
    }

    /// The coverage claim, checked independently of the search: replaying the written paths on a
    /// fresh core reaches exactly the states and takes exactly the (state, input) transitions
    /// the search counted, and no path is a prefix of another.
    #[test]
    fn the_paths_cover_every_state_and_transition_and_none_is_a_prefix() {
        // The last one with an admission bound of one item per list (S55).
        for (operations, max_pending) in [(1, 0), (2, 0), (2, 1)] {
            let model = DeliveryModel::new(bound(operations).with_max_pending(max_pending));
            let explored = explore(&model);
            let paths = explored.paths();
            let mut states = HashSet::new();
            let mut taken = HashSet::new();
            for path in &paths {
                let mut machine = model.machine();
                states.insert(CoreState(machine.clone()));
                for input in path {
                    taken.insert((CoreState(machine.clone()), input_json(input).to_string()));
                    if let Ok(transition) = machine.handle(input.clone()) {
                        transition.into_outputs().for_each(drop);
                    }
                    states.insert(CoreState(machine.clone()));
                }
            }
            assert_eq!(
                (states.len(), taken.len()),
                (explored.states, explored.transitions),
                "operations {operations}, max pending {max_pending}"
            );
            let mut sorted: Vec<Vec<String>> = paths
                .iter()
                .map(|p| p.iter().map(|i| input_json(i).to_string()).collect())
                .collect();
            sorted.sort();
            for pair in sorted.windows(2) {
                assert!(!pair[1].starts_with(&pair[0]), "a prefix: {:?}", pair[0]);
            }
        }
    }

    /// The counts at the smallest bounds, pinned (docs/verification.md, PORTS.md).
    #[test]
    fn counts_at_small_bounds() {
        let counts = |operations, max_pending| {
            let model = DeliveryModel::new(bound(operations).with_max_pending(max_pending));
            let explored = explore(&model);
            let paths = explored.paths();
            (
                explored.model_states,
                explored.states,
                explored.transitions,
                explored.rejections,
                paths.len(),
                paths.iter().map(Vec::len).sum::<usize>(),
            )
        };
        // S57: `resume` is among the model's actions (one more transition per state where it
        // is new: it emits nothing while idle without waking work).
        assert_eq!(counts(1, 0), (35, 18, 237, 176, 51, 675));
        assert_eq!(counts(2, 0), (805, 199, 2931, 1870, 869, 27006));
        // S55: with one item per list, a second delivery to a list is refused `full`.
        assert_eq!(counts(2, 1), (793, 189, 2821, 1784, 845, 26913));
    }
}
