//! What a run of the session model or the agent model proved: one exhaustive breadth-first
//! check and its verdicts, for both.

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path};

/// One property's verdict; `C` is the model's counterexample.
#[derive(Clone, Debug)]
pub struct ModelVerdict<C> {
    /// The property's name.
    pub name: &'static str,
    /// `always`: whether it holds; `sometimes`: whether it was reached.
    pub ok: bool,
    /// For a broken `always` property: its counterexample.
    pub counterexample: Option<C>,
}

/// What a run proved.
#[derive(Clone, Debug)]
pub struct ModelReport<C> {
    /// Distinct states explored.
    pub unique_states: usize,
    /// Whether the whole bound was explored.
    pub exhaustive: bool,
    /// Every property with its verdict.
    pub properties: Vec<ModelVerdict<C>>,
}

impl<C> ModelReport<C> {
    /// Every `always` property holds and every `sometimes` one was reached, over the whole
    /// bound.
    pub fn passed(&self) -> bool {
        self.exhaustive && self.properties.iter().all(|p| p.ok)
    }
}

/// Checks `model` exhaustively (breadth first) on `threads` threads; with `stop_at`, stops at
/// that property's first counterexample (the mutant runner's killer). `counterexample` reads a
/// broken `always` property's path.
pub(crate) fn check<M, C>(
    model: M,
    threads: usize,
    stop_at: Option<&'static str>,
    counterexample: impl Fn(&Path<M::State, M::Action>) -> C,
) -> ModelReport<C>
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: Clone + std::hash::Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + PartialEq,
{
    let mut builder = model.clone().checker().threads(threads.max(1));
    if let Some(name) = stop_at {
        builder = builder.finish_when(HasDiscoveries::AnyOf(std::collections::BTreeSet::from([
            name,
        ])));
    }
    let checker = builder.spawn_bfs().join();
    let discoveries = checker.discoveries();
    let properties = model
        .properties()
        .into_iter()
        .map(|property| {
            let found = discoveries.get(property.name);
            let always = !matches!(property.expectation, Expectation::Sometimes);
            ModelVerdict {
                name: property.name,
                ok: found.is_some() != always,
                counterexample: found.filter(|_| always).map(&counterexample),
            }
        })
        .collect();
    let stopped = stop_at.is_some_and(|name| discoveries.contains_key(name));
    ModelReport {
        unique_states: checker.unique_state_count(),
        exhaustive: !stopped,
        properties,
    }
}
