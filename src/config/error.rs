//! Config errors as one sentence naming file, line, column and field, e.g.
//! `probes/capital.yaml:4:11: field timeouts.ttft: invalid duration "5x" ...`.
//! The field path is recovered from the YAML text at the error position, so every error,
//! whether the YAML parser's or our own validation's, names the field the same way.

use std::path::{Path, PathBuf};

use serde_saphyr::Location;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{}:{line}:{column}: field {field}: {message}", file.display())]
    At {
        file: PathBuf,
        line: u64,
        column: u64,
        field: String,
        message: String,
    },
    #[error("{}: {message}", file.display())]
    File { file: PathBuf, message: String },
}

impl ConfigError {
    pub fn file(file: &Path, message: impl Into<String>) -> Self {
        ConfigError::File {
            file: file.to_path_buf(),
            message: message.into(),
        }
    }

    /// An error at a known position of `src` (the text of `file`).
    pub fn at(file: &Path, src: &str, loc: Location, message: impl Into<String>) -> Self {
        let (line, column) = (loc.line(), loc.column());
        if line == 0 {
            return Self::file(file, message);
        }
        ConfigError::At {
            file: file.to_path_buf(),
            line,
            column,
            field: field_path(src, line, column),
            message: message.into(),
        }
    }

    /// Turns the YAML parser's error into ours: its message, without its source snippet.
    pub fn from_yaml(file: &Path, src: &str, err: &serde_saphyr::Error) -> Self {
        let text = err.to_string();
        let first = text.lines().next().unwrap_or("invalid YAML");
        let mut message = match first.strip_prefix("error: ") {
            Some(rest) => rest
                .split_once(": ")
                .filter(|(pos, _)| pos.starts_with("line "))
                .map_or(rest, |(_, m)| m),
            None => first,
        }
        .to_string();
        if let Some(i) = message.find(", set DuplicateKeyPolicy") {
            message.truncate(i);
        }
        for ty in ["u8", "u16", "u32", "u64", "usize"] {
            if message == format!("invalid {ty}") {
                message = "expected a whole number, 0 or more".into();
            }
        }
        if message == "invalid i64" || message == "invalid i32" {
            message = "expected a whole number".into();
        }
        if message.starts_with("invalid f64") {
            message = "expected a number".into();
        }
        match err.location() {
            Some(loc) if loc.line() > 0 => {
                let mut e = Self::at(file, src, loc, message.clone());
                // A missing field is reported at the start of its mapping: name the field itself.
                if let (ConfigError::At { field, .. }, Some(missing)) =
                    (&mut e, missing_field(&message))
                {
                    *field = match field.rsplit_once('.') {
                        Some((parent, _)) => format!("{parent}.{missing}"),
                        None if field.ends_with(']') => format!("{field}.{missing}"),
                        None => missing.to_string(),
                    };
                }
                e
            }
            _ => Self::file(file, message),
        }
    }
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// The dotted path (`targets[1].labels.env`) of the node at 1-based `line`/`column` of a YAML
/// text: keys and flow collections on that line, then block parents found by indentation.
pub fn field_path(src: &str, line: u64, column: u64) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let idx = (line as usize).saturating_sub(1);
    let Some(cur) = lines.get(idx) else {
        return "(document)".into();
    };
    let (content_indent, item_indent) = split_dashes(cur);
    let mut segments = inline_path(cur, content_indent, (column as usize).saturating_sub(1));
    if let Some(i) = item_indent {
        segments.insert(0, format!("[{}]", item_index(&lines, idx, i)));
    }
    // Walk upwards for block parents.
    let mut limit = item_indent.unwrap_or(content_indent);
    let mut after_item = item_indent.is_some();
    for j in (0..idx).rev() {
        if limit == 0 && !after_item {
            break;
        }
        let l = lines[j];
        let trimmed = l.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (content, item) = split_dashes(l);
        let indent = l.len() - trimmed.len();
        if let Some(i) = item.filter(|&i| i < limit) {
            segments.insert(0, format!("[{}]", item_index(&lines, j, i)));
            limit = i;
            after_item = true;
            let _ = content;
        } else if indent < limit || (after_item && indent == limit && item.is_none()) {
            if let Some(key) = leading_key(trimmed) {
                segments.insert(0, key);
                limit = indent;
                after_item = false;
            }
        }
    }
    let mut out = String::new();
    for s in segments {
        if !out.is_empty() && !s.starts_with('[') {
            out.push('.');
        }
        out.push_str(&s);
    }
    if out.is_empty() {
        "(document)".into()
    } else {
        out
    }
}

/// (indent of the line's content after any `- ` markers, indent of the innermost `-` if any).
fn split_dashes(line: &str) -> (usize, Option<usize>) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut item = None;
    loop {
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'-' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            item = Some(i);
            i += 1;
        } else {
            return (i, item);
        }
    }
}

/// Which item of its sequence the `-` at `indent` on line `idx` is (0-based).
fn item_index(lines: &[&str], idx: usize, indent: usize) -> usize {
    let mut n = 0;
    for l in lines[..idx].iter().rev() {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = l.len() - t.len();
        if ind < indent || (ind == indent && !(t == "-" || t.starts_with("- "))) {
            break;
        }
        if ind == indent {
            n += 1;
        }
    }
    n
}

fn leading_key(trimmed: &str) -> Option<String> {
    let end = trimmed
        .find(": ")
        .or_else(|| trimmed.strip_suffix(':').map(|k| k.len()))?;
    let key = trimmed[..end]
        .trim()
        .trim_matches(|c| c == '"' || c == '\'');
    (!key.is_empty() && !key.contains(['{', '[', ' '])).then(|| key.to_string())
}

enum Frame {
    Map(Option<String>),
    Seq(usize),
}

/// Keys and flow-collection positions on one line, up to character `col`.
fn inline_path(line: &str, start: usize, col: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut frames = vec![Frame::Map(None)];
    let mut i = start;
    while i < chars.len() && i <= col {
        let c = chars[i];
        match c {
            '{' if i < col => frames.push(Frame::Map(None)),
            '[' if i < col => frames.push(Frame::Seq(0)),
            '}' | ']' if frames.len() > 1 && i < col => {
                frames.pop();
            }
            // Past the error position, or a stray closer: nothing more to learn from this line.
            '{' | '[' | '}' | ']' => break,
            ',' => match frames.last_mut() {
                Some(Frame::Seq(n)) => *n += 1,
                Some(Frame::Map(k)) => *k = None,
                None => {}
            },
            ' ' => {}
            '#' => break,
            _ => {
                // A scalar: read it, then see whether a `:` makes it a key.
                let tok_start = i;
                let mut tok = String::new();
                if c == '"' || c == '\'' {
                    i += 1;
                    while i < chars.len() && chars[i] != c {
                        tok.push(chars[i]);
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < chars.len() && !matches!(chars[i], ',' | '{' | '}' | '[' | ']') {
                        if chars[i] == ':'
                            && chars
                                .get(i + 1)
                                .is_none_or(|n| matches!(n, ' ' | ',' | '}' | ']'))
                        {
                            break;
                        }
                        tok.push(chars[i]);
                        i += 1;
                    }
                }
                let mut k = i;
                while k < chars.len() && chars[k] == ' ' {
                    k += 1;
                }
                if chars.get(k) == Some(&':') {
                    if tok_start <= col {
                        if let Some(Frame::Map(key)) = frames.last_mut() {
                            *key = Some(tok.trim().to_string());
                        }
                    }
                    i = k + 1;
                    continue;
                }
                if c != '"' && c != '\'' {
                    // A plain scalar value runs to the end of the line in block context.
                    if frames.len() == 1 {
                        break;
                    }
                }
                // Always move on, even past an empty token.
                if i == tok_start {
                    i += 1;
                }
                continue;
            }
        }
        i += 1;
    }
    frames
        .into_iter()
        .filter_map(|f| match f {
            Frame::Map(Some(k)) => Some(k),
            Frame::Map(None) => None,
            Frame::Seq(n) => Some(format!("[{n}]")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::field_path;

    const DOC: &str = "\
agent:
  name: a
  labels: {region: eu, tier: 1}
targets:
  - name: one
    base_url: http://x
  - name: two
    labels:
      env: prod
targets2:
- name: c
- name: d
  api: x
list: [a, b, c]
";

    #[test]
    fn stray_closers_and_empty_tokens_end() {
        // Found by the config_loader fuzzer: these positions used to loop forever.
        assert_eq!(field_path("a: {b: }", 1, 8), "a.b");
        assert_eq!(field_path("x: [1, ]]", 1, 9), "x");
        assert_eq!(field_path("{a: [}", 1, 6), "a[0]");
        assert_eq!(field_path("}", 1, 1), "(document)");
        for line in ["{:}", "[:]", "{a:}", "- {[}]", "a: {b: [c, }", ": : :"] {
            for col in 1..=line.len() as u64 + 1 {
                let _ = field_path(line, 1, col);
            }
        }
    }

    #[test]
    fn paths_from_positions() {
        assert_eq!(field_path(DOC, 2, 9), "agent.name");
        assert_eq!(field_path(DOC, 2, 3), "agent.name");
        assert_eq!(field_path(DOC, 3, 24), "agent.labels.tier");
        assert_eq!(field_path(DOC, 3, 11), "agent.labels");
        assert_eq!(field_path(DOC, 5, 5), "targets[0].name");
        assert_eq!(field_path(DOC, 6, 15), "targets[0].base_url");
        assert_eq!(field_path(DOC, 7, 13), "targets[1].name");
        assert_eq!(field_path(DOC, 9, 12), "targets[1].labels.env");
        assert_eq!(field_path(DOC, 12, 3), "targets2[1].name");
        assert_eq!(field_path(DOC, 13, 8), "targets2[1].api");
        assert_eq!(field_path(DOC, 14, 14), "list[2]");
        assert_eq!(field_path(DOC, 14, 11), "list[1]");
        assert_eq!(
            field_path("targets: [{name: a}, {name: b}]", 1, 30),
            "targets[1].name"
        );
        assert_eq!(field_path(DOC, 1, 1), "agent");
    }
}
