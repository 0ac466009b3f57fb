//! The docs against what they describe: docs/commands.md's table against the commands and flags
//! clap knows, in both directions; the man page against every command; every alert's
//! `runbook_url` against the runbook's headings; CHANGELOG.md's newest release against the
//! version the binary reports, and scripts/release refusing a version the CHANGELOG lacks.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use clap::CommandFactory;
use common::{root, run, TempDir};
use llm_canary::cli::Cli;

/// Every command clap knows, with the flags a user writes for it: the long form, and the short
/// form where there is one (the table writes `-c FILE` for `--config`). clap's own `--help` and
/// `--version`, and the global `--log-level` (documented below the table), are left out.
fn clap_commands() -> BTreeMap<String, Vec<(String, Option<String>)>> {
    Cli::command()
        .get_subcommands()
        .map(|c| {
            let flags = c
                .get_arguments()
                .filter(|a| !a.is_global_set())
                .filter_map(|a| {
                    let long = a.get_long()?;
                    let short = a.get_short().map(|s| format!("-{s}"));
                    Some((format!("--{long}"), short))
                })
                .filter(|(long, _)| long != "--help" && long != "--version")
                .collect();
            (c.get_name().to_string(), flags)
        })
        .collect()
}

/// The table of docs/commands.md: each row's command (the first word of its first cell) and
/// every flag written in that cell (`--x` and `-x`).
fn documented_commands(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut rows = BTreeMap::new();
    let start = text
        .find("| command | does | exit |")
        .expect("docs/commands.md has the table of commands");
    for line in text[start..].lines().skip(2) {
        if !line.starts_with("| `") {
            break;
        }
        // The first cell ends at the first `|` that is not escaped (`table\|json`).
        let cell = line[2..]
            .split(" | ")
            .next()
            .expect("a row has cells")
            .replace("\\|", "|");
        let name = cell
            .trim_start_matches('`')
            .split_whitespace()
            .next()
            .expect("a row names its command")
            .trim_end_matches('`')
            .to_string();
        let flags = cell
            .split(|c: char| c.is_whitespace() || "`[]|".contains(c))
            .filter(|w| w.starts_with('-') && w.len() > 1)
            .map(|w| w.trim_end_matches("...").to_string())
            .collect();
        rows.insert(name, flags);
    }
    rows
}

/// What differs between clap's commands and the table's; empty when they agree.
fn drift(
    clap: &BTreeMap<String, Vec<(String, Option<String>)>>,
    docs: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, flags) in clap {
        let Some(documented) = docs.get(name) else {
            problems.push(format!("command `{name}` is not in the table"));
            continue;
        };
        for (long, short) in flags {
            let written =
                documented.contains(long) || short.as_ref().is_some_and(|s| documented.contains(s));
            if !written {
                problems.push(format!("`{name} {long}` is not documented"));
            }
        }
        for flag in documented {
            let real = flags
                .iter()
                .any(|(long, short)| long == flag || short.as_deref() == Some(flag.as_str()));
            if !real {
                problems.push(format!("`{name} {flag}` is documented but does not exist"));
            }
        }
    }
    for name in docs.keys().filter(|n| !clap.contains_key(*n)) {
        problems.push(format!("command `{name}` is documented but does not exist"));
    }
    problems
}

fn commands_md() -> String {
    std::fs::read_to_string(root().join("docs/commands.md")).unwrap()
}

#[test]
fn commands_md_documents_every_command_and_flag_and_no_other() {
    let problems = drift(&clap_commands(), &documented_commands(&commands_md()));
    assert!(
        problems.is_empty(),
        "docs/commands.md and the CLI disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_comparison_catches_drift_either_way() {
    let clap = clap_commands();
    let text = commands_md();
    // A flag the docs lose, a flag only the docs have, a command the docs lose.
    let lost_flag = text.replacen("[--samples N \\| --max-samples N]", "[--samples N]", 1);
    assert!(drift(&clap, &documented_commands(&lost_flag))
        .contains(&"`gate --max-samples` is not documented".to_string()));
    let made_up = text.replacen(
        "`check -c FILE [--web.config.file FILE]`",
        "`check -c FILE [--web.config.file FILE] [--strict]`",
        1,
    );
    assert!(drift(&clap, &documented_commands(&made_up))
        .contains(&"`check --strict` is documented but does not exist".to_string()));
    let docs = documented_commands(&text);
    let mut fewer = docs.clone();
    fewer.remove("judge");
    assert!(drift(&clap, &fewer).contains(&"command `judge` is not in the table".to_string()));
    // And a command only the docs have.
    let mut more = docs;
    more.insert("replay".to_string(), BTreeSet::new());
    assert!(drift(&clap, &more)
        .contains(&"command `replay` is documented but does not exist".to_string()));
}

#[test]
fn the_man_page_has_a_section_for_every_command() {
    let dir = TempDir::new("man");
    let page = dir.path().join("llm-canary.1");
    run(Command::new(root().join("scripts/man-page"))
        .arg(env!("CARGO_BIN_EXE_llm-canary"))
        .arg(&page));
    let text = std::fs::read_to_string(&page).unwrap();
    for name in clap_commands().keys() {
        assert!(
            text.contains(&format!(".SS llm-canary {name}\n")),
            "the man page has no section for `{name}`"
        );
    }
    // Each section holds the command's own --help, not just its name.
    assert!(text.contains("--max-samples"), "{text}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_runbook_url_points_at_a_runbook_heading() {
    const RUNBOOK: &str = "docs/metrics-and-alerts.md";
    let runbook = std::fs::read_to_string(root().join(RUNBOOK)).unwrap();
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let mut seen = 0;
    for entry in std::fs::read_dir(root().join("deploy/prometheus")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|l| l.contains("runbook_url:")) {
            let url = line
                .split('"')
                .nth(1)
                .unwrap_or_else(|| panic!("{}: {line}", path.display()));
            let (page, fragment) = url
                .split_once('#')
                .unwrap_or_else(|| panic!("{}: {url} has no anchor", path.display()));
            assert!(
                page.ends_with(RUNBOOK),
                "{}: {url} is not the runbook ({RUNBOOK})",
                path.display()
            );
            assert!(
                anchors.contains(fragment),
                "{}: {url}: {RUNBOOK} has no heading with the anchor #{fragment}",
                path.display()
            );
            seen += 1;
        }
    }
    assert!(seen >= 25, "only {seen} runbook_url annotations found");
}

/// The version a `## [x.y.z]` heading of CHANGELOG.md releases; `None` for `[Unreleased]`.
fn released(line: &str) -> Option<&str> {
    let version = line.strip_prefix("## [")?.split(']').next()?;
    version
        .starts_with(|c: char| c.is_ascii_digit())
        .then_some(version)
}

#[test]
fn the_newest_changelog_release_is_the_version_the_binary_reports() {
    const VERSION: &str = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).unwrap();
    let newest = changelog.lines().find_map(released);
    assert_eq!(
        newest,
        Some(VERSION),
        "CHANGELOG.md's newest release section is not Cargo.toml's version"
    );
    let out = run(Command::new(env!("CARGO_BIN_EXE_llm-canary")).arg("--version"));
    assert!(
        out.starts_with(&format!("llm-canary {VERSION} ")),
        "--version: {out}"
    );
    assert_eq!(released("## [Unreleased]"), None);
    assert_eq!(released("## [0.1.0] - 2026-12-01"), Some("0.1.0"));
}

/// `scripts/release --check VERSION` in a folder holding the script, Cargo.toml and `changelog`.
fn release_check(changelog: &str) -> (Option<i32>, String) {
    let dir = TempDir::new("release-check");
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let script = std::fs::read_to_string(root().join("scripts/release")).unwrap();
    dir.write(&[
        ("Cargo.toml", &cargo),
        ("CHANGELOG.md", changelog),
        ("scripts/release", &script),
    ]);
    let out = Command::new("bash")
        .arg(dir.path().join("scripts/release"))
        .args(["--check", env!("CARGO_PKG_VERSION")])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_release_without_its_changelog_section_is_refused() {
    const VERSION: &str = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).unwrap();
    let (code, out) = release_check(&changelog);
    assert_eq!(code, Some(0), "the repository as it is: {out}");
    // The section still under [Unreleased]: no `## [VERSION]` heading.
    let heading = format!("## [{VERSION}]");
    let unreleased = changelog.replace(&heading, "### Released");
    let (code, out) = release_check(&unreleased);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains(&format!(
            "CHANGELOG.md has no '## [{VERSION}] - DATE' section"
        )),
        "{out}"
    );
}

/// The README is for someone with a release download: its quick start unpacks the tarball
/// scripts/release writes and runs the binary in it; building and the test tools are
/// CONTRIBUTING.md's, with one pointer left.
#[test]
fn the_readme_starts_from_the_release_tarball() {
    const VERSION: &str = env!("CARGO_PKG_VERSION");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let release = std::fs::read_to_string(root().join("scripts/release")).unwrap();
    assert!(release.contains("name=\"llm-canary-$version-$1-linux-gnu\""));
    let start = readme
        .find("## Quick start")
        .expect("README has a quick start");
    let quick = &readme[start..start + readme[start + 3..].find("\n## ").unwrap()];
    let tarball = format!("llm-canary-{VERSION}-x86_64-linux-gnu");
    for step in [
        format!("{tarball}.tar.gz"),
        format!("tar -xzf {tarball}.tar.gz && cd {tarball}"),
        "./llm-canary demo".to_string(),
        "./llm-canary check".to_string(),
    ] {
        assert!(
            quick.contains(&step),
            "the quick start lost {step:?}:\n{quick}"
        );
    }
    assert!(!readme.contains("cargo run"), "a source checkout's command");
    assert!(
        readme.contains("`scripts/test` runs the whole test suite")
            && readme.contains("CONTRIBUTING.md#building-from-source"),
        "README points contributors at CONTRIBUTING.md and scripts/test"
    );
    // The test suite's prerequisites are for contributors.
    let contributing = std::fs::read_to_string(root().join("CONTRIBUTING.md")).unwrap();
    for tool in ["kubectl", "chromium", "faketime"] {
        assert!(!readme.contains(tool), "README.md names {tool}");
        assert!(contributing.contains(tool), "CONTRIBUTING.md lost {tool}");
    }
}

/// No install creates a `llm-canary` user everywhere (the tarball's unit has `DynamicUser=yes`,
/// the image runs as 65532), so no page tells the reader to become it.
#[test]
fn no_page_runs_a_command_as_a_user_only_the_package_has() {
    let mut pages = vec![
        root().join("README.md"),
        root().join("CONTRIBUTING.md"),
        root().join("deploy/INSTALL.md"),
    ];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        pages.push(entry.unwrap().path());
    }
    for page in pages
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(page).unwrap();
        assert!(
            !text.contains("sudo -u llm-canary"),
            "{} runs a command as the user only the Debian package creates",
            page.display()
        );
    }
}
