//! Names the commit the binary is built from, for `llm-canary --version` ("0.1.0 (abc123def456)").
//!
//! `LLM_CANARY_COMMIT` overrides it (a packager building from a tarball); outside a git checkout,
//! without the override, the commit reads "unknown". The script reruns only when HEAD moves: on
//! a checkout, a commit, or the override changing.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=LLM_CANARY_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = match std::env::var("LLM_CANARY_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_owned(),
        _ if own_checkout() => {
            watch_head();
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
        _ => "unknown".to_owned(),
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=LLM_CANARY_VERSION={version} ({commit})");
}

/// `git <args>` in the crate's directory, its trimmed output when it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env_path("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// Whether the crate is the top of a git checkout, not a copy inside some other repository
/// (a vendored source tree), whose commit would be the wrong one.
fn own_checkout() -> bool {
    let top = git(&["rev-parse", "--show-toplevel"]).map(std::fs::canonicalize);
    let here = std::fs::canonicalize(env_path("CARGO_MANIFEST_DIR"));
    matches!((top, here), (Some(Ok(top)), Ok(here)) if top == here)
}

fn env_path(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| ".".to_owned())
}

/// Asks cargo to rerun when HEAD or the branch it points to moves. `git rev-parse --git-path`
/// resolves both in a worktree too, whose `.git` is a file and whose branches live in the main
/// checkout's git directory. A branch may also sit in packed-refs. Only files that exist are
/// named: cargo reruns a script on every build while a named file is missing.
fn watch_head() {
    let mut files = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(git(&["rev-parse", "--git-path", &branch]));
    }
    files.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    let dir = env_path("CARGO_MANIFEST_DIR");
    for file in files.into_iter().flatten() {
        let path = Path::new(&dir).join(file);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
