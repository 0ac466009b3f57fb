//! The flavors' knowledge stays in their files: no API's name, as `api:` spells it or as an
//! [`Api`](super::Api) variant, appears in `src/` outside `src/probe/flavor/` and `src/sim/`
//! (the simulated replica speaks every flavor by design). A new `match api` elsewhere fails
//! here, naming the file and line, and belongs in a flavor's file, behind the trait.

use std::path::{Path, PathBuf};

/// The config's spellings of the APIs, as string literals.
const NAMES: [&str; 8] = [
    "\"openai-chat\"",
    "\"openai-completions\"",
    "\"openai-responses\"",
    "\"anthropic-messages\"",
    "\"ollama\"",
    "\"azure-openai\"",
    "\"gemini\"",
    "\"bedrock\"",
];

/// Folders whose files may name APIs.
const ALLOWED: [&str; 2] = ["src/probe/flavor", "src/sim"];

/// Why a line names an API without knowing one: a comment speaks of it, and a server kind's
/// name is a server's (`server: ollama`), not an API's.
fn false_friend(line: &str) -> bool {
    let code = line.trim_start();
    code.starts_with("//") || code.starts_with("ServerKind::")
}

/// What in `text` names an API: each offending line as `file:line: text`.
fn offences(file: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !false_friend(line))
        .filter(|(_, line)| NAMES.iter().any(|n| line.contains(n)) || names_a_variant(line))
        .map(|(i, line)| format!("{}:{}: {}", file.display(), i + 1, line.trim()))
        .collect()
}

/// `Api::` followed by a variant (a capital letter); `Api::default()` names none.
fn names_a_variant(line: &str) -> bool {
    line.match_indices("Api::").any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + "Api::".len()..].chars().next();
        // `HttpApi::X` or `my_api::X` is another name.
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && after.is_some_and(|c| c.is_ascii_uppercase())
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("src/ is readable");
    for entry in entries {
        let path = entry.expect("a readable entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn api_names_live_only_in_the_flavors_and_the_sim() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root).expect("under the crate root");
        if ALLOWED.iter().any(|a| rel.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("a source file reads");
        found.extend(offences(rel, &text));
    }
    assert!(
        found.is_empty(),
        "API names outside src/probe/flavor/ and src/sim/ (move the knowledge into the flavor's \
         file, behind the Flavor trait):\n{}",
        found.join("\n")
    );
    // The scan reads something: the flavors' own files would offend.
    let own = std::fs::read_to_string(root.join("src/probe/flavor/mod.rs")).expect("reads");
    assert!(!offences(Path::new("mod.rs"), &own).is_empty());
}

#[test]
fn what_counts_as_naming_an_api() {
    let hit = |line: &str| !offences(Path::new("x.rs"), line).is_empty();
    assert!(hit("    if api == Api::Gemini {"));
    assert!(hit("        (Api::Bedrock, None) => None,"));
    assert!(hit("    let name = \"azure-openai\";"));
    assert!(!hit("    let api = t.api.unwrap_or(Api::default());"));
    assert!(!hit("    match HttpApi::Get {"));
    assert!(!hit("            ServerKind::Ollama => \"ollama\","));
    assert!(!hit("    // as \"gemini\" says"));
    assert!(!hit("    \"api gemini takes the id alone\""));
}
