//! [`Bound`]: JavaScript functions bound to one core (a machine's or a session's), the hot path
//! of a binding. Each is a plain N-API function over a Rust closure that holds the core: no
//! `External` argument to look up, none of the per-call borrow tracking of a `#[napi]`
//! function's glue (about 1,750 instructions a call, where a bound function takes about 300).

use std::cell::RefCell;
use std::rc::Rc;

use napi::bindgen_prelude::{FunctionCallContext, Object, ToNapiValue};
use napi::Env;

/// An object being filled with functions bound to `core`.
pub(crate) struct Bound<'env, C> {
    env: &'env Env,
    object: Object<'env>,
    core: Rc<RefCell<C>>,
}

impl<'env, C: 'static> Bound<'env, C> {
    /// An empty object whose functions will be bound to `core`.
    pub(crate) fn new(env: &'env Env, core: &Rc<RefCell<C>>) -> napi::Result<Self> {
        Ok(Bound {
            env,
            object: Object::new(env)?,
            core: Rc::clone(core),
        })
    }

    /// Adds the function `name`: `body` with the core (borrowed for the call) and the call's
    /// arguments. A call while the core is borrowed (none can be: nothing here calls back into
    /// JavaScript) throws instead of panicking.
    pub(crate) fn bind<R, F>(&mut self, name: &str, body: F) -> napi::Result<()>
    where
        R: ToNapiValue,
        F: 'static + Fn(&mut C, &FunctionCallContext<'_>) -> napi::Result<R>,
    {
        let core = Rc::clone(&self.core);
        let function = self
            .env
            .create_function_from_closure::<(), R, _>(name, move |call| {
                let mut core = core.try_borrow_mut().map_err(|_| {
                    napi::Error::from_reason("the core is in use (a reentrant call)")
                })?;
                body(&mut core, &call)
            })?;
        self.object.set(name, function)
    }

    /// The object, with every function bound.
    pub(crate) fn into_object(self) -> Object<'env> {
        self.object
    }
}
