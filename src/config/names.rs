//! Names users choose that become label names and values: static labels, and target, probe
//! and agent names.

use std::collections::BTreeMap;

use serde_saphyr::Spanned;

use super::error::ConfigError;
use super::field::FieldPath;
use super::source::Source;

/// Label names the agent sets itself, or that a metric carries of its own (a histogram's `le`,
/// a summary's `quantile`, a ladder's `rung`, `target_info`'s, `build_info`'s, the remote-write drops' and the OTLP queues'); static
/// labels may not take them: a series with a label twice is refused by Prometheus and by every
/// remote-write store.
pub(super) const RESERVED_LABELS: [&str; 14] = [
    "probe",
    "target",
    "model",
    "outcome",
    "instance",
    "job",
    "le",
    "quantile",
    "reported_model",
    "fingerprint",
    "version",
    "reason",
    "signal",
    "rung",
];

/// Prometheus label names: `[a-zA-Z_][a-zA-Z0-9_]*`, not reserved, not `__`-prefixed.
pub(super) fn check_labels(
    src: &Source,
    field: &FieldPath,
    labels: &Spanned<BTreeMap<String, String>>,
) -> Result<(), ConfigError> {
    for k in labels.value.keys() {
        let valid = k
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || k.starts_with("__") {
            return Err(src.err(
                field,
                labels.referenced,
                format!("{k:?} is not a valid Prometheus label name"),
            ));
        }
        if RESERVED_LABELS.contains(&k.as_str()) {
            return Err(src.err(
                field,
                labels.referenced,
                format!("label {k:?} is set by the agent itself"),
            ));
        }
    }
    Ok(())
}

/// Target and probe names become label values: keep them short and plain.
pub(super) fn check_name(
    src: &Source,
    field: &FieldPath,
    name: &Spanned<String>,
    what: &str,
) -> Result<(), ConfigError> {
    let n = &name.value;
    if n.is_empty()
        || n.len() > 64
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(src.err(
            field,
            name.referenced,
            format!("{what} name {n:?} must be 1-64 characters of letters, digits, '-', '_', '.' or ':'"),
        ));
    }
    Ok(())
}
