//! A target's `priority:`: the word or number written, read per server kind into the value its
//! requests carry, in the direction that server schedules.

use serde_saphyr::Spanned;

use super::raw::RawPriority;
use super::{ConfigError, FieldPath, ServerKind, Source};

/// What `lowest` and `highest` send, as a distance from the servers' default of 0. Any user
/// tier seen in practice sits within a few hundred of 0, so a million is past all of them, yet
/// it fits a 32-bit field in any proxy or client between the agent and the server, and leaves
/// room for an explicit integer further out.
const FAR: i64 = 1_000_000;

/// `priority:` as the user meant it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityLevel {
    /// Served after everything else the server queues.
    Lowest,
    /// Served before everything else the server queues.
    Highest,
    /// The server's own default: nothing is sent.
    Default,
    /// Sent as written.
    Value(i64),
}

/// A target's priority: what was written, for which server, and what its requests carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub level: PriorityLevel,
    pub server: ServerKind,
    /// SGLang's `--schedule-low-priority-values-first` (`priority_low_values_first:`).
    pub low_values_first: bool,
}

impl Priority {
    /// The `"priority"` body field's value; `None` sends no field.
    pub fn sends(self) -> Option<i64> {
        // vLLM always serves lower values first; SGLang does unless told otherwise.
        let low_first = self.server == ServerKind::Vllm || self.low_values_first;
        let lowest = if low_first { FAR } else { -FAR };
        match self.level {
            PriorityLevel::Lowest => Some(lowest),
            PriorityLevel::Highest => Some(-lowest),
            PriorityLevel::Default => None,
            PriorityLevel::Value(v) => Some(v),
        }
    }

    /// What the requests carry, in words, and what the server needs to honour it.
    pub fn describe(self) -> String {
        let written = match self.level {
            PriorityLevel::Lowest => "lowest".to_string(),
            PriorityLevel::Highest => "highest".to_string(),
            PriorityLevel::Default => "default".to_string(),
            PriorityLevel::Value(v) => v.to_string(),
        };
        let Some(v) = self.sends() else {
            return format!("priority: {written} → no \"priority\" field (the server's default)");
        };
        let how = match (self.server, self.low_values_first) {
            (ServerKind::Vllm, _) => {
                "vLLM serves lower values first; needs --scheduling-policy priority"
            }
            (_, true) => "SGLang with --schedule-low-priority-values-first serves lower values first; needs --enable-priority-scheduling",
            (_, false) => {
                "SGLang serves higher values first; needs --enable-priority-scheduling"
            }
        };
        format!("priority: {written} → \"priority\": {v} ({how})")
    }
}

/// `priority:` and `priority_low_values_first:` of a target of server kind `server`.
pub(super) fn load_priority(
    src: &Source,
    at: &FieldPath,
    server: ServerKind,
    priority: Option<Spanned<RawPriority>>,
    low_values_first: Option<Spanned<bool>>,
) -> Result<Option<Priority>, ConfigError> {
    if let Some(l) = &low_values_first {
        if server != ServerKind::Sglang {
            return Err(src.err(
                &at.key("priority_low_values_first"),
                l.referenced,
                format!("server kind `{}` has no priority order to set: remove priority_low_values_first, or set server to sglang", server.as_str()),
            ));
        }
    }
    let Some(p) = priority else {
        return Ok(None);
    };
    let field = at.key("priority");
    if !matches!(server, ServerKind::Vllm | ServerKind::Sglang) {
        return Err(src.err(
            &field,
            p.referenced,
            format!("server kind `{}` has no request priority: remove priority, or set server to vllm or sglang", server.as_str()),
        ));
    }
    let level = match p.value {
        RawPriority::Value(v) => PriorityLevel::Value(v),
        RawPriority::Word(w) => match w.as_str() {
            "lowest" => PriorityLevel::Lowest,
            "highest" => PriorityLevel::Highest,
            "default" => PriorityLevel::Default,
            _ => {
                return Err(src.err(
                    &field,
                    p.referenced,
                    format!("priority {w:?} is not lowest, highest, default or an integer"),
                ))
            }
        },
    };
    Ok(Some(Priority {
        level,
        server,
        low_values_first: low_values_first.is_some_and(|l| l.value),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sends(level: PriorityLevel, server: ServerKind, low_values_first: bool) -> Option<i64> {
        Priority {
            level,
            server,
            low_values_first,
        }
        .sends()
    }

    #[test]
    fn lowest_is_what_each_server_serves_last() {
        use PriorityLevel::*;
        assert_eq!(sends(Lowest, ServerKind::Vllm, false), Some(FAR));
        assert_eq!(sends(Highest, ServerKind::Vllm, false), Some(-FAR));
        assert_eq!(sends(Lowest, ServerKind::Sglang, false), Some(-FAR));
        assert_eq!(sends(Highest, ServerKind::Sglang, false), Some(FAR));
        assert_eq!(sends(Lowest, ServerKind::Sglang, true), Some(FAR));
        assert_eq!(sends(Default, ServerKind::Vllm, false), None);
        assert_eq!(sends(Value(7), ServerKind::Sglang, true), Some(7));
    }

    #[test]
    fn check_says_what_is_sent_and_what_the_server_needs() {
        let p = Priority {
            level: PriorityLevel::Lowest,
            server: ServerKind::Vllm,
            low_values_first: false,
        };
        assert_eq!(
            p.describe(),
            "priority: lowest → \"priority\": 1000000 (vLLM serves lower values first; needs --scheduling-policy priority)"
        );
    }
}
