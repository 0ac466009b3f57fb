//! A provider's knowledge stays in its flavor's file. What an API is known by is read from the
//! registry and the flavors themselves, not listed here: its name as `api:` spells it and its
//! [`Api`] variant, the headers its provider takes (its key's, those sent beside it, its
//! rate-limit prefixes) and the error words it adds to OpenAI's. Each may be written, as code,
//! only in that flavor's own file, the registry (`mod.rs`), or the simulated replica's flavor
//! files (`src/sim/wire/`, one per API, where the sim speaks each wire). A new `match api`
//! elsewhere, or a provider's header written in config or the sim's router, fails here, naming
//! the file and line.

use std::path::{Path, PathBuf};

use super::{Api, Flavor};

/// Files and folders that may name every API: the registry, this test, the sim's flavor files.
const ANYONE: [&str; 3] = [
    "src/probe/flavor/mod.rs",
    "src/probe/flavor/layout_tests.rs",
    "src/sim/wire",
];

/// A flavor's own file.
fn own_file(api: Api) -> String {
    format!("src/probe/flavor/{}.rs", api.as_str().replace('-', "_"))
}

/// What knows `api`: its name and variant, and each header and error word its flavor adds to
/// the defaults, as they appear in code (quoted, or `Api::Variant`).
fn marks(api: Api) -> Vec<String> {
    let flavor = api.flavor();
    let default = &super::openai_chat::OpenaiChat;
    let mut marks = vec![format!("\"{}\"", api.as_str()), format!("Api::{api:?}")];
    let mut tokens: Vec<&str> = flavor.key_header().into_iter().collect();
    if let Some(auth) = flavor.provider_auth() {
        tokens.push(auth.key_header);
        tokens.extend(auth.headers.iter().map(|(name, _)| *name));
    }
    let common = default.rate_limit_prefixes();
    tokens.extend(
        flavor
            .rate_limit_prefixes()
            .iter()
            .filter(|p| !common.contains(p)),
    );
    tokens.extend(flavor.error_words().all());
    // A prefix is written open (`"anthropic-ratelimit-`), a word closed.
    marks.extend(tokens.iter().map(|t| match t.ends_with('-') {
        true => format!("\"{t}"),
        false => format!("\"{t}\""),
    }));
    marks
}

/// Why a line names an API without knowing one: a comment speaks of it, and a server kind's
/// name is a server's (`server: ollama`), not an API's.
fn false_friend(line: &str) -> bool {
    let code = line.trim_start();
    code.starts_with("//") || code.starts_with("ServerKind::")
}

/// Each line of `text` that shows one of `marks`, as `file:line: text`.
fn offences(file: &Path, text: &str, marks: &[String]) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !false_friend(line))
        .filter(|(_, line)| marks.iter().any(|m| shows(line, m)))
        .map(|(i, line)| format!("{}:{}: {}", file.display(), i + 1, line.trim()))
        .collect()
}

/// Whether `line` shows `mark`; `Api::X` only as a path of its own (`HttpApi::X` is another
/// name, `Api::Gemini` is not `Api::GeminiPro`).
fn shows(line: &str, mark: &str) -> bool {
    line.match_indices(mark).any(|(at, _)| {
        if !mark.starts_with("Api::") {
            return true;
        }
        let before = line[..at].chars().next_back();
        let after = line[at + mark.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
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

/// Every offence in the crate's `src/`: a line outside an API's own files that knows it.
fn offences_in_src() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(root).expect("under the crate root");
        if ANYONE.iter().any(|a| rel.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("a source file reads");
        for &api in Api::ALL {
            if rel == Path::new(&own_file(api)) {
                continue;
            }
            found.extend(offences(rel, &text, &marks(api)));
        }
    }
    found
}

#[test]
fn a_providers_knowledge_lives_only_in_its_flavor_and_the_sim() {
    let found = offences_in_src();
    assert!(
        found.is_empty(),
        "a provider's API name, header or error words outside its flavor's file (move the \
         knowledge into the flavor's file, behind the Flavor trait):\n{}",
        found.join("\n")
    );
}

/// The marks come from the flavors: each flavor's own file exists and shows some of them, so
/// the scan reads what it claims to.
#[test]
fn every_flavor_has_its_file_and_its_marks_are_in_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for &api in Api::ALL {
        let file = own_file(api);
        let text = std::fs::read_to_string(root.join(&file)).expect("a flavor's own file");
        let marks = marks(api);
        let own: Vec<&String> = marks
            .iter()
            .skip(2)
            .filter(|m| !text.contains(m.as_str()))
            .collect();
        assert!(own.is_empty(), "{file} does not show {own:?}");
    }
    // The providers' own marks are what config and commands once held.
    let all: Vec<String> = Api::ALL.iter().flat_map(|a| marks(*a)).collect();
    for held in [
        "\"x-api-key\"",
        "\"anthropic-version\"",
        "\"x-goog-api-key\"",
        "\"api-key\"",
        "\"overloaded_error\"",
        "\"ThrottlingException\"",
        "\"API_KEY_INVALID\"",
        "\"anthropic-ratelimit-",
    ] {
        assert!(all.iter().any(|m| m == held), "{held}");
    }
}

#[test]
fn what_counts_as_knowing_a_provider() {
    let all: Vec<String> = Api::ALL.iter().flat_map(|a| marks(*a)).collect();
    let hit = |line: &str| !offences(Path::new("src/config/target.rs"), line, &all).is_empty();
    // A provider's header written in config.
    assert!(hit("        headers.insert(\"anthropic-version\", v);"));
    assert!(hit(
        "    Some(h) if h == \"x-api-key\" => \"key in x-api-key\","
    ));
    assert!(hit("    let prefix = \"anthropic-ratelimit-\";"));
    // An error word, an API's name, a `match api`.
    assert!(hit("const OVERLOADED: &[&str] = &[\"overloaded_error\"];"));
    assert!(hit("    if api == Api::Gemini {"));
    assert!(hit("        (Api::Bedrock, None) => None,"));
    assert!(hit("    let name = \"azure-openai\";"));
    assert!(!hit("    let api = t.api.unwrap_or(Api::default());"));
    assert!(!hit("    match HttpApi::Get {"));
    assert!(!hit("            ServerKind::Ollama => \"ollama\","));
    assert!(!hit(
        "    // as \"gemini\" says, with its \"x-goog-api-key\""
    ));
    assert!(!hit("    \"api gemini takes the id alone\""));
    // OpenAI's own words are every flavor's defaults, not a provider's.
    assert!(!hit("        json!(\"model_not_found\"),"));
}
