//! Every bad-config fixture in `tests/fixtures/bad-config/` paired with the exact error it must
//! produce: one sentence naming file, line, column and field. A fixture overrides some files of
//! a valid default config; `== expect` holds the message (paths relative to the config folder).
//! `BLESS=1 cargo test --test it config_errors::` rewrites the expectations, for review.

use crate::common;

use std::path::Path;
use std::process::Command;

const DEFAULTS: [(&str, &str); 3] = [
    (
        "llm-canary.yaml",
        "targets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
    ),
    ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
    ("prompts/q.txt", "What is the capital of France?\n"),
];

struct Fixture {
    files: Vec<(String, String)>,
    expect: String,
}

fn parse(text: &str) -> Fixture {
    let mut files: Vec<(String, String)> = Vec::new();
    for part in text.split("== ").skip(1) {
        let (name, body) = part.split_once('\n').unwrap();
        files.push((name.trim().to_string(), body.to_string()));
    }
    let expect = files
        .iter()
        .position(|(n, _)| n == "expect")
        .map(|i| files.remove(i).1)
        .unwrap_or_default();
    Fixture {
        files,
        expect: expect.trim().to_string(),
    }
}

fn materialize(f: &Fixture) -> common::TempDir {
    let dir = common::TempDir::new("bad");
    for (name, text) in DEFAULTS {
        if !f.files.iter().any(|(n, _)| n == name) {
            dir.write(&[(name, text)]);
        }
    }
    for (name, text) in &f.files {
        dir.write(&[(name, text)]);
    }
    dir
}

#[test]
fn every_bad_config_fixture_gives_its_message() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-config");
    let mut entries: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(entries.len() >= 15, "at least 15 fixtures");
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for path in entries {
        let text = std::fs::read_to_string(&path).unwrap();
        let f = parse(&text);
        let dir = materialize(&f);
        let got = match llm_canary::testing::config::load(&dir.path().join("llm-canary.yaml")) {
            Ok(_) => "(loaded without error)".to_string(),
            Err(e) => e
                .to_string()
                .replace(&format!("{}/", dir.path().display()), ""),
        };
        assert!(
            !got.contains('\n'),
            "{}: the error must be one line: {got}",
            path.display()
        );
        if bless {
            let head = text.split("== expect").next().unwrap();
            std::fs::write(&path, format!("{head}== expect\n{got}\n")).unwrap();
        } else if got != f.expect {
            failures.push(format!(
                "{}:\n  want {}\n  got  {got}",
                path.file_name().unwrap().to_string_lossy(),
                f.expect
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn check_exits_2_with_one_line_on_stderr() {
    let f = parse(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/bad-config/bad-cron-range.txt"),
        )
        .unwrap(),
    );
    let dir = materialize(&f);
    for args in [vec!["check"], vec!["once"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args(&args)
            .arg("-c")
            .arg(dir.path().join("llm-canary.yaml"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ")
                && stderr.contains("probes/p.yaml:2:11: field schedule: invalid cron expression"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}
