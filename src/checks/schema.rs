//! A JSON Schema compiled once (at config load) with `boon`, and the first thing a value gets
//! wrong against it, in one line. Schemas are read from local files only: a `$ref` to the
//! network fails at load, never during a probe.

use std::fmt;
use std::path::Path;

use serde_json::Value;

/// A compiled schema, shared by every run of its probe.
pub struct Schema {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schema")
    }
}

/// Why a schema does not compile, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(String);

impl Schema {
    /// Compiles the schema at `pointer` (a JSON pointer, `""` for the whole document) inside
    /// `document`, which was read from `file`; relative `$ref`s resolve against that file.
    /// Without `$schema`, draft 2020-12 applies.
    pub fn compile(file: &Path, document: Value, pointer: &str) -> Result<Schema, SchemaError> {
        let one_line = |e: boon::CompileError| {
            SchemaError(match &e {
                // Where the schema breaks the metaschema, not the whole tree of why.
                boon::CompileError::ValidationError { src, .. } => precise(src),
                _ => format!("{e:#}")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            })
        };
        let loc = file.to_string_lossy();
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler.add_resource(&loc, document).map_err(one_line)?;
        let mut schemas = boon::Schemas::new();
        let index = compiler
            .compile(&format!("{loc}#{pointer}"), &mut schemas)
            .map_err(one_line)?;
        Ok(Schema { schemas, index })
    }

    /// The first (most specific) way `value` breaks the schema, e.g.
    /// `at /city: want string, but got number`; `None` when it validates.
    pub fn first_error(&self, value: &Value) -> Option<String> {
        let err = self.schemas.validate(value, self.index).err()?;
        Some(precise(&err))
    }
}

/// The first leaf of a validation error's tree: the precise complaint, where its parents only
/// say "failed".
fn precise(err: &boon::ValidationError) -> String {
    let mut e = err;
    while let Some(first) = e.causes.first() {
        e = first;
    }
    let at = e.instance_location.to_string();
    let at = if at.is_empty() { "the top".into() } else { at };
    format!("at {at}: {}", e.kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Result<Schema, SchemaError> {
        Schema::compile(Path::new("/nowhere/s.json"), v, "")
    }

    #[test]
    fn the_first_error_is_the_precise_one() {
        let s = schema(json!({
            "type": "object",
            "required": ["city"],
            "properties": {"city": {"type": "string"}, "population": {"type": "number", "minimum": 0}}
        }))
        .unwrap();
        assert_eq!(s.first_error(&json!({"city": "Paris"})), None);
        assert_eq!(
            s.first_error(&json!({"city": 3})).as_deref(),
            Some("at /city: want string, but got number")
        );
        assert_eq!(
            s.first_error(&json!({})).as_deref(),
            Some("at the top: missing properties 'city'")
        );
        assert_eq!(
            s.first_error(&json!({"city": "Paris", "population": -1}))
                .as_deref(),
            Some("at /population: must be >=0, but got -1")
        );
    }

    #[test]
    fn a_bad_schema_or_a_pointer_to_nothing_is_refused_in_one_line() {
        let e = schema(json!({"type": "objekt"})).unwrap_err().to_string();
        assert_eq!(e, "at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'");
        // A document must itself be a schema, even to point into it.
        let e = Schema::compile(Path::new("/nowhere/t.json"), json!([{}]), "/0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("want boolean or object, but got array"), "{e}");
        let defs = json!({"$defs": {"city": {"type": "string"}}});
        let e = Schema::compile(Path::new("/nowhere/d.json"), defs.clone(), "/$defs/town")
            .unwrap_err()
            .to_string();
        assert!(!e.is_empty() && !e.contains('\n'), "{e}");
        let city = Schema::compile(Path::new("/nowhere/d.json"), defs, "/$defs/city").unwrap();
        assert!(city.first_error(&json!(3)).is_some());
    }
}
