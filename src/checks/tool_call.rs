//! Tool calls: the functions a probe offers the model (`tools:`, OpenAI function definitions,
//! their parameter schemas compiled at load) and `checks.tool_call`: the run must end with a
//! call to the named tool whose arguments parse and match that tool's schema.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::schema::Schema;

/// One function the probe offers, as its tools file defines it.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The parameters' JSON Schema as written (`{"type": "object"}` when absent).
    pub parameters: Value,
    pub schema: Arc<Schema>,
}

/// A call the model made: the tool's name and its arguments as the text they arrived as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// `checks.tool_call`: the tool that must be called, with its compiled schema.
#[derive(Debug, Clone)]
pub struct Required {
    pub name: String,
    pub schema: Arc<Schema>,
}

/// Why the run's tool calls fail the check, in one sentence; `None` when the last call is to
/// the required tool with arguments that parse and validate.
pub(crate) fn check(calls: &[ToolCall], want: &Required) -> Option<String> {
    let Some(last) = calls.last() else {
        return Some(format!("no tool call: {} was to be called", want.name));
    };
    if last.name != want.name {
        let name = if last.name.is_empty() {
            "a tool without a name".to_string()
        } else {
            last.name.clone()
        };
        return Some(format!(
            "the last tool call is to {name}, not {}",
            want.name
        ));
    }
    // A call without arguments may come as "" rather than "{}".
    let text = last.arguments.trim();
    let text = if text.is_empty() { "{}" } else { text };
    let args: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(format!("the arguments of {} are not JSON: {e}", want.name)),
    };
    let broken = want.schema.first_error(&args)?;
    Some(format!(
        "the arguments of {} do not match its schema: {broken}",
        want.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn weather() -> Required {
        let schema = json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
        Required {
            name: "get_weather".into(),
            schema: Arc::new(Schema::compile(Path::new("/nowhere/t.json"), schema, "").unwrap()),
        }
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn the_last_call_must_be_the_tool_with_good_arguments() {
        let w = weather();
        assert_eq!(
            check(&[call("get_weather", "{\"city\": \"Paris\"}")], &w),
            None
        );
        assert_eq!(
            check(
                &[
                    call("get_time", "{}"),
                    call("get_weather", "{\"city\":\"Paris\"}")
                ],
                &w
            ),
            None
        );
        assert_eq!(
            check(&[], &w).as_deref(),
            Some("no tool call: get_weather was to be called")
        );
        assert_eq!(
            check(&[call("get_time", "{}")], &w).as_deref(),
            Some("the last tool call is to get_time, not get_weather")
        );
        assert_eq!(
            check(&[call("get_weather", "{\"city\": ")], &w).as_deref(),
            Some("the arguments of get_weather are not JSON: EOF while parsing a value at line 1 column 8")
        );
        assert_eq!(
            check(&[call("get_weather", "{\"city\": 7}")], &w).as_deref(),
            Some("the arguments of get_weather do not match its schema: at /city: want string, but got number")
        );
        assert_eq!(
            check(&[call("get_weather", "")], &w).as_deref(),
            Some("the arguments of get_weather do not match its schema: at the top: missing properties 'city'")
        );
    }
}
