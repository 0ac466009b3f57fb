//! The JSON files a probe names beside its prompt: a JSON Schema (`checks.json_schema`) and the
//! tools it offers (`tools:`, OpenAI function definitions), read and compiled at load so a bad
//! file is a config error, never a failed run. Errors are sentences; the caller adds the
//! probe file's position and field.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::checks::schema::Schema;
use crate::checks::tool_call::Tool;

fn read_json(path: &Path, what: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{what} {} not found", path.display()),
        _ => format!("cannot read {what} {}: {e}", path.display()),
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{what} {} is not JSON: {e}", path.display()))
}

/// A JSON Schema file, compiled.
pub(super) fn schema(path: &Path) -> Result<Schema, String> {
    let doc = read_json(path, "schema file")?;
    Schema::compile(path, doc, "").map_err(|e| {
        format!(
            "schema file {} is not a valid JSON Schema: {e}",
            path.display()
        )
    })
}

/// A tools file: a JSON array of `{"type": "function", "function": {"name", "description",
/// "parameters"}}`, each function's parameters compiled as a schema.
pub(super) fn tools(path: &Path) -> Result<Vec<Tool>, String> {
    let doc = read_json(path, "tools file")?;
    let shape = || {
        format!(
            "tools file {} must hold a JSON array of OpenAI function definitions ({{\"type\": \"function\", \"function\": {{\"name\": ..., \"parameters\": ...}}}})",
            path.display()
        )
    };
    let list = doc.as_array().filter(|l| !l.is_empty()).ok_or_else(shape)?;
    let mut tools: Vec<Tool> = Vec::new();
    for (i, def) in list.iter().enumerate() {
        let f = &def["function"];
        let name = match (def["type"].as_str(), f["name"].as_str()) {
            (Some("function"), Some(n)) if !n.is_empty() => n.to_string(),
            _ => return Err(format!("{}: entry [{i}] is not one", shape())),
        };
        if tools.iter().any(|t| t.name == name) {
            return Err(format!(
                "tools file {} defines {name} twice",
                path.display()
            ));
        }
        // No parameters: the function takes none, and any object will do. Each schema is a
        // document of its own (a tools file is an array, which no schema can be), named after
        // the file and the tool for its `$id` and its errors.
        let parameters = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        let schema = Schema::compile(&path.join(&name), parameters.clone(), "").map_err(|e| {
            format!(
                "tools file {}: the parameters of {name} are not a valid JSON Schema: {e}",
                path.display()
            )
        })?;
        tools.push(Tool {
            name,
            description: f["description"].as_str().map(str::to_string),
            parameters,
            schema: Arc::new(schema),
        });
    }
    Ok(tools)
}
