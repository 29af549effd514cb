//! The mutants of the agent loop (`core/session/src/agent_loop.rs`), the hooks a host did not
//! write (`hooks.rs`) and the session's default answers (`session.rs`), each killed by a property
//! of the agent-loop model ([`coxswain_checker::check_agent`]).

use super::{AgentProperty, Mutant, Property};

/// The agent loop's mutants.
pub(super) const AGENT: [Mutant; 9] = [
    Mutant {
        name: "RetryDropsHeldWaiter",
        rule: "agent loop: waiters (S5, S38)",
        wrong: "a retry stages a held answer again without its waiter: a maintenance job's end \
                that a failed batch held is never answered",
        file: "core/session/src/agent_loop.rs",
        from: "Some(at) => self.held.remove(at).1,",
        to: "Some(at) => {
                            self.held.remove(at);
                            Waiter::Loop
                        }",
        killer: Property::Agent(AgentProperty::HeldWaiterSurvives),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "FailedAppendStops",
        rule: "agent loop: stop policy",
        wrong: "a plain failed append (nothing written) stops the agent, as an indeterminate one \
                does",
        file: "core/session/src/agent_loop.rs",
        from: "!matches!(self, LogFailure::Failed)",
        to: "!matches!(self, LogFailure::Failed) || self == LogFailure::Failed",
        killer: Property::Agent(AgentProperty::StopPolicy),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RefusedAnswerDropped",
        rule: "agent loop: a refused host answer (S38)",
        wrong: "a host answer the core refuses is fed as it is and, refused, dropped: no `fail` \
                is answered for it, and its turn stalls",
        file: "core/session/src/agent_loop.rs",
        from: "HostReply::Answer(answer) => self.session.answer(request, answer),",
        to: "HostReply::Answer(answer) => self.session.feed(answer),",
        killer: Property::Agent(AgentProperty::RefusedAnswerFails),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "UnwrittenPreStepReleased",
        rule: "agent loop: unwritten hooks (S29)",
        wrong: "the session takes every host for one that wrote its pre-step hook: the request \
                is released to a host that cannot answer it",
        file: "core/session/src/hooks.rs",
        from: "Outstanding::PreStep { .. } => self.pre_step,",
        to: "Outstanding::PreStep { .. } => true,",
        killer: Property::Agent(AgentProperty::UnwrittenHooks),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "PendingJoinsBatch",
        rule: "agent loop: batch ends (S53)",
        wrong: "`pending` does not end the batch being gathered: it is answered against inputs \
                not yet durable",
        file: "core/session/src/agent_loop.rs",
        from: "Queued::Command(Command::Pending | Command::Fate(_) | Command::Close, _)",
        to: "Queued::Command(Command::Fate(_) | Command::Close, _)",
        killer: Property::Agent(AgentProperty::QueriesAreDurable),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "FateJoinsBatch",
        rule: "agent loop: batch ends (S58)",
        wrong: "`fate` does not end the batch being gathered: it is answered against inputs not \
                yet durable",
        file: "core/session/src/agent_loop.rs",
        from: "Queued::Command(Command::Pending | Command::Fate(_) | Command::Close, _)",
        to: "Queued::Command(Command::Pending | Command::Close, _)",
        killer: Property::Agent(AgentProperty::QueriesAreDurable),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "EndingForgetsCallers",
        rule: "agent loop: waiters",
        wrong: "`finish` drops the answers kept for the ending: `close`'s caller, and the members \
                of the append that stopped the agent, are never answered",
        file: "core/session/src/agent_loop.rs",
        from: "for (w, reply) in self.after_end.drain(..) {
            self.outputs.push_back(Output::Reply(w, reply));
        }",
        to: "self.after_end.clear();",
        killer: Property::Agent(AgentProperty::AnsweredOnce),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "DefaultAnswerUnwritten",
        rule: "agent loop: unwritten hooks (S29, S33, S46)",
        wrong: "the session's answer to an unwritten hook changes the machine but its records \
                are left out of the batch's write",
        file: "core/session/src/session.rs",
        from: "Ok(transition) => {
                    self.staging
                        .entries
                        .extend(transition.events().iter().cloned().map(Entry::Machine));
                    self.staging.effects.splice(at..at, transition.persisted());",
        to: "Ok(transition) => {
                    self.staging.effects.splice(at..at, transition.persisted());",
        killer: Property::Agent(AgentProperty::DurableLog),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
    Mutant {
        name: "RequestNeverReleased",
        rule: "agent loop: host calls (S4)",
        wrong: "a durable request becomes the running call but is not handed to the driver: the \
                host is never asked, and the turn waits forever",
        file: "core/session/src/agent_loop.rs",
        from: "self.call = Some(request.clone());
                self.outputs.push_back(Output::Effect(Effect::Request(request)));",
        to: "self.call = Some(request);",
        killer: Property::Agent(AgentProperty::NoStall),
        shows_in_outputs: false,
        proptest: None,
        memory: 0,
        max_pending: 0,
    },
];
