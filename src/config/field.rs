//! Where a value sits in its file, as errors name it: `targets[1].labels.env`.

use std::borrow::Cow;
use std::fmt;

/// Where a value sits in its file, written as people read it: `targets[1].labels.env`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// The document itself (a probe file holding one probe, say).
    pub fn root() -> Self {
        Self::default()
    }

    pub fn key(&self, key: &str) -> Self {
        // A user's key may hold a line break; the error must stay one line.
        let key: Cow<str> = if key.contains(char::is_control) {
            key.escape_debug().to_string().into()
        } else {
            key.into()
        };
        if self.0.is_empty() {
            FieldPath(key.to_string())
        } else {
            FieldPath(format!("{}.{key}", self.0))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn index(&self, index: usize) -> Self {
        FieldPath(format!("{}[{index}]", self.0))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(document)")
        } else {
            f.write_str(&self.0)
        }
    }
}
