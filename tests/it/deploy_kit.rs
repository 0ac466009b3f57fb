//! The deployment kit in `deploy/`, tested with the real tools: promtool (rules and their unit
//! tests), amtool (config, routing, templates), a Kubernetes schema validator, and the Grafana
//! dashboard's queries against a real Prometheus fed by the daemon through a Pushgateway.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::services::{self, binary, eventually, get};
use common::{root, run, TempDir};
use llm_canary::testing::sim::Sim;

/// `promtool <args> <file>` on a file of deploy/prometheus/, and what it printed.
fn promtool(args: &[&str], file: &str) -> String {
    run(Command::new(binary("promtool", "prometheus"))
        .args(args)
        .arg(root().join("deploy/prometheus").join(file)))
}

#[test]
fn prometheus_rules_check() {
    let out = promtool(&["check", "rules"], "llm-canary.rules.yml");
    assert!(out.contains("SUCCESS: 65 rules found"), "{out}");
}

#[test]
fn prometheus_alert_unit_tests() {
    let out = promtool(&["test", "rules"], "tests/alerts_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn prometheus_target_down_unit_tests() {
    // The hard-down page at probe intervals of 10 s, 1 min and 5 min, and with confirmation
    // runs at 30 s, 2 min and 5 min.
    let out = promtool(&["test", "rules"], "tests/down_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn prometheus_alert_text_holds_with_only_the_required_labels() {
    // A target with no model_version, cluster, env or region: every alert's text reads without
    // holes, and the ratio rules say nothing rather than NaN before runs are counted.
    let out = promtool(&["test", "rules"], "tests/labels_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn prometheus_certificate_expiry_unit_tests() {
    // 20 days away: nothing; 10 days: the ticket; 2 days or already expired: the page alone.
    let out = promtool(&["test", "rules"], "tests/cert_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn prometheus_weekly_baseline_unit_tests() {
    // Three weeks of a daily cycle, sampled only around the hours the checks look at and
    // evaluated every 10 minutes: a few seconds of promtool (a minute at 5-minute steps).
    let out = promtool(&["test", "rules"], "tests/weekly_test.yml");
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn the_rule_tests_are_what_the_generator_writes() {
    let dir = root().join("deploy/prometheus/tests");
    let files = [
        "alerts_test.yml",
        "down_test.yml",
        "fleet_test.yml",
        "build_change_test.yml",
        "labels_test.yml",
        "cert_test.yml",
        "weekly_test.yml",
    ];
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
        .collect();
    let tmp = TempDir::new("gen");
    std::fs::copy(dir.join("generate.py"), tmp.path().join("generate.py")).unwrap();
    run(Command::new("python3").arg(tmp.path().join("generate.py")));
    for (f, b) in files.iter().zip(before) {
        assert_eq!(
            std::fs::read_to_string(tmp.path().join(f)).unwrap(),
            b,
            "{f} is stale: run python3 deploy/prometheus/tests/generate.py"
        );
    }
}

#[test]
fn alertmanager_config_routes_and_templates() {
    let am = root().join("deploy/alertmanager");
    let amtool = binary("amtool", "prometheus-alertmanager");
    run(Command::new(&amtool)
        .args(["check-config"])
        .arg(am.join("alertmanager.yml")));
    for (severity, receiver) in [("P0", "page"), ("P1", "chat"), ("P2", "ticket")] {
        let out = Command::new(&amtool)
            .args(["config", "routes", "test", "--config.file"])
            .arg(am.join("alertmanager.yml"))
            .arg(format!("severity={severity}"))
            .args(["alertname=LLMCanaryTTFTAboveBaseline", "target=t"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            receiver,
            "{severity}"
        );
    }
    let render = |data: &str| {
        run(Command::new(&amtool)
            .current_dir(&am)
            .args(["template", "render", "--template.glob=templates/*.tmpl"])
            .arg(format!("--template.data=tests/{data}.json"))
            .arg("--template.text={{ template \"llm_canary.title\" . }}\n{{ template \"llm_canary.text\" . }}"))
    };
    for data in ["firing", "bare"] {
        let expected = std::fs::read_to_string(am.join(format!("tests/{data}.expected"))).unwrap();
        assert_eq!(render(data).trim_end(), expected.trim_end(), "{data}");
    }
    // Only the required labels (target, model): nothing empty is shown.
    let bare = render("bare");
    assert!(
        bare.contains("• model: sim-chat · target: bad-loop\n")
            && !bare.contains("cluster")
            && !bare.contains(", )"),
        "{bare}"
    );
    let rendered = render("firing");
    for field in [
        "chat-7b-v3 20240112",
        "cluster: inference-prod-01 · env: prod",
        "now: 1.95s",
        "baseline: 300.4ms",
        "ratio: 6.49x",
        "since: 2026-11-29T14:03:00Z",
        "runbook: https://",
        "dashboard: https://",
        "Resolved:",
    ] {
        assert!(
            rendered.contains(field),
            "the message lacks {field:?}:\n{rendered}"
        );
    }
    // The inhibitions, on a running Alertmanager: amtool posts a down target's alerts and reads
    // back that its failing-ratio and fleet down alerts are inhibited, another target's not.
    let out = run(Command::new("python3")
        .arg(am.join("tests/inhibit_test.py"))
        .env("AMTOOL", &amtool)
        .env(
            "ALERTMANAGER",
            binary("prometheus-alertmanager", "prometheus-alertmanager"),
        ));
    assert!(out.contains("SUCCESS"), "{out}");
}

/// A Prometheus or Alertmanager duration (`10s`, `1m30s`, `4h`).
fn duration(text: &str) -> Duration {
    let mut total = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number
            .parse()
            .unwrap_or_else(|_| panic!("duration {text:?}"));
        number.clear();
        total += n * match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            _ => panic!("duration {text:?}: unit {c:?}"),
        };
    }
    assert!(number.is_empty(), "duration {text:?} ends without a unit");
    Duration::from_secs(total)
}

#[test]
fn a_pages_resolution_reaches_the_pager_within_a_minute() {
    let file = root().join("deploy/alertmanager/alertmanager.yml");
    run(Command::new(binary("amtool", "prometheus-alertmanager"))
        .arg("check-config")
        .arg(&file));
    let parsed: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let root_route = &parsed["route"];
    let inherited = duration(root_route["group_interval"].as_str().unwrap_or("5m"));
    let pages: Vec<&serde_json::Value> = root_route["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["receiver"] == "page")
        .collect();
    // The P0 route itself, and any route before it that takes P0 alerts to the pager.
    assert!(
        pages.iter().any(|r| r["matchers"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "severity=\"P0\""))),
        "no route takes severity=P0 to the pager"
    );
    for route in pages {
        // A route without its own group_interval takes the parent's.
        let interval = route["group_interval"].as_str().map_or(inherited, duration);
        assert!(
            interval <= Duration::from_secs(60),
            "route {}: group_interval {interval:?}: a resolved page would wait that long",
            route["matchers"]
        );
    }
}

/// The rules files a Prometheus config loads, as written under `rule_files:`.
fn rule_files(config: &str) -> Vec<String> {
    let parsed: serde_json::Value = serde_saphyr::from_str(config).unwrap();
    parsed["rule_files"]
        .as_array()
        .expect("prometheus.yml has rule_files")
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// Every user-facing Markdown file: the README, CONTRIBUTING, docs/ and deploy/'s guides.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let mut stack = vec![root().join("docs"), root().join("deploy")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// Alert names in `text`: `LLMCanary` and the letters and digits after it. A name followed by a
/// regex's `.` or `*` (`LLMCanaryTTFT.*` in a matcher) is a pattern, not a name.
fn alert_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("LLMCanary") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(tail.len());
        if !tail[end..].starts_with(['.', '*']) {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// The alerts the docs name that no rules file `config` (a prometheus.yml beside the shipped
/// rules) loads defines, each with the page naming it; and how many names the docs hold.
fn alerts_not_loaded(config: &str) -> (Vec<String>, usize) {
    let dir = root().join("deploy/prometheus");
    let mut loaded = BTreeSet::new();
    for file in rule_files(config) {
        let text = std::fs::read_to_string(dir.join(&file)).unwrap();
        loaded.extend(
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("- alert: "))
                .map(|n| n.trim().to_string()),
        );
    }
    let mut missing = Vec::new();
    let mut named = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for name in alert_names(&text) {
            named += 1;
            if !loaded.contains(&name) {
                let at = file.strip_prefix(root()).unwrap().display().to_string();
                missing.push(format!("{at}: {name}"));
            }
        }
    }
    (missing, named)
}

#[test]
fn every_alert_the_docs_name_is_loaded_by_the_shipped_prometheus_yml() {
    let config = root().join("deploy/prometheus/prometheus.yml");
    let checked = run(Command::new(binary("promtool", "prometheus"))
        .args(["check", "config"])
        .arg(&config));
    assert!(checked.contains("SUCCESS"), "{checked}");
    let shipped = std::fs::read_to_string(&config).unwrap();
    let (missing, named) = alerts_not_loaded(&shipped);
    assert!(named >= 30, "only {named} alert names found in the docs");
    assert!(
        missing.is_empty(),
        "the docs name alerts that no rules file loaded by deploy/prometheus/prometheus.yml defines:\n{}",
        missing.join("\n")
    );
    // The check catches a rules file left out, as fleet.rules.yml once was.
    let without_fleet: String = shipped
        .lines()
        .filter(|l| !l.contains("- fleet.rules.yml"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (missing, _) = alerts_not_loaded(&without_fleet);
    assert!(
        missing
            .iter()
            .any(|m| m.ends_with(": LLMCanaryFleetAgentSilent")),
        "{missing:?}"
    );
    // A regex's pattern is no name.
    assert_eq!(
        alert_names("`LLMCanaryFleetAgentSilent` and LLMCanaryTTFT.*"),
        BTreeSet::from(["LLMCanaryFleetAgentSilent".to_string()])
    );
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

#[test]
fn every_manifest_parses_and_kubernetes_objects_validate() {
    let mut files = Vec::new();
    yaml_files(&root().join("deploy"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let docs: Result<Vec<serde_json::Value>, _> = serde_saphyr::from_str_multiple(&text);
        assert!(
            docs.is_ok(),
            "{} does not parse: {:?}",
            f.display(),
            docs.err()
        );
    }
    let validator = std::env::var("KUBERNETES_VALIDATE").unwrap_or_else(|_| {
        root()
            .join(".venv-tools/bin/kubernetes-validate")
            .display()
            .to_string()
    });
    assert!(
        Path::new(&validator).exists(),
        "{validator} is missing: scripts/test installs it (python3 -m venv .venv-tools && .venv-tools/bin/pip install kubernetes-validate)"
    );
    // The manifests one by one; tests/it/deploy_fleet.rs renders and validates every layout.
    let k8s = root().join("deploy/kubernetes");
    let manifests = [
        "common/namespace.yaml",
        "common/service.yaml",
        "common/networkpolicy.yaml",
        "common/pushgateway.yaml",
        "deployment.yaml",
    ];
    let out = run(Command::new(&validator)
        .arg("--strict")
        .args(manifests.iter().map(|m| k8s.join(m))));
    assert_eq!(out.matches("passed").count(), 7, "{out}");
}

#[test]
fn the_kubernetes_config_is_a_valid_agent_config() {
    // As the pods mount it: the config folder beside the probes folder.
    let common = root().join("deploy/kubernetes/common");
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .arg("check")
        .arg("-c")
        .arg(common.join("config/llm-canary.yaml"))
        .env("SHADOW_API_KEY", "test")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dep: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("deploy/kubernetes/deployment.yaml")).unwrap(),
    )
    .unwrap();
    // The container's limits are the daemon's budget.
    let c = &dep["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["resources"]["limits"]["memory"], "64Mi");
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
}

#[test]
fn systemd_accepts_the_unit_and_rates_it_hardened() {
    // The unit as installed, pointing at this build instead of /usr/local/bin.
    let dir = TempDir::new("unit");
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service"))
        .unwrap()
        .replace(
            "/usr/local/bin/llm-canary",
            env!("CARGO_BIN_EXE_llm-canary"),
        );
    dir.write(&[("llm-canary.service", &unit)]);
    let path = dir.path().join("llm-canary.service");
    let analyze = |args: &[&str]| {
        Command::new(binary("systemd-analyze", "systemd"))
            .args(args)
            .arg(&path)
            .output()
            .unwrap()
    };
    // Unknown or misspelt directives, bad values and a missing binary are errors here.
    let out = analyze(&["verify"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
    // systemd's exposure score, 0 (locked down) to 10 (fully exposed); --threshold is in tenths.
    let out = analyze(&["security", "--offline=true", "--threshold=20"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let score = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for llm-canary.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no exposure level in {text}"));
    assert!(
        out.status.success() && score <= 2.0,
        "exposure {score}:\n{text}"
    );
    println!("systemd-analyze security: exposure {score}");
}

/// The `sh` blocks of `deploy/INSTALL.md`'s VM section, as one script.
fn vm_guide_script() -> String {
    let guide = std::fs::read_to_string(root().join("deploy/INSTALL.md")).unwrap();
    let start = guide
        .find("## On a small VM (systemd)")
        .expect("INSTALL.md has its VM section");
    let section = &guide[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut script = String::new();
    // The indentation of the open ```sh fence (blocks inside list items are indented).
    let mut open: Option<usize> = None;
    for line in section.lines() {
        let indent = line.len() - line.trim_start().len();
        match (line.trim(), open) {
            ("```sh", None) => open = Some(indent),
            ("```", Some(_)) => open = None,
            (_, Some(fence)) => {
                script.push_str(line.get(fence.min(indent)..).unwrap_or_default());
                script.push('\n');
            }
            _ => {}
        }
    }
    script
}

/// Commands that need what this machine lacks: a running systemd, or the guide's example
/// endpoints.
const NOT_HERE: [&str; 5] = [
    "sudo systemctl",
    "systemctl",
    "journalctl",
    "curl",
    "sudo env CREDENTIALS_DIRECTORY=/etc/llm-canary/credentials llm-canary once",
];

#[test]
fn the_vm_install_guide_runs_as_written() {
    let script = vm_guide_script();
    for step in [
        "sudo install -m 0755 llm-canary /usr/local/bin/",
        "sudo tee /etc/llm-canary/llm-canary.yaml",
        "sudo install -m 0600 /dev/stdin /etc/llm-canary/credentials/shadow-api-key",
        "llm-canary check -c /etc/llm-canary/llm-canary.yaml",
        "sudo systemd-analyze verify /etc/systemd/system/llm-canary.service",
    ] {
        assert!(
            script.contains(step),
            "the guide lost the step {step:?}:\n{script}"
        );
    }
    // The machine's directories moved under a temporary root; the unit as it would be
    // installed there (its paths moved the same way).
    let tmp = TempDir::new("guide");
    let r = tmp.path().display().to_string();
    let moved = |text: &str| {
        text.replace("/etc/llm-canary", &format!("{r}/etc/llm-canary"))
            .replace("/usr/local/bin/", &format!("{r}/bin/"))
            .replace("/etc/systemd/system/", &format!("{r}/systemd/"))
    };
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service")).unwrap();
    tmp.write(&[("unit/llm-canary.service", &moved(&unit))]);
    std::fs::create_dir_all(tmp.path().join("bin")).unwrap();
    std::fs::create_dir_all(tmp.path().join("systemd")).unwrap();
    let runnable: Vec<&str> = script
        .lines()
        .filter(|l| !NOT_HERE.iter().any(|c| l.trim_start().starts_with(c)))
        .collect();
    let runnable = moved(&runnable.join("\n"))
        .replace("sudo ", "")
        .replace(
            "-m 0755 llm-canary ",
            &format!("-m 0755 {} ", env!("CARGO_BIN_EXE_llm-canary")),
        )
        .replace(
            "deploy/systemd/llm-canary.service",
            &format!("{r}/unit/llm-canary.service"),
        );
    let out = Command::new("bash")
        .args(["-euxo", "pipefail", "-c", &runnable])
        .current_dir(root())
        .env(
            "PATH",
            format!("{r}/bin:{}", std::env::var("PATH").unwrap()),
        )
        .env("SHADOW_API_KEY", "sk-test-0123")
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the guide failed here:\n{said}");
    println!("{said}");
    // `check` validated the config the guide wrote, found nothing to warn about, and the unit
    // passed `systemd-analyze verify` without a word about it.
    assert!(
        said.contains("llm-canary.yaml: valid: agent \"canary-eu-1\", 1 target(s), 5 probe(s)"),
        "{said}"
    );
    assert!(!said.contains("warning:"), "{said}");
    assert!(!said.contains("llm-canary.service:"), "{said}");
    let key = tmp.path().join("etc/llm-canary/credentials/shadow-api-key");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), "sk-test-0123");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn the_unit_verifies_with_no_key_one_key_or_several() {
    // INSTALL.md step 3: one LoadCredential= line per key, none without keys.
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service"))
        .unwrap()
        .replace(
            "/usr/local/bin/llm-canary",
            env!("CARGO_BIN_EXE_llm-canary"),
        );
    let one = "LoadCredential=shadow-api-key:/etc/llm-canary/credentials/shadow-api-key";
    assert!(unit.contains(one), "{unit}");
    let several =
        format!("{one}\nLoadCredential=prod-api-key:/etc/llm-canary/credentials/prod-api-key");
    for (what, text) in [
        ("no key", unit.replace(one, "")),
        ("one key", unit.clone()),
        ("several keys", unit.replace(one, &several)),
    ] {
        let dir = TempDir::new("keys");
        dir.write(&[("llm-canary.service", &text)]);
        let out = Command::new(binary("systemd-analyze", "systemd"))
            .arg("verify")
            .arg(dir.path().join("llm-canary.service"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{what}: {said}"
        );
    }
}

/// A child process killed on drop.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_prometheus_yml_scrapes_the_gateway_and_the_agent() {
    let shipped = std::fs::read_to_string(root().join("deploy/prometheus/prometheus.yml")).unwrap();
    let readme = std::fs::read_to_string(root().join("docs/daemon.md")).unwrap();
    assert!(
        readme.contains(&shipped),
        "docs/daemon.md shows deploy/prometheus/prometheus.yml as it is"
    );
    // As shipped: the gateway job keeps the pushed labels; the agents' job (agents that do not
    // push) has no need to; the model servers' job is a commented example, so the file loads
    // without servers that do not exist here.
    let parsed: serde_json::Value = serde_saphyr::from_str(&shipped).unwrap();
    let jobs = parsed["scrape_configs"].as_array().unwrap();
    let job = |name: &str| {
        jobs.iter()
            .find(|j| j["job_name"] == name)
            .unwrap_or_else(|| panic!("prometheus.yml has no job {name}"))
    };
    assert_eq!(job("pushgateway")["honor_labels"], true);
    assert!(job("llm_canary_agent")["honor_labels"].is_null());
    assert_eq!(jobs.len(), 2, "the model servers' job ships commented out");
    assert!(
        shipped.contains("# - job_name: vllm-chat-7b") && shipped.contains("`server_job`"),
        "prometheus.yml shows a model server's job named as its targets' server_job label"
    );

    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    let (pusher_port, scraped_port, prom_port) = (
        services::free_port(),
        services::free_port(),
        services::free_port(),
    );
    let alertmanager = common::closed_port();
    // The file as shipped, with this machine's ports and a test's pace.
    let mut config = shipped.clone();
    for (from, to) in [
        ("pushgateway:9091", format!("127.0.0.1:{}", gw.port)),
        ("canary-us-1:9464", format!("127.0.0.1:{scraped_port}")),
        ("alertmanager:9093", format!("127.0.0.1:{alertmanager}")),
        ("scrape_interval: 15s", "scrape_interval: 1s".into()),
        ("evaluation_interval: 30s", "evaluation_interval: 1s".into()),
    ] {
        assert!(
            config.contains(from),
            "prometheus.yml no longer has {from:?}"
        );
        config = config.replace(from, &to);
    }
    let dir = TempDir::new("promyml");
    dir.write(&[("prometheus.yml", &config)]);
    // Every rules file it loads, from beside it as shipped.
    for file in rule_files(&shipped) {
        let rules = std::fs::read_to_string(root().join("deploy/prometheus").join(&file)).unwrap();
        dir.write(&[(file.as_str(), &rules)]);
    }
    let checked = run(Command::new(binary("promtool", "prometheus"))
        .args(["check", "config"])
        .arg(dir.path().join("prometheus.yml")));
    assert!(checked.contains("SUCCESS"), "{checked}");

    // Two agents, as INSTALL.md and prometheus.yml have them: canary-eu-1 pushes and listens
    // (its /healthz and status page, for people; no scrape target), canary-us-1 only listens
    // and is scraped by the agents' job.
    let agent = |name: &str, port: u16, push: bool| {
        let push = if push {
            format!("push: {{url: \"{}\", min_interval: 300ms}}\n", gw.url())
        } else {
            String::new()
        };
        format!(
            "agent: {{name: {name}, listen: \"127.0.0.1:{port}\"}}\n{push}targets:\n  - {{name: t1, base_url: \"{}\", model: m1, server: vllm, labels: {{model_version: \"1\"}}}}\n",
            sim.base_url("healthy")
        )
    };
    let probe = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\n";
    let start = |name: &str, port: u16, push: bool| {
        common::daemon::Daemon::start(
            &[
                ("llm-canary.yaml", &agent(name, port, push)),
                ("probes/p.yaml", probe),
                ("prompts/q.txt", common::PROMPT),
            ],
            port,
            &[],
        )
    };
    let _pusher = start("canary-eu-1", pusher_port, true);
    let _scraped = start("canary-us-1", scraped_port, false);
    let _prom = Killed(
        Command::new(binary("prometheus", "prometheus"))
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start Prometheus"),
    );
    let prom = format!("http://127.0.0.1:{prom_port}");
    services::wait_ready(&format!("{prom}/-/ready"), Duration::from_secs(30)).await;
    let api = |path: String| {
        let url = format!("{prom}{path}");
        async move { serde_json::from_str::<serde_json::Value>(&get(&url).await).ok() }
    };
    let query = |q: String| {
        let api = &api;
        async move {
            let v = api(format!("/api/v1/query?query={}", urlencode(&q))).await?;
            v["data"]["result"].as_array().cloned()
        }
    };

    // Two targets, both up: the gateway and the agent that does not push. The pushing agent is
    // none (its /metrics would repeat what it pushes).
    let targets = eventually("both jobs up", Duration::from_secs(60), || async {
        let v = api("/api/v1/targets".into()).await?;
        let targets = v["data"]["activeTargets"].as_array()?.clone();
        let all_up = {
            let mut up: Vec<&str> = targets
                .iter()
                .filter(|t| t["health"] == "up")
                .filter_map(|t| t["scrapePool"].as_str())
                .collect();
            up.sort();
            up == ["llm_canary_agent", "pushgateway"]
        };
        (all_up && targets.len() == 2).then_some(targets)
    })
    .await;
    let gateway = targets
        .iter()
        .find(|t| t["scrapePool"] == "pushgateway")
        .unwrap();
    assert_eq!(gateway["labels"]["job"], "pushgateway", "{gateway}");
    assert_eq!(
        gateway["labels"]["instance"],
        format!("127.0.0.1:{}", gw.port),
        "{gateway}"
    );
    // honor_labels matters: the gateway's series keep the job and instance the agent pushed
    // under, not the scrape target's (above), and nothing is renamed to exported_*.
    for q in [
        "push_time_seconds{job=\"llm_canary\",instance=\"canary-eu-1\"}".to_string(),
        "llm_canary_probe_success{job=\"llm_canary\",instance=\"canary-eu-1\",target=\"t1\"}"
            .to_string(),
        format!("llm_canary_probe_success{{job=\"llm_canary_agent\",instance=\"127.0.0.1:{scraped_port}\",target=\"t1\",model_version=\"1\"}}"),
    ] {
        eventually(&q, Duration::from_secs(60), || {
            let q = q.clone();
            let query = &query;
            async move { query(q).await?.first().cloned() }
        })
        .await;
    }
    for q in ["{exported_job!=\"\"}", "{exported_instance!=\"\"}"] {
        let found = query(q.to_string()).await.unwrap();
        assert!(found.is_empty(), "{q}: {found:?}");
    }
    // Each agent's runs are counted once: one series per agent, each by its own path.
    let mut seen: Vec<(String, String)> = query("llm_canary_probe_success{target=\"t1\"}".into())
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let label = |k: &str| r["metric"][k].as_str().unwrap_or_default().to_string();
            (label("job"), label("instance"))
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("llm_canary".to_string(), "canary-eu-1".to_string()),
            (
                "llm_canary_agent".to_string(),
                format!("127.0.0.1:{scraped_port}")
            ),
        ],
        "every agent's series reach Prometheus once"
    );
    // Every rules file beside it is loaded (the fleet's and the SLO example's among them, so
    // every alert the docs name can fire), and alerts have somewhere to go.
    let v = api("/api/v1/rules".into()).await.unwrap();
    let files: BTreeSet<String> = v["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["file"].as_str()?.rsplit('/').next().map(String::from))
        .collect();
    let listed: BTreeSet<String> = rule_files(&shipped).into_iter().collect();
    assert!(
        listed.contains("fleet.rules.yml") && files == listed,
        "rule groups from {files:?}, rule_files {listed:?}"
    );
    let v = api("/api/v1/alertmanagers".into()).await.unwrap();
    assert!(
        v["data"]["activeAlertmanagers"][0]["url"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("http://127.0.0.1:{alertmanager}/")),
        "{v}"
    );
}

/// Percent-encoding for a query parameter.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn the_systemd_unit_has_what_the_guide_relies_on() {
    let unit = std::fs::read_to_string(root().join("deploy/systemd/llm-canary.service")).unwrap();
    for want in [
        "[Unit]",
        "[Service]",
        "[Install]",
        "ExecStart=/usr/local/bin/llm-canary run",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "DynamicUser=yes",
        "MemoryMax=64M",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
    ] {
        assert!(unit.contains(want), "the unit lacks {want}");
    }
}

/// The servers' own series behind the two targets the dashboard test probes, as OpenMetrics
/// text with timestamps every 15 s over the 70 minutes before `end`. vLLM (job `vllm-t1`, t1's
/// `server_job`) is "false busy" for the last 10 minutes: requests queue for 2 s while it runs
/// 1 of the 12 it ran before, KV cache at 10 %. SGLang (job `sglang-t2`) is busy for real then:
/// queue 3 s with 16 running, its peak, KV cache at 97 %.
fn server_history(end: u64) -> String {
    struct Server {
        job: &'static str,
        queue: &'static str,
        buckets: &'static [f64],
        /// (name, before, during the last 10 minutes)
        gauges: [(&'static str, f64, f64); 3],
        /// (answers per step, each one's queue time): before, during
        waits: [(u32, f64); 2],
    }
    let servers = [
        Server {
            job: "vllm-t1",
            queue: "vllm:request_queue_time_seconds",
            buckets: &[0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0],
            gauges: [
                ("vllm:num_requests_running", 12.0, 1.0),
                ("vllm:num_requests_waiting", 0.0, 20.0),
                ("vllm:kv_cache_usage_perc", 0.6, 0.1),
            ],
            waits: [(25, 0.02), (5, 2.0)],
        },
        Server {
            job: "sglang-t2",
            queue: "sglang:queue_time_seconds",
            buckets: &[0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0],
            gauges: [
                ("sglang:num_running_reqs", 10.0, 16.0),
                ("sglang:num_queue_reqs", 0.0, 30.0),
                ("sglang:token_usage", 0.5, 0.97),
            ],
            waits: [(20, 0.05), (10, 3.0)],
        },
    ];
    let steps: Vec<u64> = (end - 70 * 60..=end).step_by(15).collect();
    let late = |t: u64| usize::from(t >= end - 10 * 60);
    let mut om = String::new();
    for s in &servers {
        let job = format!("job=\"{}\",instance=\"10.0.0.1:8000\"", s.job);
        for (name, before, during) in s.gauges {
            om.push_str(&format!("# TYPE {name} gauge\n"));
            for &t in &steps {
                let v = [before, during][late(t)];
                om.push_str(&format!("{name}{{{job}}} {v} {t}\n"));
            }
        }
        om.push_str(&format!("# TYPE {} histogram\n", s.queue));
        let mut counts = vec![0u32; s.buckets.len() + 1];
        let mut sum = 0.0;
        for &t in &steps {
            let (n, wait) = s.waits[late(t)];
            for (i, le) in s.buckets.iter().chain([f64::INFINITY].iter()).enumerate() {
                if wait <= *le {
                    counts[i] += n;
                }
                let le = if le.is_finite() {
                    le.to_string()
                } else {
                    "+Inf".into()
                };
                om.push_str(&format!(
                    "{}_bucket{{{job},le=\"{le}\"}} {} {t}\n",
                    s.queue, counts[i]
                ));
            }
            sum += f64::from(n) * wait;
            om.push_str(&format!(
                "{}_count{{{job}}} {} {t}\n",
                s.queue,
                counts[s.buckets.len()]
            ));
            om.push_str(&format!("{}_sum{{{job}}} {sum} {t}\n", s.queue));
        }
    }
    om
}

/// A query of the dashboard's SLO row.
pub fn is_slo_query(expr: &str) -> bool {
    expr.contains("llm_canary:slo_") || expr.contains("llm_canary:goodput_ratio")
}

/// Grafana variables become "all": `.*` for label matchers, a range for `$__rate_interval`.
pub fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$env", ".*")
        .replace("$cluster", ".*")
        .replace("$model", ".*")
        .replace("$target", ".*")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_parses_and_returns_data() {
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana/llm-canary.json")).unwrap(),
    )
    .unwrap();
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let gw = services::pushgateway().await;
    // 80 minutes of recorded TTFT p95 for the target the daemon probes below, alternating 100 ms
    // and 120 ms: the sliding baseline (the hour before the last 15 minutes) is then 110 ms and
    // its upper edge 110 + 3 x 10 ms, which the band panel must show.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut history = String::from("# TYPE llm_canary:ttft_seconds:p95_5m gauge\n");
    for (i, t) in (now - 80 * 60..now - 60).step_by(30).enumerate() {
        let v = if i % 2 == 0 { 0.10 } else { 0.12 };
        history.push_str(&format!("llm_canary:ttft_seconds:p95_5m{{target=\"t1\",probe=\"p\",model=\"m1\",model_version=\"1\",cluster=\"c1\",env=\"prod\"}} {v} {t}\n"));
    }
    history.push_str(&server_history(now - 15));
    history.push_str("# EOF\n");
    let prom = services::prometheus_with_rules(
        &[format!("127.0.0.1:{}", gw.port)],
        &[root().join("deploy/prometheus/llm-canary.rules.yml")],
        Some(&history),
    )
    .await;
    let dir = TempDir::new("dash");
    // Each target names the job of its server's own scrape (see server_history).
    let agent = format!(
        "agent: {{name: canary-dash, labels: {{region: test}}}}\npush: {{url: \"{}\", min_interval: 300ms}}\ntargets:\n  - {{name: t1, base_url: \"{url}\", model: m1, server: vllm, labels: {{env: prod, cluster: c1, model_version: \"1\", server_job: vllm-t1}}}}\n  - {{name: t2, base_url: \"{url}\", model: m2, server: sglang, labels: {{env: prod, cluster: c1, model_version: \"1\", server_job: sglang-t2}}}}\n  - {{name: t3, base_url: \"{llama}\", model: m3, server: llama-cpp, labels: {{env: prod, cluster: c1, model_version: \"1\"}}}}\n",
        gw.url(),
        url = sim.base_url("healthy"),
        // A server that sends its own timings: the panel of ours beside the server's TTFT.
        llama = sim.base_url("llama-cpp")
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\nchecks: {expect: \"(?i)paris\"}\n"),
        // The prefix-cache row's figures.
        ("probes/cache.yaml", "name: cache\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 32\ncache_check: {prefix_chars: 1000}\nchecks: {expect: \"(?i)paris\"}\n"),
        // The context ladder's row: a rung's prefill speed, from a firing's second rung on.
        ("probes/ladder.yaml", "name: ladder\nschedule: \"* * * * * *\"\nmax_tokens: 32\nladder: {sizes: [64, 256]}\n"),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let _daemon = services::daemon(&dir.path().join("llm-canary.yaml"));

    let query = |expr: String| {
        let url = format!("{}/api/v1/query", prom.url());
        async move {
            let r = reqwest::Client::new()
                .get(url)
                .query(&[("query", expr)])
                .send()
                .await
                .unwrap();
            serde_json::from_str::<serde_json::Value>(&r.text().await.unwrap()).unwrap()
        }
    };
    let mut exprs = Vec::new();
    // Rows hold no queries. The SLO row reads the rules `llm-canary rules` writes for a
    // config's `slo:`: tests/it/slo_rules.rs checks it.
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if is_slo_query(t["expr"].as_str().unwrap()) {
                continue;
            }
            exprs.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert!(exprs.len() >= 27, "{}", exprs.len());
    // The change annotations (a new serving build, a changed temperature-0 answer) must parse;
    // this daemon sees no change, so they have no data to show.
    let annotations = dash["annotations"]["list"].as_array().unwrap();
    assert_eq!(annotations.len(), 2);
    for a in annotations {
        let e = substitute(a["expr"].as_str().unwrap());
        let v = query(e.clone()).await;
        assert_eq!(v["status"], "success", "annotation {e} does not parse: {v}");
    }
    for (title, expr) in &exprs {
        let e = substitute(expr);
        let v = query(e.clone()).await;
        assert_eq!(v["status"], "success", "{title}: {e} does not parse: {v}");
        let first = eventually(
            &format!("data for {title}: {e}"),
            Duration::from_secs(60),
            || {
                let e = e.clone();
                let q = &query;
                async move {
                    let v = q(e).await;
                    let first = v["data"]["result"].as_array()?.first()?.clone();
                    Some(first)
                }
            },
        )
        .await;
        // The band is the rules' sliding baseline over the backfilled history.
        let value = || first["value"][1].as_str().unwrap().parse::<f64>().unwrap();
        if expr.contains(":baseline_upper") {
            assert!((value() - 0.14).abs() < 0.002, "{title}: {e} = {first}");
        } else if expr.contains(":baseline") {
            assert!((value() - 0.11).abs() < 0.002, "{title}: {e} = {first}");
        }
    }
    // The root-cause row shows the servers' figures on both targets (vLLM's on t1, SGLang's on
    // t2), and tells vLLM's false busy from SGLang's real one.
    let root_cause: Vec<_> = exprs
        .iter()
        .filter(|(_, e)| e.contains("llm_canary:server_"))
        .collect();
    assert_eq!(root_cause.len(), 5, "{root_cause:?}");
    for (title, expr) in root_cause {
        let e = substitute(expr);
        let by_target = eventually(
            &format!("t1 and t2 in {title}: {e}"),
            Duration::from_secs(60),
            || {
                let e = e.clone();
                let q = &query;
                async move {
                    let v = q(e).await;
                    let values: std::collections::BTreeMap<String, f64> = v["data"]["result"]
                        .as_array()?
                        .iter()
                        .filter_map(|r| {
                            let value = r["value"][1].as_str()?.parse().ok()?;
                            Some((r["metric"]["target"].as_str()?.to_string(), value))
                        })
                        .collect();
                    (values.len() == 2).then_some(values)
                }
            },
        )
        .await;
        if expr.contains("server_false_busy") {
            assert_eq!((by_target["t1"], by_target["t2"]), (1.0, 0.0), "{title}");
        } else if expr.contains("server_queue_time") {
            assert!(
                (by_target["t1"] - 1.975).abs() < 0.01,
                "{title}: {by_target:?}"
            );
            assert!(
                (by_target["t2"] - 2.95).abs() < 0.01,
                "{title}: {by_target:?}"
            );
        }
    }
    // The variables list values too.
    for v in dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["type"] == "query")
    {
        let q = v["query"]["query"].as_str().unwrap();
        let (selector, label) = q
            .trim_start_matches("label_values(")
            .trim_end_matches(')')
            .rsplit_once(", ")
            .unwrap();
        let url = format!(
            "{}/api/v1/label/{label}/values?match[]={}",
            prom.url(),
            substitute(selector)
        );
        let body: serde_json::Value = serde_json::from_str(&get(&url).await).unwrap();
        assert!(
            !body["data"].as_array().unwrap().is_empty(),
            "variable {label}: {body}"
        );
    }
}
