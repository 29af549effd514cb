//! `coxswain.Transition`: what one accepted input produced, made here in one allocation (a
//! frozen dataclass's `__init__` cost more than the input itself). The drain contract is the
//! Python `Machine`'s: `persisted()` and `into_outputs()` tell it the transition is settled.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyTuple};

use crate::machine::NativeMachine;
use crate::outputs::{frozen, Begin};

/// What one accepted input produced (immutable). `events`: the durable events, one batch;
/// `effects`: what to carry out once they are durable (`Begin` included); `outputs`: every
/// output in wire order (FORMAT.md), for recorders and ports (`wire`: the same as JSON
/// values). `found` is false only for a `remove`/`replace` of an id not pending.
#[pyclass(frozen, module = "coxswain")]
pub(crate) struct Transition {
    #[pyo3(get)]
    found: bool,
    #[pyo3(get)]
    events: Py<PyTuple>,
    #[pyo3(get)]
    effects: Py<PyTuple>,
    /// Every output in wire order: `_ordered` without the begins, made on first use.
    outputs: PyOnceLock<Py<PyTuple>>,
    #[pyo3(get)]
    _machine: Option<Py<PyAny>>,
    /// Every output in wire order with the begins: made on first use from `order`.
    ordered: PyOnceLock<Py<PyTuple>>,
    /// For each output of `ordered`, whether it is the next effect (else the next event).
    order: Box<[bool]>,
}

impl Transition {
    /// A transition of `machine` (the Python `Machine` that settles it; `None`: nothing to
    /// settle): its `events` and `effects`, and for each output in wire order whether it is an
    /// effect.
    pub(crate) fn made<'py>(
        py: Python<'py>,
        found: bool,
        events: Vec<Bound<'py, PyAny>>,
        effects: Vec<Bound<'py, PyAny>>,
        order: Vec<bool>,
        machine: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, Transition>> {
        Bound::new(
            py,
            Transition {
                found,
                events: PyTuple::new(py, events)?.unbind(),
                effects: PyTuple::new(py, effects)?.unbind(),
                outputs: PyOnceLock::new(),
                _machine: machine,
                ordered: PyOnceLock::new(),
                order: order.into_boxed_slice(),
            },
        )
    }

    /// Every output in wire order with each `Begin`.
    fn with_begins<'py>(&self, py: Python<'py>) -> PyResult<&Py<PyTuple>> {
        self.ordered.get_or_try_init(py, || {
            let (events, effects) = (self.events.bind(py), self.effects.bind(py));
            let (mut event, mut effect) = (0, 0);
            let mut outputs = Vec::with_capacity(self.order.len());
            for &is_effect in &self.order {
                let next = if is_effect { &mut effect } else { &mut event };
                let list = if is_effect { effects } else { events };
                outputs.push(list.get_item(*next)?);
                *next += 1;
            }
            Ok(PyTuple::new(py, outputs)?.unbind())
        })
    }

    /// Tells the machine this transition is settled (when it is the one it waits on).
    fn settle(slf: &Bound<'_, Self>) -> PyResult<()> {
        let Some(machine) = &slf.get()._machine else {
            return Ok(());
        };
        let machine = machine.bind(slf.py());
        if let Ok(machine) = machine.cast::<NativeMachine>() {
            let mut machine = machine.try_borrow_mut()?;
            if machine
                .undrained
                .as_ref()
                .is_some_and(|waiting| waiting.as_ptr() == slf.as_ptr())
            {
                machine.undrained = None;
            }
        }
        Ok(())
    }

    /// Every output in wire order.
    fn wire_order<'py>(&self, py: Python<'py>) -> PyResult<&Py<PyTuple>> {
        self.outputs.get_or_try_init(py, || {
            let begin = py.get_type::<Begin>();
            let mut outputs = Vec::new();
            for output in self.with_begins(py)?.bind(py).iter() {
                if !output.is_instance(&begin)? {
                    outputs.push(output);
                }
            }
            Ok(PyTuple::new(py, outputs)?.unbind())
        })
    }
}

#[pymethods]
impl Transition {
    #[new]
    #[pyo3(signature = (found, events, effects, outputs, _machine = None, _ordered = None))]
    fn new(
        py: Python<'_>,
        found: bool,
        events: Py<PyTuple>,
        effects: Py<PyTuple>,
        outputs: Py<PyTuple>,
        _machine: Option<Py<PyAny>>,
        _ordered: Option<Py<PyTuple>>,
    ) -> Self {
        let ordered = _ordered.unwrap_or_else(|| outputs.clone_ref(py));
        let given = |tuple: Py<PyTuple>| {
            let lock = PyOnceLock::new();
            let _ = lock.get_or_init(py, || tuple);
            lock
        };
        Transition {
            found,
            events,
            effects,
            outputs: given(outputs),
            _machine,
            ordered: given(ordered),
            order: Box::new([]),
        }
    }

    /// Every output in wire order with each `Begin` (`into_outputs(begin=True)`).
    #[getter]
    fn _ordered(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(self.with_begins(py)?.clone_ref(py))
    }

    /// Every output in wire order (FORMAT.md).
    #[getter]
    fn outputs(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(self.wire_order(py)?.clone_ref(py))
    }

    /// The host's word that `events` are durable: settles the transition and returns the
    /// effects, in order.
    fn persisted(slf: &Bound<'_, Self>) -> PyResult<Py<PyTuple>> {
        Transition::settle(slf)?;
        Ok(slf.get().effects.clone_ref(slf.py()))
    }

    /// Settles the transition (persisting nothing: for recorders and ports) and returns every
    /// output in wire order; with `begin=True` also each `Begin` where its activity begins
    /// (right after a turn's `turn/start`, first for a maintenance job), for a harness that
    /// reads the wire order and scopes its cancellation by activity (FORMAT.md's traces hold no
    /// `Begin`).
    #[pyo3(signature = (*, begin = false))]
    fn into_outputs(slf: &Bound<'_, Self>, begin: bool) -> PyResult<Py<PyTuple>> {
        Transition::settle(slf)?;
        let this = slf.get();
        if begin {
            return Ok(this.with_begins(slf.py())?.clone_ref(slf.py()));
        }
        Ok(this.wire_order(slf.py())?.clone_ref(slf.py()))
    }

    /// Every output as a trace `"out"` value, in wire order.
    #[getter]
    fn wire<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut values = Vec::new();
        for output in self.wire_order(py)?.bind(py).iter() {
            values.push(output.call_method0("to_json")?);
        }
        PyTuple::new(py, values)
    }

    /// Whether the input produced no output at all.
    fn is_empty(&self, py: Python<'_>) -> bool {
        self.events.bind(py).is_empty() && self.effects.bind(py).is_empty()
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Transition>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let equal = self.found == other.found
            && self.events.bind(py).eq(other.events.bind(py))?
            && self.effects.bind(py).eq(other.effects.bind(py))?
            && self
                .wire_order(py)?
                .bind(py)
                .eq(other.wire_order(py)?.bind(py))?;
        Ok(PyBool::new(py, equal).to_owned().into_any().unbind())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Transition(found={}, events={}, effects={}, outputs={})",
            if self.found { "True" } else { "False" },
            self.events.bind(py).repr()?,
            self.effects.bind(py).repr()?,
            self.wire_order(py)?.bind(py).repr()?,
        ))
    }

    fn __setattr__(&self, py: Python<'_>, name: &str, _value: Py<PyAny>) -> PyResult<()> {
        Err(frozen(py, "Transition", name))
    }

    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(frozen(py, "Transition", name))
    }
}
