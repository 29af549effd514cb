//! A host's plain numbers to the core's [`Config`], the session's [`ResumeOptions`] and its
//! [`Options`]: one function each, one set of error texts ([`OptionError`]). The defaults are the
//! session layer's ([`Options::DEFAULT`]), never a binding's own.

use std::fmt::Display;
use std::num::NonZeroUsize;
use std::time::Duration;

use coxswain_core::Config;
use coxswain_session::{Limits, Options, ResumeOptions, MAX_REDELIVERY};

/// A host's option the bindings refuse, before anything is read or written; its text names the
/// option and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// The admission bound (S55) is 0: at least 1, or none at all.
    #[error("max_pending is at least 1 (S55)")]
    MaxPendingZero,
    /// A redelivery allowance below 0 (S59).
    #[error("the redelivery allowance {0} is negative (S59)")]
    RedeliveryNegative(String),
    /// A redelivery allowance above [`MAX_REDELIVERY`] (S59): the session layer's own text.
    #[error("{0}")]
    RedeliveryTooLarge(String),
    /// A time that is no number of seconds at least 0 (negative, NaN or infinite).
    #[error("{name} is a number of seconds, at least 0: {value}")]
    Seconds {
        /// The option (`abort_grace`, `retry_after`).
        name: &'static str,
        /// The value given, as the host showed it.
        value: String,
    },
}

/// How many ids the delivery memory holds (S51), or that it never forgets one (S58's
/// `unbounded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// At most this many ids (0: plain S9).
    Ids(usize),
    /// Every id, for ever.
    Unbounded,
}

/// The core's [`Config`] of a host: its delivery memory (S51, S58), its admission bound
/// `max_pending` (S55; `None`: unbounded; `Some(0)` is refused) and the id indexes'
/// `hash_seed` (a driver draws a random one: HashDoS).
///
/// ```
/// use coxswain_binding_kit::options::{config, Memory};
///
/// let made = config(Memory::Ids(8), Some(2), 7)?;
/// assert_eq!((made.delivery_memory, made.hash_seed), (8, 7));
/// assert_eq!(made.max_pending.map(|n| n.get()), Some(2));
/// let refused = config(Memory::Unbounded, Some(0), 0).unwrap_err();
/// assert_eq!(refused.to_string(), "max_pending is at least 1 (S55)");
/// # Ok::<(), coxswain_binding_kit::OptionError>(())
/// ```
pub fn config(
    memory: Memory,
    max_pending: Option<usize>,
    hash_seed: u64,
) -> Result<Config, OptionError> {
    let config = match memory {
        Memory::Ids(ids) => Config::new().with_delivery_memory(ids),
        Memory::Unbounded => Config::new().with_unbounded_delivery_memory(),
    }
    .with_hash_seed(hash_seed);
    match max_pending {
        None => Ok(config),
        Some(limit) => NonZeroUsize::new(limit)
            .map(|limit| config.with_max_pending(limit))
            .ok_or(OptionError::MaxPendingZero),
    }
}

/// The redelivery allowance `A` of crash repair (S59) a host gave, checked by the session
/// layer's one owner of its bound ([`ResumeOptions::try_with_redelivery`], [`MAX_REDELIVERY`]):
/// from 0 to 1000, else refused naming it.
///
/// ```
/// use coxswain_binding_kit::options::redelivery;
///
/// assert_eq!(redelivery(3), Ok(3));
/// assert_eq!(redelivery(-1).unwrap_err().to_string(), "the redelivery allowance -1 is negative (S59)");
/// assert_eq!(redelivery(1001).unwrap_err().to_string(), "the redelivery allowance 1001 is above 1000 (S59)");
/// ```
pub fn redelivery(value: i128) -> Result<u64, OptionError> {
    redelivery_shown(value, value)
}

/// [`redelivery`] of an integer the host shows as `shown` (one too large for an `i128`: pass
/// `i128::MIN` or `i128::MAX` by its sign, and its own digits as `shown`).
pub fn redelivery_shown(value: i128, shown: impl Display) -> Result<u64, OptionError> {
    if value < 0 {
        return Err(OptionError::RedeliveryNegative(shown.to_string()));
    }
    let Ok(allowance) = u64::try_from(value) else {
        return Err(OptionError::RedeliveryTooLarge(format!(
            "the redelivery allowance {shown} is above {MAX_REDELIVERY} (S59)"
        )));
    };
    ResumeOptions::default()
        .try_with_redelivery(allowance)
        .map(|options| options.redelivery)
        .map_err(|refused| OptionError::RedeliveryTooLarge(refused.to_string()))
}

/// The resume options of a host: its `config` and the redelivery allowance `redelivery`
/// (checked as [`redelivery`] checks it).
pub fn resume_options(config: Config, redelivery: i128) -> Result<ResumeOptions, OptionError> {
    let allowance = self::redelivery(redelivery)?;
    ResumeOptions::from(config)
        .try_with_redelivery(allowance)
        .map_err(|refused| OptionError::RedeliveryTooLarge(refused.to_string()))
}

/// The session's [`Options`]: each one absent is the session layer's default
/// ([`Options::DEFAULT`]: abort grace 5 s, retry pause 100 ms, the admission limits).
///
/// ```
/// use std::time::Duration;
/// use coxswain_binding_kit::options::session_options;
/// use coxswain_session::Options;
///
/// assert_eq!(session_options(None, None, None, None), Options::DEFAULT);
/// let options = session_options(None, Some(Duration::ZERO), Some(8), None);
/// assert_eq!((options.retry_after, options.limits.max_id_bytes), (Duration::ZERO, 8));
/// assert_eq!(options.abort_grace, Options::DEFAULT.abort_grace);
/// ```
pub fn session_options(
    abort_grace: Option<Duration>,
    retry_after: Option<Duration>,
    max_id_bytes: Option<usize>,
    max_message_bytes: Option<usize>,
) -> Options {
    let default = Options::DEFAULT;
    Options {
        abort_grace: abort_grace.unwrap_or(default.abort_grace),
        retry_after: retry_after.unwrap_or(default.retry_after),
        limits: Limits {
            max_id_bytes: max_id_bytes.unwrap_or(default.limits.max_id_bytes),
            max_message_bytes: max_message_bytes.unwrap_or(default.limits.max_message_bytes),
        },
        ..default
    }
}

/// A time of `seconds` (`name` the option's): refused when negative, NaN or infinite.
///
/// ```
/// use std::time::Duration;
/// use coxswain_binding_kit::options::seconds;
///
/// assert_eq!(seconds("retry_after", 0.25), Ok(Duration::from_millis(250)));
/// let refused = seconds("abort_grace", -1.0).unwrap_err();
/// assert_eq!(refused.to_string(), "abort_grace is a number of seconds, at least 0: -1");
/// ```
pub fn seconds(name: &'static str, seconds: f64) -> Result<Duration, OptionError> {
    Duration::try_from_secs_f64(seconds).map_err(|_| OptionError::Seconds {
        name,
        value: seconds.to_string(),
    })
}

/// Milliseconds of a host's clock (JavaScript's) as a [`Duration`], never refused: negative or
/// NaN is 0, too large or infinite is the largest (an infinite grace: never).
///
/// ```
/// use std::time::Duration;
/// use coxswain_binding_kit::options::saturating_millis;
///
/// assert_eq!(saturating_millis(1500.0), Duration::from_millis(1500));
/// assert_eq!(saturating_millis(-3.0), Duration::ZERO);
/// assert_eq!(saturating_millis(f64::NAN), Duration::ZERO);
/// assert_eq!(saturating_millis(f64::INFINITY), Duration::MAX);
/// ```
pub fn saturating_millis(ms: f64) -> Duration {
    if ms.is_nan() || ms <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX)
}

/// Seconds of a host's clock (Python's `loop.time()`) as a [`Duration`], never refused, as
/// [`saturating_millis`].
pub fn saturating_seconds(seconds: f64) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_from_plain_numbers() {
        let config = config(Memory::Unbounded, None, 1).unwrap();
        assert_eq!(config.max_pending, None);
        assert_eq!(
            config,
            Config::new()
                .with_unbounded_delivery_memory()
                .with_hash_seed(1)
        );
        assert_eq!(
            super::config(Memory::Ids(3), Some(0), 0),
            Err(OptionError::MaxPendingZero)
        );
    }

    #[test]
    fn every_allowance_refusal_names_the_value() {
        assert_eq!(redelivery(0), Ok(0));
        assert_eq!(redelivery(1000), Ok(1000));
        let text = |value: i128| redelivery(value).unwrap_err().to_string();
        assert_eq!(
            text(1001),
            "the redelivery allowance 1001 is above 1000 (S59)"
        );
        assert_eq!(
            text(i128::from(u64::MAX) + 1),
            "the redelivery allowance 18446744073709551616 is above 1000 (S59)"
        );
        assert_eq!(
            text(-(1 << 70)),
            "the redelivery allowance -1180591620717411303424 is negative (S59)"
        );
        let huge = redelivery_shown(i128::MAX, "1e40").unwrap_err().to_string();
        assert_eq!(huge, "the redelivery allowance 1e40 is above 1000 (S59)");
        let options = resume_options(Config::new(), 2).unwrap();
        assert_eq!(options.redelivery, 2);
        assert!(resume_options(Config::new(), 1001).is_err());
    }

    #[test]
    fn times_are_refused_or_saturate() {
        for bad in [f64::NAN, f64::INFINITY, -0.5] {
            assert!(seconds("retry_after", bad).is_err(), "{bad}");
        }
        assert_eq!(
            seconds("retry_after", f64::INFINITY)
                .unwrap_err()
                .to_string(),
            "retry_after is a number of seconds, at least 0: inf"
        );
        assert_eq!(saturating_seconds(2.0), Duration::from_secs(2));
        assert_eq!(saturating_seconds(-2.0), Duration::ZERO);
        assert_eq!(saturating_seconds(f64::INFINITY), Duration::MAX);
    }
}
