//! `coxswain._native`: the Rust side of the Python binding.
//!
//! It translates and decides nothing: [`machine`] feeds the core JSON inputs and hands back its
//! outputs in wire order, [`session`] is the session layer (`coxswain-session`) the asyncio
//! agent drives (group commit with rollback, admission, the abort grace, the host-failure codes),
//! [`log`] exposes `coxswain-log`'s record format (encode, read back, restore with crash repair
//! through the session layer's `ResumePlan`), [`filelog`] the one file log every runtime writes
//! (`coxswain-file-log`, its IO with the GIL released), [`failure`] the session layer's
//! host-failure codes.
//! The typed API, the asyncio driver (an IO loop over [`session`]) and the port are Python
//! (`python/coxswain`).
#![forbid(unsafe_code)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The extension's allocator: mimalloc (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod errors;
mod failure;
#[cfg(feature = "faults")]
mod faults;
mod filelog;
mod json;
mod log;
mod machine;
mod outputs;
mod session;
mod transition;
mod typed;

use pyo3::prelude::*;

/// The module `coxswain._native`.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<machine::NativeMachine>()?;
    module.add_class::<filelog::NativeFileLog>()?;
    module.add_class::<session::NativeSession>()?;
    module.add_class::<transition::Transition>()?;
    outputs::add(module)?;
    module.add_function(wrap_pyfunction!(log::encode_records, module)?)?;
    module.add_function(wrap_pyfunction!(log::parse_log, module)?)?;
    module.add_function(wrap_pyfunction!(log::open_log, module)?)?;
    module.add_function(wrap_pyfunction!(log::resume_log, module)?)?;
    module.add_function(wrap_pyfunction!(log::repair_log, module)?)?;
    module.add_function(wrap_pyfunction!(log::check_redelivery, module)?)?;
    module.add_function(wrap_pyfunction!(log::check_message_json, module)?)?;
    module.add_function(wrap_pyfunction!(failure::host_failure, module)?)?;
    module.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    // The longest log line a reader takes (`coxswain_log::MAX_LINE_BYTES`): `FileLog` stops a
    // longer one as it reads, as the Rust logs do.
    module.add("MAX_LINE_BYTES", coxswain_log::MAX_LINE_BYTES)?;
    // The delivery memory's capacity that never forgets an id (S58's `unbounded`): the core's
    // `Config::UNBOUNDED_DELIVERY_MEMORY`, which `delivery_memory="unbounded"` stands for.
    module.add(
        "UNBOUNDED_MEMORY",
        coxswain_core::Config::UNBOUNDED_DELIVERY_MEMORY,
    )?;
    // The largest redelivery allowance (S59): the session layer's bound.
    module.add("MAX_REDELIVERY", coxswain_session::MAX_REDELIVERY)?;
    Ok(())
}
