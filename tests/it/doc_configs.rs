//! Every config a user would copy from the docs passes `check` as printed, with stubs for the
//! files it names and none of the environment variables it names.
//!
//! Which blocks: every fenced ```yaml block in README.md and docs/ whose top level (no
//! indentation) has `name:` (a probe file: only a probe has a name at its top) or `targets:`
//! (an agent's `llm-canary.yaml`). Any other block shows a fragment (one key, a list item, a
//! Prometheus or collector config) and is skipped by that rule.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{root, TempDir};
use serde_json::Value;

/// A yaml block: where it is, and its text with the fence's indentation removed.
struct Block {
    at: String,
    text: String,
}

#[derive(Debug, PartialEq)]
enum Kind {
    Agent,
    Probe,
}

fn kind(text: &str) -> Option<Kind> {
    let top = |key: &str| text.lines().any(|l| l.starts_with(&format!("{key}:")));
    if top("name") {
        Some(Kind::Probe)
    } else if top("targets") {
        Some(Kind::Agent)
    } else {
        None
    }
}

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn yaml_blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap();
    let name = page.strip_prefix(root()).unwrap().display().to_string();
    let mut blocks = Vec::new();
    let mut open: Option<(usize, usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        match (&mut open, line.trim()) {
            (None, "```yaml" | "```yml") => open = Some((n + 1, indent, String::new())),
            (Some(_), "```") => {
                let (start, _, body) = open.take().expect("a block is open");
                blocks.push(Block {
                    at: format!("{name}:{start}"),
                    text: body,
                });
            }
            (Some((_, fence, body)), _) => {
                body.push_str(line.get((*fence).min(indent)..).unwrap_or_default());
                body.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// The environment variables a block names (`api_key_env: NAME`, any `..._env: NAME`).
fn named_variables(text: &str) -> Vec<String> {
    text.split(['\n', ',', '{', '}'])
        .filter_map(|part| {
            let (key, value) = part.split_once(':')?;
            let key = key.trim().trim_start_matches("- ");
            key.ends_with("_env").then(|| {
                value
                    .split('#')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .trim_matches('"')
                    .to_string()
            })
        })
        .filter(|v| !v.is_empty())
        .collect()
}

/// A self-signed certificate and its key, PEM, made once.
fn stub_pair() -> &'static (String, String) {
    static PAIR: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    PAIR.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["stub.example".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    })
}

/// Stub files for what a parsed config or probe names, relative to the agent file's folder
/// (prompts under `prompts_dir`).
fn stubs(value: &Value, prompts_dir: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let Some(file) = v.as_str() else {
                    stubs(v, prompts_dir, out);
                    continue;
                };
                if file.starts_with('/') || file.contains('$') {
                    continue;
                }
                let stub = match key.as_str() {
                    "prompt" => {
                        out.push((format!("{prompts_dir}/{file}"), "What is 2 + 2?\n".into()));
                        continue;
                    }
                    "json_schema" => r#"{"type": "object"}"#.to_string(),
                    "tools" => {
                        let tool = value_at(value, "checks.tool_call").unwrap_or("stub_tool");
                        format!(
                            r#"[{{"type": "function", "function": {{"name": "{tool}", "parameters": {{"type": "object"}}}}}}]"#
                        )
                    }
                    "file" => "A known-good answer.\n".into(),
                    // A web config that needs no certificate files of its own.
                    "web_config_file" => {
                        "basic_auth_users:\n  stub: \"$2b$10$UR7XTJ3detryrwFBgqwZ6uHDyki7JW7xmkf5g.XzTzpM95.qHqn9W\"\n".into()
                    }
                    // A `tls:` block's files: one self-signed certificate (a CA to trust, and a
                    // client certificate) and its key.
                    "ca_file" | "cert_file" => stub_pair().0.clone(),
                    "key_file" => stub_pair().1.clone(),
                    k if k.ends_with("_file") => "stub-secret\n".into(),
                    _ => continue,
                };
                out.push((file.to_string(), stub));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| stubs(v, prompts_dir, out)),
        _ => {}
    }
}

fn value_at<'a>(value: &'a Value, path: &str) -> Option<&'a str> {
    path.split('.').try_fold(value, |v, k| v.get(k))?.as_str()
}

/// A block written out as a whole config folder: the agent file (the block, or a stub agent
/// whose targets are the probe's), its probes (the block, or a stub probe) and every file named.
fn folder(block: &Block, kind: &Kind) -> TempDir {
    let parsed: Value = serde_saphyr::from_str(&block.text)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}\n{}", block.at, block.text));
    let dir = TempDir::new("docblock");
    let (agent, probe) = match kind {
        Kind::Agent => (
            block.text.clone(),
            "name: stub\nevery: 1m\nprompt: stub.txt\n".to_string(),
        ),
        Kind::Probe => {
            let names: Vec<String> = parsed["targets"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(|n| n.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_else(|| vec!["stub".to_string()]);
            let targets: String = names
                .iter()
                .map(|n| {
                    format!("  - {{name: {n}, base_url: \"http://127.0.0.1:9/v1\", model: m}}\n")
                })
                .collect();
            (format!("targets:\n{targets}"), block.text.clone())
        }
    };
    let agent_parsed: Value = serde_saphyr::from_str(&agent).unwrap();
    let probes_dir = value_at(&agent_parsed, "probes_dir").unwrap_or("probes");
    let prompts_dir = value_at(&agent_parsed, "prompts_dir").unwrap_or("prompts");
    let mut files = vec![
        ("llm-canary.yaml".to_string(), agent),
        (format!("{probes_dir}/docs.yaml"), probe.clone()),
        (
            format!("{prompts_dir}/stub.txt"),
            "What is 2 + 2?\n".to_string(),
        ),
    ];
    stubs(&agent_parsed, prompts_dir, &mut files);
    stubs(
        &serde_saphyr::from_str(&probe).unwrap(),
        prompts_dir,
        &mut files,
    );
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    dir.write(&files);
    dir
}

/// `check` on the folder, with `set` as the only environment variables beyond PATH and HOME.
fn check(dir: &Path, set: &[String]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_llm-canary"));
    cmd.current_dir(dir)
        .args(["check", "-c", "llm-canary.yaml"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        // No AWS profile or instance metadata reached from a test.
        .env("AWS_CONFIG_FILE", "/nonexistent/llm-canary-test/config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/llm-canary-test/credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for name in set {
        cmd.env(name, "test-key");
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_whole_config_in_the_docs_passes_check_as_printed() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for page in pages() {
        for block in yaml_blocks(&page) {
            let Some(kind) = kind(&block.text) else {
                continue;
            };
            checked += 1;
            let dir = folder(&block, &kind);
            let (ok, out) = check(dir.path(), &[]);
            if ok {
                continue;
            }
            // A key named in `api_key_env` is required once named (the daemon never probes
            // without its key): the only failure allowed is that variable's, and with it set
            // the block passes.
            let named = named_variables(&block.text);
            let unset = named
                .iter()
                .any(|v| out.contains(&format!("environment variable {v} is not set")));
            if !unset {
                problems.push(format!("{} ({kind:?}):\n{out}", block.at));
                continue;
            }
            let (ok, out) = check(dir.path(), &named);
            if !ok {
                problems.push(format!(
                    "{} ({kind:?}), with {named:?} set:\n{out}",
                    block.at
                ));
            }
        }
    }
    assert!(checked >= 10, "only {checked} whole configs found");
    assert!(
        problems.is_empty(),
        "configs in the docs that `check` refuses:\n\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_rule_tells_whole_configs_from_fragments() {
    assert_eq!(
        kind("name: p\nevery: 1m\nprompt: p.txt\n"),
        Some(Kind::Probe)
    );
    assert_eq!(
        kind("name: p\ntargets: [a]\nprompt: p.txt\n"),
        Some(Kind::Probe),
        "a probe may name its targets"
    );
    assert_eq!(
        kind("agent:\n  listen: x\ntargets:\n  - name: t\n"),
        Some(Kind::Agent)
    );
    assert_eq!(kind("gate:\n  slo: {ttft_p95: 300ms}\n"), None);
    assert_eq!(kind("  - name: t\n    base_url: x\n"), None, "a list item");
    assert_eq!(
        named_variables(
            "    api_key_env: SHADOW_API_KEY   # comment\n  - {name: t, api_key_env: K}\n"
        ),
        ["SHADOW_API_KEY", "K"]
    );
}

/// A config line whose comment calls its `api_key_env` optional: the comment is what a reader
/// copies with it.
fn calls_a_named_key_optional(line: &str) -> bool {
    let comment = line.split_once('#').map_or("", |(_, c)| c);
    line.contains("api_key_env:") && comment.to_lowercase().contains("optional")
}

/// `check` stops on a named key's unset variable, so no page may call such a key optional.
#[test]
fn no_page_calls_a_named_key_optional() {
    assert!(calls_a_named_key_optional(
        "    api_key_env: SHADOW_API_KEY       # optional; keys never live in the file"
    ));
    assert!(!calls_a_named_key_optional(
        "A key is optional, but with `api_key_env: NAME` it is required"
    ));
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (n, line) in text.lines().enumerate() {
            assert!(
                !calls_a_named_key_optional(line),
                "{}:{}: {line}",
                page.display(),
                n + 1
            );
        }
    }
}
