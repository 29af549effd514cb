//! The typed outputs, built here from the core's outputs (no JSON round trip): the fast path of
//! the typed `coxswain.Machine` and of the asyncio agent. Each output is one of the frozen
//! classes of [`outputs`](crate::outputs). A message is one Python object however many outputs
//! carry it and for as long as the core holds it (S8): the caller's own `Message` when it was
//! delivered through the typed API, else one made once; its event form (the dict in a splice's
//! `inserted` and a `user/message` event's `data`) is likewise one dict.

use coxswain_binding_kit::Table;
use coxswain_core::{
    Abort, Activity, CancelCause, Effect, ErrorInfo, Event, Message, MessageId, Notification,
    Output, Request, SharedMessage, Status, TurnEndReason,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use serde_json::{Map, Value};

use crate::json::{to_py, to_value};
use crate::outputs::{self, EventData};

/// The classes of `coxswain._types`, looked up once.
pub(crate) struct Classes {
    message: Py<PyAny>,
    cancel_cause: Py<PyAny>,
    error_info: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

pub(crate) fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("coxswain._types")?;
        let get = |name: &str| module.getattr(name).map(Bound::unbind);
        Ok(Classes {
            message: get("Message")?,
            cancel_cause: get("CancelCause")?,
            error_info: get("ErrorInfo")?,
        })
    })
}

/// What the table keeps for one message the core holds: its Python objects.
struct Held {
    object: Py<PyAny>,
    /// Its event form (`{"id", …fields}`), made once when an event first carries it.
    dict: Option<Py<PyDict>>,
}

/// The Python objects of the messages the core holds (S8: one object per message): the kit's
/// identity table, each message's host key its object's address (a pre-step batch of the
/// objects the core handed out goes back as the core's own messages). A message the core no
/// longer holds (its only owner is this table) is dropped once the table has doubled since its
/// last sweep (amortized O(1) per message).
#[derive(Default)]
pub(crate) struct Messages {
    table: Table<Held>,
}

/// The host key of a Python object: its address (the table holds the object: it stays unique).
fn key(object: &Bound<'_, PyAny>) -> u64 {
    object.as_ptr() as usize as u64
}

impl Messages {
    /// Binds `object` (the caller's `Message`) to the core's `message`: the outputs carrying it
    /// hand back `object`.
    pub(crate) fn bind(&mut self, message: &SharedMessage, object: &Bound<'_, PyAny>) {
        let held = Held {
            object: object.clone().unbind(),
            dict: None,
        };
        self.table.bind(message, key(object), held);
    }

    /// The core's message behind a `Message` object it handed out, if the table holds it.
    pub(crate) fn message_of(&self, object: &Bound<'_, PyAny>) -> Option<SharedMessage> {
        self.table.message(key(object)).cloned()
    }

    /// Drops what the core no longer holds, once the table has doubled since the last sweep.
    pub(crate) fn sweep(&mut self) {
        drop(self.table.sweep());
    }

    /// The `Message` object of `message`: the bound one, else one made now (and bound).
    pub(crate) fn object<'py>(
        &mut self,
        py: Python<'py>,
        classes: &Classes,
        message: &SharedMessage,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(held) = self.table.get(message) {
            return Ok(held.object.bind(py).clone());
        }
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
            classes
                .message
                .bind(py)
                .call1((message.id().as_str(), content, source, extra))?;
        self.bind(message, &object);
        Ok(object)
    }

    /// The event form of `message` (`{"id", …fields}`, as a log record holds it): one dict.
    fn dict<'py>(
        &mut self,
        py: Python<'py>,
        classes: &Classes,
        message: &SharedMessage,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.object(py, classes, message)?;
        if let Some(Held {
            dict: Some(dict), ..
        }) = self.table.get(message)
        {
            return Ok(dict.bind(py).clone());
        }
        let dict = PyDict::new(py);
        dict.set_item(pyo3::intern!(py, "id"), message.id().as_str())?;
        for (key, value) in message.fields() {
            dict.set_item(key, to_py(py, value)?)?;
        }
        if let Some(held) = self.table.get_mut(message) {
            held.dict = Some(dict.clone().unbind());
        }
        Ok(dict)
    }
}

/// The kind of a turn end's reason that has no other field (the hot ones), as the core spells
/// it (`TurnEndKind`).
fn reason_word(reason: &TurnEndReason) -> Option<&'static str> {
    match reason {
        TurnEndReason::Aborted { .. } | TurnEndReason::Error { .. } => None,
        other => Some(other.end_kind().as_str()),
    }
}

/// The core's message for a typed `Message` (`id`, `content`, `source`, `extra`), read from
/// its fields; `None` for anything else (the caller then goes through `to_json()`).
pub(crate) fn message_from(object: &Bound<'_, PyAny>) -> PyResult<Option<Message>> {
    let py = object.py();
    let Ok(class) = classes(py).map(|c| c.message.bind(py).clone()) else {
        return Ok(None);
    };
    if !object.get_type().is(&class) {
        return Ok(None);
    }
    let extra = object.getattr(pyo3::intern!(py, "extra"))?;
    if extra.len().unwrap_or(1) != 0 {
        return Ok(None);
    }
    let id = object.getattr(pyo3::intern!(py, "id"))?;
    let Ok(id) = id.cast::<PyString>() else {
        return Ok(None);
    };
    let mut fields = Map::new();
    fields.insert(
        "source".to_owned(),
        to_value(&object.getattr(pyo3::intern!(py, "source"))?)?,
    );
    fields.insert(
        "content".to_owned(),
        to_value(&object.getattr(pyo3::intern!(py, "content"))?)?,
    );
    Ok(Some(Message::from_fields(
        MessageId::new(crate::json::text(id)?),
        fields,
    )))
}

/// Builds the typed outputs of one input.
pub(crate) struct Builder<'py, 'm> {
    py: Python<'py>,
    classes: &'py Classes,
    messages: &'m mut Messages,
    /// For each output in wire order with each `Begin` where its activity begins (the core's
    /// `into_outputs_with_begin`), whether it is an effect (else an event).
    pub(crate) order: Vec<bool>,
    /// The durable events.
    pub(crate) events: Vec<Bound<'py, PyAny>>,
    /// The effects, `Begin` included.
    pub(crate) effects: Vec<Bound<'py, PyAny>>,
}

impl<'py, 'm> Builder<'py, 'm> {
    pub(crate) fn new(py: Python<'py>, messages: &'m mut Messages) -> PyResult<Self> {
        messages.sweep();
        Ok(Builder {
            py,
            classes: classes(py)?,
            messages,
            order: Vec::with_capacity(16),
            events: Vec::with_capacity(8),
            effects: Vec::with_capacity(8),
        })
    }

    /// One output of the core's wire order with its begins
    /// ([`into_outputs_with_begin`](coxswain_core::Transition::into_outputs_with_begin)).
    pub(crate) fn push(&mut self, output: &Output) -> PyResult<()> {
        match output {
            Output::Event(event) => {
                let object = self.event(event)?;
                self.events.push(object);
                self.order.push(false);
            }
            Output::Effect(effect) => {
                let object = self.effect(effect)?;
                self.effects.push(object);
                self.order.push(true);
            }
        }
        Ok(())
    }

    /// An event: its `data` made on first use (outputs::Event), each message in it its one
    /// event-form dict (S8), fetched now.
    pub(crate) fn event(&mut self, event: &Event) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let data = match event {
            Event::Spliced(splice) => {
                let mut inserted = Vec::with_capacity(splice.inserted.len());
                for message in &splice.inserted {
                    inserted.push(
                        self.messages
                            .dict(py, self.classes, message)?
                            .into_any()
                            .unbind(),
                    );
                }
                Some(EventData::Splice {
                    target: splice.target.as_str(),
                    start: splice.start,
                    removed: splice.removed_count,
                    inserted,
                    canceled: splice.outcome.is_some(),
                    wakeup: splice.wakeup,
                    redelivery: splice.redelivery,
                })
            }
            Event::TurnStart { turn } => Some(EventData::Turn(*turn)),
            Event::StepStart { turn, step } | Event::StepEnd { turn, step } => {
                Some(EventData::Step(*turn, *step))
            }
            Event::TurnEnd { turn, reason } => {
                reason_word(reason).map(|word| EventData::TurnEnd(*turn, word))
            }
            Event::UserMessage(_) => None,
        };
        let kind = match event {
            Event::Spliced(_) => pyo3::intern!(py, "agent/inbox/spliced"),
            Event::TurnStart { .. } => pyo3::intern!(py, "turn/start"),
            Event::StepStart { .. } => pyo3::intern!(py, "step/start"),
            Event::UserMessage(_) => pyo3::intern!(py, "user/message"),
            Event::StepEnd { .. } => pyo3::intern!(py, "step/end"),
            Event::TurnEnd { .. } => pyo3::intern!(py, "turn/end"),
        };
        let kind = kind.clone().into_any().unbind();
        let object = match data {
            Some(lazy) => outputs::Event::lazy(kind, lazy),
            None => {
                let data = match event {
                    Event::UserMessage(message) => {
                        self.messages.dict(py, self.classes, message)?.into_any()
                    }
                    // Rare shapes (reasons with causes and errors): the core's serde writes them.
                    _ => {
                        let value = serde_json::to_value(event)
                            .ok()
                            .and_then(|mut v| v.get_mut("data").map(Value::take))
                            .unwrap_or(Value::Null);
                        to_py(py, &value)?
                    }
                };
                outputs::Event::given(py, kind, data.unbind())
            }
        };
        Ok(Bound::new(py, object)?.into_any())
    }

    /// The object of one effect released by the session layer (`Begin` included), with no
    /// list kept: the asyncio agent carries it out at once.
    pub(crate) fn effect(&mut self, effect: &Effect) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let int = |n: u64| -> PyResult<Py<PyAny>> { Ok(n.into_pyobject(py)?.into_any().unbind()) };
        Ok(match effect {
            Effect::Notify(notification) => self.notification(notification)?,
            Effect::Begin(Activity::Turn(turn)) => Bound::new(
                py,
                outputs::Begin {
                    activity: int(*turn)?,
                },
            )?
            .into_any(),
            Effect::Begin(Activity::Maintenance) => {
                let activity = pyo3::intern!(py, "maintenance").clone().into_any().unbind();
                Bound::new(py, outputs::Begin { activity })?.into_any()
            }
            Effect::Request(request) => self.request(request)?,
            Effect::Abort(abort) => self.abort(abort)?,
            Effect::Disposed => Bound::new(py, outputs::Disposed {})?.into_any(),
        })
    }

    fn notification(&mut self, notification: &Notification) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let int = |n: u64| -> PyResult<Py<PyAny>> { Ok(n.into_pyobject(py)?.into_any().unbind()) };
        Ok(match notification {
            Notification::Inserted { message } => {
                let message = self.message(message)?;
                Bound::new(py, outputs::Inserted { message })?.into_any()
            }
            Notification::Discarded { message } => {
                let message = self.message(message)?;
                Bound::new(py, outputs::Discarded { message })?.into_any()
            }
            Notification::Claimed { message, turn } => {
                let message = self.message(message)?;
                Bound::new(
                    py,
                    outputs::Claimed {
                        message,
                        turn: int(*turn)?,
                    },
                )?
                .into_any()
            }
            Notification::Status { status } => {
                let status = match status {
                    Status::Idle => pyo3::intern!(py, Status::Idle.as_str()),
                    Status::Running => pyo3::intern!(py, Status::Running.as_str()),
                };
                let status = status.clone().into_any().unbind();
                Bound::new(py, outputs::StatusChanged { status })?.into_any()
            }
            Notification::Error { turn, step, error } => {
                let error = self.error(error)?.unbind();
                let failed = outputs::TurnFailed {
                    turn: int(*turn)?,
                    step: int(*step)?,
                    error,
                };
                Bound::new(py, failed)?.into_any()
            }
        })
    }

    fn request(&mut self, request: &Request) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let int = |n: u64| -> PyResult<Py<PyAny>> { Ok(n.into_pyobject(py)?.into_any().unbind()) };
        Ok(match request {
            Request::PreStep {
                turn,
                step,
                messages,
            } => {
                let mut items = Vec::with_capacity(messages.as_slice().len());
                for message in messages.as_slice() {
                    items.push(self.message(message)?);
                }
                let request = outputs::PreStepRequest {
                    turn: int(*turn)?,
                    step: int(*step)?,
                    messages: PyTuple::new(py, items)?.into_any().unbind(),
                };
                Bound::new(py, request)?.into_any()
            }
            Request::Step { turn, step } => {
                let request = outputs::StepRequest {
                    turn: int(*turn)?,
                    step: int(*step)?,
                };
                Bound::new(py, request)?.into_any()
            }
            Request::TurnStopping { turn } => {
                let request = outputs::TurnStoppingRequest { turn: int(*turn)? };
                Bound::new(py, request)?.into_any()
            }
        })
    }

    fn abort(&self, abort: &Abort) -> PyResult<Bound<'py, PyAny>> {
        let cause = self.cause(&abort.cause)?.unbind();
        Ok(Bound::new(self.py, outputs::Abort { cause })?.into_any())
    }

    fn message(&mut self, message: &SharedMessage) -> PyResult<Py<PyAny>> {
        Ok(self
            .messages
            .object(self.py, self.classes, message)?
            .unbind())
    }

    fn error(&self, error: &ErrorInfo) -> PyResult<Bound<'py, PyAny>> {
        let details = PyDict::new(self.py);
        for (key, value) in error.details.iter() {
            details.set_item(key, to_py(self.py, value)?)?;
        }
        self.classes
            .error_info
            .bind(self.py)
            .call1((&*error.message, &*error.code, details))
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
