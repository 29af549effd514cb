//! The typed outputs (`coxswain.Event`, `coxswain.Inserted`, …): frozen classes made here, so an
//! output costs one allocation instead of a dataclass's Python-level `__init__` (a tenth of
//! its time). Each behaves as the frozen dataclass it replaces: positional and keyword
//! construction, read-only fields, `==` and `hash` by fields, a dataclass `repr`,
//! `__match_args__` for `match`, and `to_json()` (the trace `"out"` value).

use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// The name of a class's field the dataclass it replaces raises `FrozenInstanceError` for.
pub(crate) fn frozen(py: Python<'_>, class: &str, name: &str) -> PyErr {
    let message = format!("cannot assign to field '{name}' of {class}");
    py.import("dataclasses")
        .and_then(|module| module.getattr("FrozenInstanceError"))
        .and_then(|class| class.call1((message.clone(),)))
        .map(PyErr::from_value)
        .unwrap_or_else(|_| PyAttributeError::new_err(message))
}

/// One output class: its fields (each a Python value), and the body of its `to_json`.
macro_rules! output {
    (
        $(#[$doc:meta])*
        $name:ident [$($field:ident $(= $pyname:literal)?),*]
        fn to_json(&$this:ident, $py:ident) $body:block
        $($extra:tt)*
    ) => {
        $(#[$doc])*
        #[pyclass(frozen, module = "coxswain")]
        pub(crate) struct $name {
            $(
                #[pyo3(get $(, name = $pyname)?)]
                pub(crate) $field: Py<PyAny>,
            )*
        }

        #[pymethods]
        impl $name {
            #[new]
            #[allow(clippy::too_many_arguments)]
            fn new($($field: Py<PyAny>),*) -> Self {
                $name { $($field),* }
            }

            #[classattr]
            fn __match_args__(py: Python<'_>) -> PyResult<Py<PyTuple>> {
                let names: &[&str] = &[$(output!(@name $field $($pyname)?)),*];
                Ok(PyTuple::new(py, names)?.unbind())
            }

            #[allow(unused_mut)]
            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                let Ok(other) = other.cast::<$name>() else {
                    return Ok(py.NotImplemented());
                };
                let _other = other.get();
                let mut equal = true;
                $(
                    equal = equal && self.$field.bind(py).eq(_other.$field.bind(py))?;
                )*
                Ok(pyo3::types::PyBool::new(py, equal).to_owned().into_any().unbind())
            }

            fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
                let fields: Vec<&Py<PyAny>> = vec![$(&self.$field),*];
                PyTuple::new(py, fields)?.hash()
            }

            #[allow(unused_mut, unused_variables)]
            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let mut parts: Vec<String> = Vec::new();
                $(
                    parts.push(format!(
                        "{}={}",
                        output!(@name $field $($pyname)?),
                        self.$field.bind(py).repr()?
                    ));
                )*
                Ok(format!("{}({})", stringify!($name), parts.join(", ")))
            }

            fn __setattr__(&self, py: Python<'_>, name: &str, _value: Py<PyAny>) -> PyResult<()> {
                Err(frozen(py, stringify!($name), name))
            }

            fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
                Err(frozen(py, stringify!($name), name))
            }

            /// The trace `"out"` value.
            fn to_json<'py>(&$this, $py: Python<'py>) -> PyResult<Bound<'py, PyDict>> $body

            $($extra)*
        }
    };
    (@name $field:ident $pyname:literal) => { $pyname };
    (@name $field:ident) => { stringify!($field) };
}

/// `{outer: {type: kind, ...fields}}`.
fn notify<'py>(
    py: Python<'py>,
    kind: &str,
    fields: &[(&str, Bound<'py, PyAny>)],
) -> PyResult<Bound<'py, PyDict>> {
    let body = PyDict::new(py);
    body.set_item("type", kind)?;
    for (key, value) in fields {
        body.set_item(*key, value)?;
    }
    wrap(py, "notify", body.into_any())
}

/// `{key: value}`.
fn wrap<'py>(py: Python<'py>, key: &str, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let outer = PyDict::new(py);
    outer.set_item(key, value)?;
    Ok(outer)
}

/// `value.to_json()`.
fn json_of<'py>(py: Python<'py>, value: &Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
    value.bind(py).call_method0("to_json")
}

/// A durable event `{type, data}`: append it to the session's log before acting on the
/// transition's effects. Its `data` is made on first use (most hosts hand the event to a log
/// and never read it): the same dict at every read, equal to the one made at once.
#[pyclass(frozen, module = "coxswain")]
pub(crate) struct Event {
    #[pyo3(get, name = "type")]
    pub(crate) r#type: Py<PyAny>,
    data: PyOnceLock<Py<PyAny>>,
    /// What `data` is made from when it was not given.
    lazy: Option<EventData>,
}

/// The data of an event, held as numbers and the messages' shared dicts until it is read.
pub(crate) enum EventData {
    /// `{turn}` (`turn/start`).
    Turn(u64),
    /// `{turn, step}` (`step/start`, `step/end`).
    Step(u64, u64),
    /// `{turn, reason: {kind}}` (a `turn/end` whose reason is a word).
    TurnEnd(u64, &'static str),
    /// `{target, start, removedCount?, inserted, outcome?, wakeup?, redelivery?}`
    /// (`agent/inbox/spliced`): `inserted` holds each message's one event-form dict (S8).
    Splice {
        /// `next-turn` or `next-step`.
        target: &'static str,
        /// Where the splice starts.
        start: usize,
        /// How many items it removed (written when above 0).
        removed: usize,
        /// The inserted messages' event-form dicts.
        inserted: Vec<Py<PyAny>>,
        /// Whether the removal was a cancel's (`outcome: "canceled"`).
        canceled: bool,
        /// Whether it woke the machine.
        wakeup: bool,
        /// The redelivery count `r` of a splice crash repair appended to redeliver a message
        /// (S59); `None` for every other splice.
        redelivery: Option<u64>,
    },
}

impl Event {
    /// An event of type `kind` whose data is made from `lazy` on first use.
    pub(crate) fn lazy(kind: Py<PyAny>, lazy: EventData) -> Self {
        Event {
            r#type: kind,
            data: PyOnceLock::new(),
            lazy: Some(lazy),
        }
    }

    /// An event of type `kind` with its `data` made already.
    pub(crate) fn given(py: Python<'_>, kind: Py<PyAny>, data: Py<PyAny>) -> Self {
        let given = PyOnceLock::new();
        let _ = given.get_or_init(py, || data);
        Event {
            r#type: kind,
            data: given,
            lazy: None,
        }
    }

    /// The data, made now if it was not yet.
    fn data_of<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyAny>> {
        let data = self.data.get_or_try_init(py, || match &self.lazy {
            Some(lazy) => lazy.make(py).map(Bound::unbind),
            None => Ok(py.None()),
        })?;
        Ok(data.bind(py))
    }
}

impl EventData {
    fn make<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let data = PyDict::new(py);
        match self {
            EventData::Turn(turn) => data.set_item(pyo3::intern!(py, "turn"), turn)?,
            EventData::Step(turn, step) => {
                data.set_item(pyo3::intern!(py, "turn"), turn)?;
                data.set_item(pyo3::intern!(py, "step"), step)?;
            }
            EventData::TurnEnd(turn, kind) => {
                let reason = PyDict::new(py);
                reason.set_item(pyo3::intern!(py, "kind"), PyString::intern(py, kind))?;
                data.set_item(pyo3::intern!(py, "turn"), turn)?;
                data.set_item(pyo3::intern!(py, "reason"), reason)?;
            }
            EventData::Splice {
                target,
                start,
                removed,
                inserted,
                canceled,
                wakeup,
                redelivery,
            } => {
                data.set_item(pyo3::intern!(py, "target"), PyString::intern(py, target))?;
                data.set_item(pyo3::intern!(py, "start"), start)?;
                if *removed > 0 {
                    data.set_item(pyo3::intern!(py, "removedCount"), removed)?;
                }
                let list = PyList::new(py, inserted.iter().map(|dict| dict.bind(py)))?;
                data.set_item(pyo3::intern!(py, "inserted"), list)?;
                if *canceled {
                    data.set_item(pyo3::intern!(py, "outcome"), pyo3::intern!(py, "canceled"))?;
                }
                if *wakeup {
                    data.set_item(pyo3::intern!(py, "wakeup"), true)?;
                }
                if let Some(count) = redelivery {
                    data.set_item(pyo3::intern!(py, "redelivery"), count)?;
                }
            }
        }
        Ok(data.into_any())
    }
}

#[pymethods]
impl Event {
    #[new]
    fn new(py: Python<'_>, r#type: Py<PyAny>, data: Py<PyAny>) -> Self {
        Event::given(py, r#type, data)
    }

    /// The event's data (a dict for every event the core makes).
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.data_of(py).cloned()
    }

    #[classattr]
    fn __match_args__(py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(PyTuple::new(py, ["type", "data"])?.unbind())
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Event>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let equal = self.r#type.bind(py).eq(other.r#type.bind(py))?
            && self.data_of(py)?.eq(other.data_of(py)?)?;
        Ok(pyo3::types::PyBool::new(py, equal)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(py, [self.r#type.bind(py), self.data_of(py)?])?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Event(type={}, data={})",
            self.r#type.bind(py).repr()?,
            self.data_of(py)?.repr()?
        ))
    }

    fn __setattr__(&self, py: Python<'_>, name: &str, _value: Py<PyAny>) -> PyResult<()> {
        Err(frozen(py, "Event", name))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen(py, "Event", name))
    }

    /// The trace `"out"` value.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        wrap(py, "event", self.record(py)?.into_any())
    }

    /// The log record `{type, data}`.
    fn record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let record = PyDict::new(py);
        record.set_item("type", self.r#type.bind(py))?;
        record.set_item("data", self.data_of(py)?)?;
        Ok(record)
    }
}

output! {
    /// Notification: a message joined a pending list.
    Inserted [message]
    fn to_json(&self, py) {
        notify(py, "agent/inbox/inserted", &[("message", json_of(py, &self.message)?)])
    }
}

output! {
    /// Notification: a pending message was removed by an ordinary removal (S12).
    Discarded [message]
    fn to_json(&self, py) {
        notify(py, "agent/inbox/discarded", &[("message", json_of(py, &self.message)?)])
    }
}

output! {
    /// Notification: a pending message was claimed by a turn (S28).
    Claimed [message, turn]
    fn to_json(&self, py) {
        notify(py, "agent/inbox/claimed", &[
            ("message", json_of(py, &self.message)?),
            ("turn", self.turn.bind(py).clone()),
        ])
    }
}

output! {
    /// Notification: the public status changed (S23).
    StatusChanged [status]
    fn to_json(&self, py) {
        notify(py, "agent/status", &[("status", self.status.bind(py).clone())])
    }
}

output! {
    /// Notification `agent/error`: a turn failed (S38).
    TurnFailed [turn, step, error]
    fn to_json(&self, py) {
        notify(py, "agent/error", &[
            ("turn", self.turn.bind(py).clone()),
            ("step", self.step.bind(py).clone()),
            ("error", json_of(py, &self.error)?),
        ])
    }
}

output! {
    /// Request: decide the step for the claimed batch (S29); answer with a `PreStepAnswer`.
    PreStepRequest [turn, step, messages]
    fn to_json(&self, py) {
        let body = PyDict::new(py);
        body.set_item("turn", self.turn.bind(py))?;
        body.set_item("step", self.step.bind(py))?;
        let messages = PyList::empty(py);
        for message in self.messages.bind(py).try_iter()? {
            messages.append(message?.call_method0("to_json")?)?;
        }
        body.set_item("messages", messages)?;
        wrap(py, "request", wrap(py, "preStep", body.into_any())?.into_any())
    }
}

output! {
    /// Request: run the step (S32); answer with a `StepAnswer`.
    StepRequest [turn, step]
    fn to_json(&self, py) {
        let body = PyDict::new(py);
        body.set_item("turn", self.turn.bind(py))?;
        body.set_item("step", self.step.bind(py))?;
        wrap(py, "request", wrap(py, "step", body.into_any())?.into_any())
    }
}

output! {
    /// Request: run the turn-stopping hooks (S33); answer with a `TurnStoppingAnswer`.
    TurnStoppingRequest [turn]
    fn to_json(&self, py) {
        let body = PyDict::new(py);
        body.set_item("turn", self.turn.bind(py))?;
        wrap(py, "request", wrap(py, "turnStopping", body.into_any())?.into_any())
    }
}

output! {
    /// Stop the current activity's in-flight work (S39). Never answered: the outstanding
    /// request must still be answered (S40).
    Abort [cause]
    fn to_json(&self, py) {
        let body = PyDict::new(py);
        body.set_item("cause", json_of(py, &self.cause)?)?;
        wrap(py, "request", wrap(py, "abort", body.into_any())?.into_any())
    }
}

output! {
    /// The machine is disposed (S45): the last output it ever emits.
    Disposed []
    fn to_json(&self, py) {
        wrap(py, "disposed", PyDict::new(py).into_any())
    }
}

output! {
    /// Effect only (not on the wire): an activity begins, make its cancellation scope now
    /// (S39, S42). `activity` is the turn number, or `"maintenance"`.
    Begin [activity]
    fn to_json(&self, py) {
        let body = PyDict::new(py);
        let activity = self.activity.bind(py);
        if activity.extract::<String>().is_ok() {
            body.set_item("maintenance", PyDict::new(py))?;
        } else {
            body.set_item("turn", activity)?;
        }
        wrap(py, "begin", body.into_any())
    }
}

output! {
    /// `preStep` answer: enter the step with these messages (S30). Made here, as the outputs
    /// are: a harness makes one per step.
    Enter [messages]
    fn to_json(&self, py) {
        let messages = PyList::empty(py);
        for message in self.messages.bind(py).try_iter()? {
            messages.append(message?.call_method0("to_json")?)?;
        }
        wrap(py, "enter", messages.into_any())
    }
}

/// Adds the output classes to the module.
pub(crate) fn add(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Event>()?;
    module.add_class::<Inserted>()?;
    module.add_class::<Discarded>()?;
    module.add_class::<Claimed>()?;
    module.add_class::<StatusChanged>()?;
    module.add_class::<TurnFailed>()?;
    module.add_class::<PreStepRequest>()?;
    module.add_class::<StepRequest>()?;
    module.add_class::<TurnStoppingRequest>()?;
    module.add_class::<Abort>()?;
    module.add_class::<Disposed>()?;
    module.add_class::<Begin>()?;
    module.add_class::<Enter>()?;
    Ok(())
}
