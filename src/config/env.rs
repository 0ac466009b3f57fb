//! `${NAME}` in the few values that tell one agent of a fleet from another — `agent.name`,
//! `agent.labels` values and `agent.shard` — so every replica of a StatefulSet can share one
//! ConfigMap and take its identity from its pod (`shard: "${SHARD}"`, `replica: "${REPLICA}"`).
//! Nowhere else: like Prometheus's external labels, and so a secret can never be expanded into
//! a value that is printed or becomes a label. `${NAME:-default}` takes the default when NAME
//! is unset or empty (as in a shell); `$$` is a literal `$`.

use serde_saphyr::Location;

use super::{ConfigError, FieldPath, Source};

/// Why a value could not be expanded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExpandError {
    Unset(String),
    Malformed,
}

/// Expands `${NAME}` and `${NAME:-default}` with `lookup`; an unset or empty variable without
/// a default is an error, not "".
pub(crate) fn expand_with(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix('{') {
            let end = r.find('}').ok_or(ExpandError::Malformed)?;
            let (name, default) = match r[..end].split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (&r[..end], None),
            };
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ExpandError::Malformed);
            }
            match (lookup(name), default) {
                (Some(v), _) if !v.is_empty() => out.push_str(&v),
                (_, Some(d)) => out.push_str(d),
                _ => return Err(ExpandError::Unset(name.to_string())),
            }
            rest = &r[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Expands `text` from the process environment; errors point at `field` and `loc`.
pub(super) fn expand(
    src: &Source,
    field: &FieldPath,
    loc: Location,
    text: &str,
) -> Result<String, ConfigError> {
    expand_with(text, |n| std::env::var(n).ok()).map_err(|e| match e {
        ExpandError::Unset(name) => src.err(
            field,
            loc,
            format!("environment variable {name} (in {text:?}) is not set"),
        ),
        ExpandError::Malformed => src.err(
            field,
            loc,
            format!("{text:?}: write ${{NAME}} or ${{NAME:-default}} for an environment variable, $$ for a literal $"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SHARD" => Some("2/3".into()),
            "POD_INDEX" => Some("2".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_names_and_keeps_the_rest() {
        assert_eq!(expand_with("${SHARD}", env).unwrap(), "2/3");
        assert_eq!(expand_with("${POD_INDEX}/3", env).unwrap(), "2/3");
        assert_eq!(expand_with("canary-${POD_INDEX}", env).unwrap(), "canary-2");
        assert_eq!(expand_with("plain", env).unwrap(), "plain");
        assert_eq!(expand_with("cost$$5 $x", env).unwrap(), "cost$5 $x");
        assert_eq!(expand_with("${SHARD:-1/1}", env).unwrap(), "2/3");
        assert_eq!(expand_with("${NOPE:-1/1}", env).unwrap(), "1/1");
        assert_eq!(expand_with("${EMPTY:-a}", env).unwrap(), "a");
        assert_eq!(expand_with("${NOPE:-}x", env).unwrap(), "x");
    }

    #[test]
    fn unset_empty_and_malformed_are_errors() {
        assert_eq!(
            expand_with("${NOPE}", env),
            Err(ExpandError::Unset("NOPE".into()))
        );
        assert_eq!(
            expand_with("${EMPTY}", env),
            Err(ExpandError::Unset("EMPTY".into()))
        );
        for bad in ["${SHARD", "${}", "${1X}", "${A-B}", "${:-x}"] {
            assert_eq!(expand_with(bad, env), Err(ExpandError::Malformed), "{bad}");
        }
    }
}
