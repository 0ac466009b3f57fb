//! A probe's `confirm:` setting: how the daemon re-runs a failed (probe, target) pair before
//! its next scheduled run, so a target that is really down is known to be down within seconds
//! at any cadence, and one failed run is not mistaken for an outage.
//!
//! `confirm: {runs: 2, after: 20s}` (the default) re-runs a failed pair 20 s after it failed,
//! and again 20 s after that if it failed again: up to `runs` confirmation runs, stopping at the
//! first success. `confirm: off` (or `runs: 0`) turns it off.

use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;

use super::duration::Dur;
use super::{ConfigError, FieldPath, Source};

/// The most confirmation runs a probe may ask for: more only adds load on a target that is down.
const MOST_RUNS: i64 = 10;

/// How a failed pair is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirm {
    /// Confirmation runs after a failed run (0: none).
    pub runs: u32,
    /// The wait from a failed run's end to its confirmation.
    pub after: Duration,
}

impl Default for Confirm {
    fn default() -> Confirm {
        Confirm {
            runs: 2,
            after: Duration::from_secs(20),
        }
    }
}

impl Confirm {
    pub const OFF: Confirm = Confirm {
        runs: 0,
        after: Duration::ZERO,
    };

    pub fn is_on(&self) -> bool {
        self.runs > 0
    }
}

/// `confirm:` as written: `off`, or a map of `runs` and `after`.
#[derive(Debug)]
pub(crate) enum RawConfirm {
    Off,
    Map(RawConfirmMap),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfirmMap {
    pub runs: Option<Spanned<i64>>,
    pub after: Option<Dur>,
}

impl<'de> Deserialize<'de> for RawConfirm {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawConfirm;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`off` or a map of `runs` and `after`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawConfirm, E> {
                match v {
                    "off" => Ok(RawConfirm::Off),
                    other => Err(E::custom(format!(
                        "expected `off` or a map of `runs` and `after` (e.g. {{runs: 2, after: 20s}}), found {other:?}"
                    ))),
                }
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<RawConfirm, E> {
                // YAML 1.1 readers turn a bare `off` into false.
                if v {
                    Err(E::custom(
                        "expected `off` or a map of `runs` and `after` (e.g. {runs: 2, after: 20s}), found true",
                    ))
                } else {
                    Ok(RawConfirm::Off)
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawConfirm, A::Error> {
                RawConfirmMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawConfirm::Map)
            }
        }
        d.deserialize_any(V)
    }
}

/// The probe's confirmation setting; the default when `confirm:` is absent, and for the keys
/// a map leaves out.
pub(super) fn load(
    src: &Source,
    at: &FieldPath,
    raw: Option<RawConfirm>,
) -> Result<Confirm, ConfigError> {
    let map = match raw {
        None => return Ok(Confirm::default()),
        Some(RawConfirm::Off) => return Ok(Confirm::OFF),
        Some(RawConfirm::Map(m)) => m,
    };
    let runs = match &map.runs {
        Some(r) if !(0..=MOST_RUNS).contains(&r.value) => {
            return Err(src.err(
                &at.key("runs"),
                r.referenced,
                format!("runs must be between 0 and {MOST_RUNS}, found {}", r.value),
            ))
        }
        Some(r) => r.value as u32,
        None => Confirm::default().runs,
    };
    if runs == 0 {
        return Ok(Confirm::OFF);
    }
    Ok(Confirm {
        runs,
        after: map.after.map_or(Confirm::default().after, |d| d.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        confirm: Option<RawConfirm>,
    }

    fn load_text(text: &str) -> Result<Confirm, ConfigError> {
        let src = Source {
            path: std::path::Path::new("p.yaml"),
            text,
        };
        let doc: Doc = src.parse()?;
        load(&src, &FieldPath::root().key("confirm"), doc.confirm)
    }

    #[test]
    fn on_by_default_off_by_word_or_zero_runs_and_partial_maps_keep_the_rest() {
        let s = Duration::from_secs;
        let c = |runs, after| Confirm {
            runs,
            after: s(after),
        };
        for (text, want) in [
            ("confirm: null", c(2, 20)),
            ("confirm: off", Confirm::OFF),
            ("confirm: \"off\"", Confirm::OFF),
            ("confirm: {runs: 0, after: 5s}", Confirm::OFF),
            ("confirm: {runs: 1}", c(1, 20)),
            ("confirm: {after: 5s}", c(2, 5)),
            ("confirm: {runs: 3, after: 1m}", c(3, 60)),
        ] {
            assert_eq!(load_text(text).unwrap(), want, "{text}");
        }
        assert!(load_text("confirm: {runs: -1}").is_err());
        assert!(load_text("confirm: on").is_err());
    }
}
