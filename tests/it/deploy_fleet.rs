//! The Kubernetes layouts in `deploy/kubernetes/` (one agent, the fleet, HA, remote-write,
//! regions) rendered with `kubectl kustomize` and validated with kubernetes-validate; every
//! pod's view of its config (the ConfigMaps and Secrets it mounts, the environment the
//! StatefulSet gives it) checked with `llm-canary check`; the fleet's Prometheus rules with
//! promtool; the Pushgateway's scrape job; and the commands of INSTALL.md's Kubernetes section
//! that can run here, run.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;

use common::services::binary;
use common::{root, run, TempDir};
use serde_json::Value;

const LAYOUTS: [&str; 6] = [
    "deploy/kubernetes",
    "deploy/kubernetes/fleet",
    "deploy/kubernetes/fleet-ha",
    "deploy/kubernetes/fleet-remote-write",
    "deploy/kubernetes/regions/eu-west",
    "deploy/kubernetes/regions/us-east",
];

fn kubectl() -> String {
    binary(
        "kubectl",
        "kubectl (kustomize v5 inside; Debian's kubernetes-client 1.20 is too old)",
    )
}

/// `kubectl kustomize` of a layout: the text and its documents.
fn render(layout: &str) -> (String, Vec<Value>) {
    let out = Command::new(kubectl())
        .args(["kustomize"])
        .arg(root().join(layout))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{layout}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
    (text, docs)
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// One pod as Kubernetes would start it: its name, its resolved environment, the files its
/// ConfigMap and Secret volumes mount (laid out under a folder standing for `/etc/llm-canary`;
/// a Secret's keys, made in the cluster, hold a placeholder).
struct Pod {
    name: String,
    env: BTreeMap<String, String>,
    dir: TempDir,
    config: PathBuf,
}

/// Kubernetes' `$(VAR)` expansion from the variables defined before.
fn k8s_expand(value: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = value.to_string();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

fn pod(docs: &[Value], template: &Value, name: &str, index: Option<u64>) -> Pod {
    let spec = &template["spec"];
    let c = &spec["containers"][0];
    let mut env = BTreeMap::new();
    for e in c["env"].as_array().unwrap() {
        let value = if let Some(v) = e["value"].as_str() {
            k8s_expand(v, &env)
        } else if e["valueFrom"]["secretKeyRef"].is_object() {
            "placeholder".into()
        } else {
            match s(&e["valueFrom"]["fieldRef"]["fieldPath"]) {
                "metadata.name" => name.to_string(),
                "metadata.labels['apps.kubernetes.io/pod-index']" => {
                    index.expect("a pod index").to_string()
                }
                other => panic!("unexpected fieldRef {other}"),
            }
        };
        env.insert(s(&e["name"]).to_string(), value);
    }
    let dir = TempDir::new("pod");
    let maps: HashMap<&str, &Value> = kind(docs, "ConfigMap")
        .into_iter()
        .map(|m| (s(&m["metadata"]["name"]), m))
        .collect();
    for mount in c["volumeMounts"].as_array().unwrap() {
        let vol = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        if let Some(items) = vol["secret"]["items"].as_array() {
            let path = s(&mount["mountPath"]);
            let at = path.strip_prefix("/etc/llm-canary/").unwrap_or_else(|| {
                panic!("{name} mounts a Secret outside /etc/llm-canary: {path}")
            });
            for item in items {
                dir.write(&[(&format!("{at}/{}", s(&item["path"])), "placeholder")]);
            }
            continue;
        }
        let Some(cm) = vol["configMap"]["name"].as_str() else {
            continue;
        };
        let data = &maps
            .get(cm)
            .unwrap_or_else(|| panic!("{name} mounts ConfigMap {cm}, which is not rendered"))
            ["data"];
        let at = s(&mount["mountPath"]).trim_start_matches("/etc/llm-canary/");
        for (key, text) in data.as_object().unwrap() {
            dir.write(&[(&format!("{at}/{key}"), s(text))]);
        }
    }
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(s).collect();
    let config = args[args.iter().position(|a| *a == "-c").unwrap() + 1];
    let config = dir
        .path()
        .join(config.trim_start_matches("/etc/llm-canary/"));
    Pod {
        name: name.to_string(),
        env,
        dir,
        config,
    }
}

/// Every agent pod a layout starts.
fn pods(docs: &[Value]) -> Vec<(String, Pod)> {
    let mut out = Vec::new();
    for d in kind(docs, "Deployment")
        .into_iter()
        .filter(|d| d["metadata"]["name"] == "llm-canary")
    {
        out.push((
            "llm-canary".into(),
            pod(docs, &d["spec"]["template"], "llm-canary-x", None),
        ));
    }
    for set in kind(docs, "StatefulSet") {
        let name = s(&set["metadata"]["name"]);
        let replicas = set["spec"]["replicas"].as_u64().unwrap();
        let start = set["spec"]["ordinals"]["start"].as_u64().unwrap_or(0);
        assert_eq!(start, 1, "{name}: ordinals start at 1, as agent.shard does");
        for i in start..start + replicas {
            let p = pod(
                docs,
                &set["spec"]["template"],
                &format!("{name}-{i}"),
                Some(i),
            );
            assert_eq!(
                p.env["SHARDS"],
                replicas.to_string(),
                "{name}: SHARDS must equal replicas"
            );
            out.push((name.to_string(), p));
        }
    }
    out
}

/// `llm-canary check` with exactly the pod's environment.
fn check(p: &Pod) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .env_clear()
        .envs(&p.env)
        .arg("check")
        .arg("-c")
        .arg(&p.config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} in {}: {}",
        p.name,
        p.dir.path().display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// (i, n, pairs of this shard, all pairs) from check's shard line.
fn shard(out: &str) -> (u64, u64, usize, usize) {
    let line = out
        .lines()
        .find(|l| l.starts_with("shard "))
        .unwrap_or_else(|| panic!("no shard line in {out}"));
    let w: Vec<&str> = line.split([' ', '/', ':']).collect();
    // "shard 2/3: 1 of 1 (probe, target) pairs"
    (
        w[1].parse().unwrap(),
        w[2].parse().unwrap(),
        w[4].parse().unwrap(),
        w[6].parse().unwrap(),
    )
}

#[test]
fn every_layout_renders_and_validates() {
    let validator = std::env::var("KUBERNETES_VALIDATE").unwrap_or_else(|_| {
        root()
            .join(".venv-tools/bin/kubernetes-validate")
            .display()
            .to_string()
    });
    let mut images = Vec::new();
    for layout in LAYOUTS {
        let (text, docs) = render(layout);
        let dir = TempDir::new("render");
        dir.write(&[("rendered.yaml", &text)]);
        let out = run(Command::new(&validator)
            .arg("--strict")
            .arg(dir.path().join("rendered.yaml")));
        assert_eq!(out.matches("passed").count(), docs.len(), "{layout}: {out}");
        for d in docs.iter().filter(|d| d["spec"]["template"].is_object()) {
            let t = &d["spec"]["template"];
            let annotations = t["metadata"]["annotations"].as_object();
            assert!(
                !annotations.is_some_and(|a| a.keys().any(|k| k.starts_with("prometheus.io"))),
                "{layout}: {} is scraped by annotations",
                d["metadata"]["name"]
            );
            for c in t["spec"]["containers"].as_array().unwrap() {
                if c["name"] == "llm-canary" {
                    images.push((layout, s(&c["image"]).to_string()));
                }
            }
        }
        // Generated ConfigMaps: their names carry a content hash, so an edit rolls the pods.
        for m in kind(&docs, "ConfigMap") {
            let n = s(&m["metadata"]["name"]);
            assert!(
                n.rsplit_once('-').is_some_and(|(_, h)| h.len() == 10),
                "{layout}: {n}"
            );
        }
    }
    // The image is set (not the placeholder) and the same in every layout.
    assert!(
        images
            .iter()
            .all(|(_, i)| i.contains(':') && *i == images[0].1),
        "{images:?}"
    );
}

#[test]
fn each_fleet_pod_takes_its_shard_from_its_ordinal() {
    let (_, docs) = render("deploy/kubernetes/fleet-ha");
    let pods = pods(&docs);
    assert_eq!(pods.len(), 6, "3 shards x 2 replicas");
    let mut per_set: BTreeMap<String, Vec<(u64, usize)>> = BTreeMap::new();
    for (set, p) in &pods {
        let out = check(p);
        let (i, n, mine, all) = shard(&out);
        assert!(out.contains(&format!("agent {:?}", p.name)), "{out}");
        assert_eq!(i.to_string(), p.name.rsplit('-').next().unwrap(), "{out}");
        assert_eq!(n, 3);
        let replica = if set.ends_with("-b") { "b" } else { "a" };
        assert!(
            out.contains(&format!("agent labels: region=eu-west, replica={replica}")),
            "{out}"
        );
        per_set.entry(set.clone()).or_default().push((i, mine));
        assert!(all > 0);
    }
    // Every pair belongs to exactly one shard of each replica, and both replicas of a shard
    // probe the same share.
    let all = shard(&check(&pods[0].1)).3;
    for (set, shares) in &per_set {
        assert_eq!(
            shares.iter().map(|(_, k)| k).sum::<usize>(),
            all,
            "{set}: {shares:?}"
        );
    }
    assert_eq!(per_set["llm-canary"], per_set["llm-canary-b"]);
}

#[test]
fn the_single_agent_and_each_region_name_themselves() {
    let (_, docs) = render("deploy/kubernetes");
    let single = pods(&docs);
    assert_eq!(single.len(), 1);
    let out = check(&single[0].1);
    assert!(out.contains("agent \"canary-eu-1\""), "{out}");
    assert!(
        out.contains("agent labels: region=eu-west, replica=a"),
        "{out}"
    );
    let (_, _, mine, all) = shard(&out);
    assert_eq!(mine, all, "one agent owns every pair");
    for region in ["eu-west", "us-east"] {
        let (_, docs) = render(&format!("deploy/kubernetes/regions/{region}"));
        for (_, p) in pods(&docs) {
            let out = check(&p);
            assert!(out.contains(&format!("region={region}")), "{out}");
        }
    }
}

#[test]
fn every_pod_of_every_layout_checks_and_its_shards_cover_every_pair() {
    for layout in LAYOUTS {
        let (_, docs) = render(layout);
        let pods = pods(&docs);
        assert!(!pods.is_empty(), "{layout}: no agent pod");
        // Per Deployment or StatefulSet: the pairs its pods own, and all the pairs.
        let mut per_set: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (set, p) in &pods {
            let (_, _, mine, all) = shard(&check(p));
            let e = per_set.entry(set.clone()).or_insert((0, all));
            e.0 += mine;
            assert_eq!(e.1, all, "{layout}: {}", p.name);
        }
        for (set, (mine, all)) in per_set {
            assert_eq!(
                mine, all,
                "{layout}: {set}'s pods own every pair exactly once"
            );
        }
    }
}

#[test]
fn the_remote_write_fleet_writes_to_the_store_and_does_not_push() {
    let (_, docs) = render("deploy/kubernetes/fleet-remote-write");
    let read = |path: &str| -> Value {
        serde_saphyr::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
    };
    let mut fleet = read("deploy/kubernetes/common/config/llm-canary.yaml");
    let mut own = read("deploy/kubernetes/fleet-remote-write/config/llm-canary.yaml");
    // The pods mount this layout's config, not the fleet's.
    let mounted: Value = kind(&docs, "ConfigMap")
        .into_iter()
        .find(|m| s(&m["metadata"]["name"]).starts_with("llm-canary-config-"))
        .map(|m| serde_saphyr::from_str::<Value>(s(&m["data"]["llm-canary.yaml"])).unwrap())
        .expect("the config's ConfigMap");
    assert_eq!(mounted, own);
    // The fleet's config, with remote_write: in place of push: (every pod's check, above, reads
    // the password from the Secret volume where password_file points).
    assert!(fleet["push"].is_object() && own["push"].is_null(), "{own}");
    let remote = own.as_object_mut().unwrap().remove("remote_write");
    assert!(
        remote.as_ref().is_some_and(|r| r["url"].is_string()
            && r["password_file"].is_string()
            && r["queue"]["max_samples"].is_number()),
        "{remote:?}"
    );
    fleet.as_object_mut().unwrap().remove("push");
    assert_eq!(own, fleet, "all but the output is the fleet's config");
    // Nothing pushes, so no Pushgateway is deployed.
    assert!(
        docs.iter().all(|d| d["metadata"]["name"] != "pushgateway"),
        "the remote-write fleet deploys a Pushgateway"
    );
}

#[test]
fn the_two_replicas_of_a_shard_never_share_a_node() {
    let (_, docs) = render("deploy/kubernetes/fleet-ha");
    let sets = kind(&docs, "StatefulSet");
    assert_eq!(sets.len(), 2, "replica a and b");
    for set in &sets {
        let name = s(&set["metadata"]["name"]);
        let spread = set["spec"]["template"]["spec"]["topologySpreadConstraints"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no topologySpreadConstraints"));
        let c = spread
            .iter()
            .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
            .unwrap_or_else(|| panic!("{name} spreads over no node"));
        assert_eq!(c["whenUnsatisfiable"], "DoNotSchedule", "{name}");
        assert_eq!(c["maxSkew"], 1, "{name}");
        // Counted per pod index (the shard), whichever replica.
        assert_eq!(
            c["matchLabelKeys"],
            serde_json::json!(["apps.kubernetes.io/pod-index"]),
            "{name}"
        );
        assert!(c["labelSelector"]["matchExpressions"].is_null(), "{name}");
        let selector = c["labelSelector"]["matchLabels"].as_object().unwrap();
        for other in &sets {
            let labels = &other["spec"]["template"]["metadata"]["labels"];
            for (k, v) in selector {
                assert_eq!(
                    &labels[k], v,
                    "{name}'s spread must count {}'s pods too",
                    other["metadata"]["name"]
                );
            }
        }
    }
}

#[test]
fn the_pushgateway_scrape_job_keeps_the_pushed_labels() {
    let scrape_yml = root().join("deploy/prometheus/scrape.yml");
    let scrape: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&scrape_yml).unwrap()).unwrap();
    let jobs = scrape["scrape_configs"].as_array().unwrap();
    // The job that scrapes the Pushgateway the manifests deploy, by its Service's name.
    let (_, docs) = render("deploy/kubernetes");
    let svc = kind(&docs, "Service")
        .into_iter()
        .find(|d| d["metadata"]["name"] == "pushgateway")
        .expect("the Pushgateway's Service");
    let address = format!(
        "pushgateway.{}.svc:{}",
        s(&svc["metadata"]["namespace"]),
        svc["spec"]["ports"][0]["port"]
    );
    let gateway: Vec<&Value> = jobs
        .iter()
        .filter(|j| {
            j["static_configs"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|c| c["targets"].as_array().into_iter().flatten())
                .any(|t| t == address.as_str())
        })
        .collect();
    assert_eq!(gateway.len(), 1, "one job scrapes {address}: {jobs:?}");
    // Without it the agents' job and instance become exported_job and exported_instance, and
    // the dead man's switch (push_time_seconds{job="llm_canary"}) sees no agent.
    assert_eq!(
        gateway[0]["honor_labels"], true,
        "the Pushgateway's job must keep honor_labels: true"
    );
    // The agents push: a job scraping them too would count every run twice (it ships
    // commented out).
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let out = run(Command::new(binary("promtool", "prometheus"))
        .args(["check", "config"])
        .arg(&scrape_yml));
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn fleet_rules_check_and_their_unit_tests_pass() {
    let promtool = binary("promtool", "prometheus");
    let dir = root().join("deploy/prometheus");
    let out = run(Command::new(&promtool)
        .args(["check", "rules"])
        .arg(dir.join("fleet.rules.yml")));
    assert!(out.contains("SUCCESS: 9 rules found"), "{out}");
    let out = run(Command::new(&promtool)
        .args(["test", "rules"])
        .arg(dir.join("tests/fleet_test.yml")));
    assert!(out.contains("SUCCESS"), "{out}");
}

/// The `sh` blocks of INSTALL.md's "On Kubernetes" section (the single agent, the fleets),
/// one command per line.
fn install_commands() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("deploy/INSTALL.md")).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("On Kubernetes"))
        .expect("INSTALL.md has an \"On Kubernetes\" section");
    let commands: Vec<String> = section
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .flat_map(str::lines)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    assert!(!commands.is_empty(), "no sh block in \"On Kubernetes\"");
    commands
}

#[test]
fn the_install_guide_kubernetes_commands_run() {
    let mut ran = Vec::new();
    let mut need_a_cluster = Vec::new();
    for line in install_commands() {
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let mut env = Vec::new();
        while let Some((k, v)) = words[0]
            .split_once('=')
            .filter(|(k, _)| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        {
            env.push((k.to_string(), v.to_string()));
            words.remove(0);
        }
        let cmd = |program: String, args: &[&str]| {
            let mut c = Command::new(program);
            c.current_dir(root()).args(args).envs(env.clone());
            c
        };
        match words.as_slice() {
            ["llm-canary", rest @ ..] => {
                run(&mut cmd(env!("CARGO_BIN_EXE_llm-canary").into(), rest));
            }
            ["kubectl", "kustomize", dir] => {
                run(&mut cmd(kubectl(), &["kustomize", dir]));
            }
            // No cluster here: what would be applied must render.
            ["kubectl", "apply", "-k", dir] => {
                run(&mut cmd(kubectl(), &["kustomize", dir]));
            }
            ["promtool", rest @ ..] => {
                run(&mut cmd(binary("promtool", "prometheus"), rest));
            }
            ["skopeo", "copy", ..]
            | ["kubectl", "create", ..]
            | ["kubectl", "-n", _, "create", ..] => {
                need_a_cluster.push(line.clone());
                continue;
            }
            _ => panic!("INSTALL.md runs a command this test does not know: {line}"),
        }
        ran.push(line);
    }
    assert!(ran.len() >= 5, "ran {ran:?}");
    println!(
        "ran {} commands; need a registry or cluster: {need_a_cluster:?}",
        ran.len()
    );
}
