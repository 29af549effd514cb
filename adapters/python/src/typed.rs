//! The typed outputs of `coxswain._types`, built here from the core's outputs (no JSON round
//! trip): the fast path of the typed `coxswain.Machine`. A message shared by several outputs of
//! one input (S8) becomes one frozen `Message` object shared by them.

use std::collections::HashMap;
use std::sync::Arc;

use coxswain_core::{
    Abort, Activity, CancelCause, Effect, ErrorInfo, Message, Notification, Output, Request,
    SharedMessage, Status,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::Value;

use crate::json::to_py;

/// The classes of `coxswain._types`, looked up once.
pub(crate) struct Classes {
    message: Py<PyAny>,
    event: Py<PyAny>,
    inserted: Py<PyAny>,
    discarded: Py<PyAny>,
    claimed: Py<PyAny>,
    status: Py<PyAny>,
    turn_failed: Py<PyAny>,
    pre_step: Py<PyAny>,
    step: Py<PyAny>,
    turn_stopping: Py<PyAny>,
    abort: Py<PyAny>,
    disposed: Py<PyAny>,
    begin: Py<PyAny>,
    cancel_cause: Py<PyAny>,
    error_info: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("coxswain._types")?;
        let get = |name: &str| module.getattr(name).map(Bound::unbind);
        Ok(Classes {
            message: get("Message")?,
            event: get("Event")?,
            inserted: get("Inserted")?,
            discarded: get("Discarded")?,
            claimed: get("Claimed")?,
            status: get("StatusChanged")?,
            turn_failed: get("TurnFailed")?,
            pre_step: get("PreStepRequest")?,
            step: get("StepRequest")?,
            turn_stopping: get("TurnStoppingRequest")?,
            abort: get("Abort")?,
            disposed: get("Disposed")?,
            begin: get("Begin")?,
            cancel_cause: get("CancelCause")?,
            error_info: get("ErrorInfo")?,
        })
    })
}

/// Builds the typed outputs of one input, sharing one `Message` per shared message.
pub(crate) struct Builder<'py> {
    py: Python<'py>,
    classes: &'py Classes,
    messages: HashMap<*const Message, Bound<'py, PyAny>>,
    /// Every output in wire order.
    pub(crate) outputs: Bound<'py, PyList>,
    /// The same with each `Begin` where its activity begins (the core's
    /// `into_outputs_with_begin`).
    pub(crate) ordered: Bound<'py, PyList>,
    /// The durable events.
    pub(crate) events: Bound<'py, PyList>,
    /// The effects, `Begin` included.
    pub(crate) effects: Bound<'py, PyList>,
}

impl<'py> Builder<'py> {
    pub(crate) fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(Builder {
            py,
            classes: classes(py)?,
            messages: HashMap::new(),
            outputs: PyList::empty(py),
            ordered: PyList::empty(py),
            events: PyList::empty(py),
            effects: PyList::empty(py),
        })
    }

    /// One output of the core's wire order with its begins
    /// ([`into_outputs_with_begin`](coxswain_core::Transition::into_outputs_with_begin)).
    pub(crate) fn push(&mut self, output: &Output) -> PyResult<()> {
        let py = self.py;
        let c = self.classes;
        match output {
            Output::Event(event) => {
                let data = serde_json::to_value(event)
                    .ok()
                    .and_then(|mut v| v.get_mut("data").map(Value::take))
                    .unwrap_or(Value::Null);
                let object = c.event.bind(py).call1((event.kind(), to_py(py, &data)?))?;
                self.outputs.append(&object)?;
                self.ordered.append(&object)?;
                self.events.append(object)
            }
            // A begin has no wire form: in the effects and the ordered view only.
            Output::Effect(effect @ Effect::Begin(_)) => {
                let object = self.effect(effect)?;
                self.ordered.append(&object)?;
                self.effects.append(object)
            }
            Output::Effect(effect) => {
                let object = self.effect(effect)?;
                self.outputs.append(&object)?;
                self.ordered.append(&object)?;
                self.effects.append(object)
            }
        }
    }

    /// The object of one effect released by the session layer (`Begin` included), with no
    /// list kept: the asyncio agent carries it out at once.
    pub(crate) fn effect(&mut self, effect: &Effect) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        match effect {
            Effect::Notify(notification) => self.notification(notification),
            Effect::Begin(Activity::Turn(turn)) => self.classes.begin.bind(py).call1((*turn,)),
            Effect::Begin(Activity::Maintenance) => {
                self.classes.begin.bind(py).call1(("maintenance",))
            }
            Effect::Request(request) => self.request(request),
            Effect::Abort(abort) => self.abort(abort),
            Effect::Disposed => self.classes.disposed.bind(py).call0(),
        }
    }

    fn notification(&mut self, notification: &Notification) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let c = self.classes;
        match notification {
            Notification::Inserted { message } => {
                c.inserted.bind(py).call1((self.message(message)?,))
            }
            Notification::Discarded { message } => {
                c.discarded.bind(py).call1((self.message(message)?,))
            }
            Notification::Claimed { message, turn } => {
                c.claimed.bind(py).call1((self.message(message)?, *turn))
            }
            Notification::Status { status } => c.status.bind(py).call1((match status {
                Status::Idle => "idle",
                Status::Running => "running",
            },)),
            Notification::Error { turn, step, error } => {
                let error = self.error(error)?;
                c.turn_failed.bind(py).call1((*turn, *step, error))
            }
        }
    }

    fn request(&mut self, request: &Request) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let c = self.classes;
        match request {
            Request::PreStep {
                turn,
                step,
                messages,
            } => {
                let mut items = Vec::with_capacity(messages.as_slice().len());
                for message in messages.as_slice() {
                    items.push(self.message(message)?);
                }
                let batch = PyTuple::new(py, items)?;
                c.pre_step.bind(py).call1((*turn, *step, batch))
            }
            Request::Step { turn, step } => c.step.bind(py).call1((*turn, *step)),
            Request::TurnStopping { turn } => c.turn_stopping.bind(py).call1((*turn,)),
        }
    }

    fn abort(&self, abort: &Abort) -> PyResult<Bound<'py, PyAny>> {
        let cause = self.cause(&abort.cause)?;
        self.classes.abort.bind(self.py).call1((cause,))
    }

    fn message(&mut self, message: &SharedMessage) -> PyResult<Bound<'py, PyAny>> {
        let key = Arc::as_ptr(message);
        if let Some(object) = self.messages.get(&key) {
            return Ok(object.clone());
        }
        let py = self.py;
        let extra = PyDict::new(py);
        let mut content = py.None().into_bound(py);
        let mut source = None;
        for (key, value) in message.fields() {
            match key.as_str() {
                "content" => content = to_py(py, value)?,
                "source" => source = Some(to_py(py, value)?),
                _ => extra.set_item(key, to_py(py, value)?)?,
            }
        }
        let source = match source {
            Some(source) => source,
            None => to_py(py, &serde_json::json!({ "kind": "user" }))?,
        };
        let object =
            self.classes
                .message
                .bind(py)
                .call1((message.id().as_str(), content, source, extra))?;
        self.messages.insert(key, object.clone());
        Ok(object)
    }

    fn error(&self, error: &ErrorInfo) -> PyResult<Bound<'py, PyAny>> {
        self.classes
            .error_info
            .bind(self.py)
            .call1((&*error.message, &*error.code))
    }

    fn cause(&self, cause: &CancelCause) -> PyResult<Bound<'py, PyAny>> {
        let class = self.classes.cancel_cause.bind(self.py);
        match cause {
            CancelCause::User => class.call1(("user",)),
            CancelCause::Parent => class.call1(("parent",)),
            CancelCause::Hook { reason } => class.call1(("hook", &**reason)),
            CancelCause::Disposed => class.call1(("disposed",)),
        }
    }
}
