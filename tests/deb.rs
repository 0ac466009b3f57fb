//! The Debian package as a user meets it: installed with `dpkg -i` on this machine, its unit
//! verified by systemd, its config checked as the service's user, then removed (config kept)
//! and purged. Needs root and dpkg, and changes the machine: behind the `deb` feature, run by
//! scripts/test-release on the package scripts/release wrote (its binary's glibc floor is
//! tests/release.rs's).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = "/usr/bin/llm-canary";
const CONFIG: &str = "/etc/llm-canary/llm-canary.yaml";
const UNIT: &str = "/usr/lib/systemd/system/llm-canary.service";
/// The package scripts/release wrote.
fn deb() -> PathBuf {
    let path = match std::env::var_os("LLM_CANARY_DEB") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "dist/llm-canary_{}-1_amd64.deb",
            env!("CARGO_PKG_VERSION")
        )),
    };
    assert!(
        path.is_file(),
        "no package at {}: build it with scripts/release (scripts/test-release tests it)",
        path.display()
    );
    path
}

/// Runs `program args`, failing with a sentence when the program is not installed.
fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): this test needs it installed"))
}

/// Runs `program args`, which must succeed; its stdout.
fn ok(program: &str, args: &[&str]) -> String {
    let out = output(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The package's state in dpkg's database ("install ok installed", "deinstall ok
/// config-files"), or None when dpkg does not know it.
fn status() -> Option<String> {
    let out = output("dpkg-query", &["-W", "-f=${Status}", "llm-canary"]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty() && !text.contains("not-installed")).then_some(text)
}

#[test]
fn installs_verifies_checks_its_config_and_removes_cleanly() {
    let uid = ok("id", &["-u"]);
    assert_eq!(
        uid.trim(),
        "0",
        "this test installs a package: run it as root (scripts/test-release, or sudo)"
    );
    ok("dpkg", &["--version"]);
    let deb = deb();
    let deb = deb.to_str().expect("a UTF-8 path");
    // A package left by an interrupted run would make this an upgrade: start clean.
    if status().is_some() {
        ok("dpkg", &["-P", "llm-canary"]);
    }

    ok("dpkg", &["-i", deb]);
    assert_eq!(status().as_deref(), Some("install ok installed"));
    let version = ok(BIN, &["--version"]);
    assert!(
        version.starts_with(&format!("llm-canary {} (", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    // The config, probes and prompts are conffiles: dpkg keeps a user's edits.
    let conffiles = ok("dpkg-query", &["-W", "-f=${Conffiles}", "llm-canary"]);
    for file in [
        CONFIG,
        "/etc/llm-canary/probes/capital.yaml",
        "/etc/llm-canary/prompts/capital.txt",
        "/etc/llm-canary/schemas/capital.json",
    ] {
        assert!(
            conffiles.contains(file),
            "{file} not a conffile:\n{conffiles}"
        );
    }
    let listed = ok("dpkg", &["-L", "llm-canary"]);
    assert!(
        listed.contains("/usr/share/man/man1/llm-canary.1.gz"),
        "{listed}"
    );
    let man = ok("sh", &["-c", "zcat /usr/share/man/man1/llm-canary.1.gz"]);
    assert!(
        man.contains(".TH LLM-CANARY") && man.contains("llm-canary gate"),
        "{man}"
    );

    // The system user, and the unit as systemd reads it: valid, and as hardened as the one in
    // deploy/systemd/.
    let user = ok("getent", &["passwd", "llm-canary"]);
    assert!(user.contains("nologin"), "{user}");
    let out = output("systemd-analyze", &["verify", UNIT]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    let unit = std::fs::read_to_string(UNIT).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/llm-canary run -c /etc/llm-canary/llm-canary.yaml")
            && unit.contains("User=llm-canary")
            && !unit.contains("DynamicUser"),
        "{unit}"
    );
    let out = output(
        "systemd-analyze",
        &["security", "--offline=true", "--threshold=20", UNIT],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The example config passes `check`, read as the service's user.
    let checked = ok(
        "runuser",
        &["-u", "llm-canary", "--", BIN, "check", "-c", CONFIG],
    );
    assert!(checked.contains("capital"), "{checked}");

    // Removed: the binary and the unit go, the config stays.
    ok("dpkg", &["-r", "llm-canary"]);
    assert_eq!(status().as_deref(), Some("deinstall ok config-files"));
    assert!(!Path::new(BIN).exists() && !Path::new(UNIT).exists());
    assert!(Path::new(CONFIG).is_file() && Path::new("/etc/llm-canary/probes").is_dir());

    // Purged: the config goes too.
    ok("dpkg", &["-P", "llm-canary"]);
    assert_eq!(status(), None);
    assert!(
        !Path::new("/etc/llm-canary").exists(),
        "/etc/llm-canary is left after a purge"
    );
}
