//! `checks.json` and `checks.json_schema`: the answer must be one JSON document (a Markdown code
//! fence around it is fine, as chat models like to add one), and match the probe's schema.

use serde_json::Value;

use super::schema::Schema;

/// The answer without a surrounding Markdown code fence (```` ``` ```` or ```` ```json ````).
pub(crate) fn unfenced(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // The info string (`json`) runs to the end of the opening line.
    match body.split_once('\n') {
        Some((info, inner)) if !info.contains('`') => inner.trim(),
        _ => t,
    }
}

/// Why the answer fails the JSON checks, in one sentence; `None` when it passes.
pub(crate) fn check(text: &str, schema: Option<&Schema>) -> Option<String> {
    let doc = unfenced(text);
    let value: Value = match serde_json::from_str(doc) {
        Ok(v) => v,
        Err(e) => return Some(format!("the answer is not JSON: {e}")),
    };
    let broken = schema?.first_error(&value)?;
    Some(format!(
        "the answer does not match the JSON Schema: {broken}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn fences_come_off() {
        assert_eq!(unfenced("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(unfenced("  ```\n[1]\n```\n"), "[1]");
        assert_eq!(unfenced("{\"a\": 1}"), "{\"a\": 1}");
        // Not a fence around the whole answer: left as is (and not JSON).
        assert_eq!(unfenced("```json\n{}"), "```json\n{}");
    }

    #[test]
    fn parse_then_schema() {
        assert_eq!(check("```json\n{\"city\": \"Paris\"}\n```", None), None);
        assert_eq!(
            check("Here you go: {\"city\": \"Paris\"}", None).as_deref(),
            Some("the answer is not JSON: expected value at line 1 column 1")
        );
        let s = Schema::compile(
            Path::new("/nowhere/s.json"),
            json!({"type": "object", "required": ["country"]}),
            "",
        )
        .unwrap();
        assert_eq!(
            check("{\"city\": \"Paris\"}", Some(&s)).as_deref(),
            Some("the answer does not match the JSON Schema: at the top: missing properties 'country'")
        );
        assert_eq!(check("{\"country\": \"France\"}", Some(&s)), None);
    }
}
