//! Ties `docs/design.md`, the contract users rely on, to the code: its outcome, metric, bucket
//! and record-field names are read from the page and compared with what the code defines, so
//! neither can change without the other.

use std::collections::{BTreeMap, BTreeSet};

use crate::outcome::{HttpReason, Outcome};
use crate::result::ProbeResult;
use crate::sinks::metrics::{Metrics, LATENCY_BUCKETS, PREFIX, TOKEN_BUCKETS};

const DESIGN: &str = include_str!("../docs/design.md");

/// The text of the `## {title}` section, up to the next `## ` heading.
fn section(title: &str) -> &'static str {
    let head = format!("\n## {title}\n");
    let start = DESIGN
        .find(&head)
        .unwrap_or_else(|| panic!("docs/design.md has no section {title:?}"))
        + head.len();
    let rest = &DESIGN[start..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The names in backticks in `cell`.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The body rows of the section's table, as cells (the header and the rule left out).
fn rows(title: &str) -> Vec<Vec<String>> {
    section(title)
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            // `\|` inside a cell is an escaped bar, not a column break.
            let l = l.replace("\\|", "\u{0}");
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.replace('\u{0}', "|").trim().to_string())
                .collect()
        })
        .collect()
}

/// The one name in backticks a row starts with.
fn first_name(row: &[String]) -> String {
    let names = ticked(&row[0]);
    assert_eq!(names.len(), 1, "one name per row: {row:?}");
    names[0].clone()
}

/// What is in `a` and not in `b`, and the other way round, in words.
fn differences(what: &str, code: &BTreeSet<String>, doc: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for n in code.difference(doc) {
        out.push(format!(
            "{what} {n} is in the code but not in docs/design.md"
        ));
    }
    for n in doc.difference(code) {
        out.push(format!(
            "{what} {n} is in docs/design.md but not in the code"
        ));
    }
    out
}

#[test]
fn every_outcome_is_in_the_contract_in_precedence_order() {
    let doc: Vec<String> = rows("Outcomes").iter().map(|r| first_name(r)).collect();
    let code: Vec<String> = Outcome::ALL
        .iter()
        .map(|o| o.as_str().to_string())
        .collect();
    let gaps = differences(
        "outcome",
        &code.iter().cloned().collect(),
        &doc.iter().cloned().collect(),
    );
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
    // The table's order is the precedence users read; the code's is the one it applies.
    assert_eq!(doc, code, "the outcomes' order differs from Outcome::ALL");
    for row in rows("Outcomes") {
        let o = Outcome::parse(&first_name(&row)).expect("checked above");
        let kind = match o {
            Outcome::Ok => "success",
            o if o.is_transport() => "transport",
            _ => "content",
        };
        assert_eq!(row[1], kind, "the kind of {o}");
    }
}

/// A registry as the agent builds it, from a config whose target has no labels of its own, so
/// a family's labels are the scope's and its extra ones.
fn registry() -> (tempfile::TempDir, std::sync::Arc<Metrics>) {
    let dir = tempfile::tempdir().expect("temporary folder");
    for d in ["probes", "prompts"] {
        std::fs::create_dir_all(dir.path().join(d)).expect("folder");
    }
    let (cert, _) = test_certificate();
    for (file, text) in [
        (
            "llm-canary.yaml",
            "agent: {budget: {daily: 1}}\npush: {url: \"https://127.0.0.1:9\", tls: {ca_file: ca.pem, insecure_skip_verify: true}}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m, price: {input: 1, output: 2}}\n",
        ),
        ("ca.pem", &cert),
        ("probes/p.yaml", "name: p\nprompt: q.txt\n"),
        ("prompts/q.txt", "hi"),
    ] {
        std::fs::write(dir.path().join(file), text).expect("write");
    }
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).expect("a valid config");
    let m = Metrics::new(&cfg);
    // A run with every figure, and the pair's zeroed counters, so every family has a series
    // and the text format states its type.
    let mut r = ProbeResult::example();
    r.measured.figures.ttft_ms = Some(30.0);
    r.measured.figures.answer_ttft_ms = Some(30.0);
    r.measured.figures.e2e_ms = Some(300.0);
    r.measured.figures.tpot_ms = Some(10.0);
    r.measured.figures.tokens_per_second = Some(100.0);
    r.measured.output_tokens = Some(28);
    r.judged.repetition = Some(crate::checks::repetition::analyze(
        &"Paris! ".repeat(40),
        &crate::checks::repetition::Thresholds::default(),
    ));
    r.judged.similarity = Some(0.9);
    r.measured.server_ttft_ms = Some(25.0);
    r.measured.figures.dns_ms = Some(1.0);
    r.measured.figures.connect_ms = Some(1.0);
    r.measured.figures.tls_ms = Some(5.0);
    r.measured.reading.tls = Some(crate::result::TlsSession {
        version: "TLSv1.3".into(),
        cipher: "TLS_AES_128_GCM_SHA256".into(),
        issuer: "CN=ca".into(),
        earliest_expiry: jiff::Timestamp::UNIX_EPOCH,
    });
    r.context.fingerprint = Some("f".into());
    r.context.target_changed = true;
    r.context.prefill = Some(crate::result::Prefill {
        tokens_per_second: 1000.0,
        source: crate::result::PromptTokens::Usage,
    });
    let start = std::time::Instant::now();
    let mut timeline = crate::timeline::Timeline::new(start);
    timeline.content = vec![start, start + std::time::Duration::from_millis(10)];
    r.measured.reading.timeline = timeline;
    m.init_pair(&cfg.probes[0], &cfg.targets[0]);
    m.record(&r, &cfg.targets[0]);
    r.context.warmup = true;
    m.record(&r, &cfg.targets[0]);
    r.context.warmup = false;
    r.context.confirm = true;
    m.record(&r, &cfg.targets[0]);
    r.context.cache_check = Some(crate::result::CacheRun {
        phase: crate::result::CachePhase::Warm,
        figures: crate::result::CacheFigures {
            hit_ratio: Some(0.9),
            ttft_speedup: Some(3.0),
        },
    });
    m.record(&r, &cfg.targets[0]);
    m.confirmed_failure("p", &cfg.targets[0], jiff::Timestamp::UNIX_EPOCH);
    m.set_maintenance(&cfg.targets[0], false);
    for signal in ["metrics", "traces"] {
        m.otlp.sent.with_label_values(&[signal]);
        m.otlp.dropped.with_label_values(&[signal, "queue_full"]);
        m.otlp.failures.with_label_values(&[signal]);
        m.otlp.queued.with_label_values(&[signal]);
    }
    (dir, m)
}

/// A self-signed certificate and its key (PEM), for the `tls:` blocks below.
fn test_certificate() -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = rcgen::CertificateParams::new(vec!["canary.test".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("a certificate");
    (cert.pem(), key.serialize_pem())
}

#[test]
fn every_metric_the_agent_registers_is_in_the_contract() {
    let (_dir, m) = registry();
    // From the code: every family of every collector, with its variable labels.
    let mut code: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in m.collectors() {
        for d in c.desc() {
            code.insert(
                d.fq_name.clone(),
                d.variable_labels.iter().cloned().collect(),
            );
        }
    }
    assert!(code.keys().all(|n| n.starts_with(PREFIX)), "{code:?}");
    let text = String::from_utf8(m.encode()).expect("the text format is UTF-8");
    let types: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();

    let doc_rows = rows("Metrics");
    let doc: BTreeSet<String> = doc_rows.iter().map(|r| first_name(r)).collect();
    let mut gaps = differences("metric", &code.keys().cloned().collect(), &doc);
    for row in &doc_rows {
        let name = first_name(row);
        let Some(labels) = code.get(&name) else {
            continue;
        };
        let (ty, scope, extra) = (&row[1], &row[2], ticked(&row[3]));
        // A ladder's rung is part of a run's pair (docs/design.md, Metrics).
        let pair = ["probe", "target", "model", "rung"];
        let code_scope = if labels.contains("probe") {
            "pair"
        } else if labels.contains("target") {
            "target"
        } else {
            "agent"
        };
        if scope != code_scope {
            gaps.push(format!(
                "{name}: scope {scope} in the doc, {code_scope} in the code"
            ));
        }
        let code_extra: BTreeSet<String> = labels
            .iter()
            .filter(|l| !pair.contains(&l.as_str()))
            .cloned()
            .collect();
        if code_extra != extra.iter().cloned().collect() {
            gaps.push(format!(
                "{name}: extra labels {extra:?} in the doc, {code_extra:?} in the code"
            ));
        }
        match types.get(name.as_str()) {
            Some(t) if t == ty => {}
            Some(t) => gaps.push(format!("{name}: type {ty} in the doc, {t} in the code")),
            None => gaps.push(format!("{name}: no series to read its type from")),
        }
    }
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}

#[test]
fn the_buckets_are_the_contracts() {
    let line = |prefix: &str| -> String {
        let l = section("Metrics")
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("docs/design.md lists the {prefix} buckets"));
        ticked(l).last().cloned().expect("the buckets in backticks")
    };
    let words = |b: &[f64]| b.iter().map(f64::to_string).collect::<Vec<_>>().join(" ");
    assert_eq!(line("- latency"), words(&LATENCY_BUCKETS));
    assert_eq!(line("- per token"), words(&TOKEN_BUCKETS));
}

#[test]
fn every_record_field_is_in_the_contract() {
    let mut r = ProbeResult::example();
    r.measured.output = Some("the text, as --show-output adds it".into());
    let value = serde_json::to_value(&r).expect("a record serializes");
    let code: BTreeSet<String> = value
        .as_object()
        .expect("a record is an object")
        .keys()
        .cloned()
        .collect();
    let doc: BTreeSet<String> = rows("Result record")
        .iter()
        .map(|r| first_name(r))
        .collect();
    let gaps = differences("record field", &code, &doc);
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}

#[test]
fn every_http_error_reason_is_in_the_contract_in_order() {
    let doc: Vec<String> = rows("HTTP error reasons")
        .iter()
        .map(|r| first_name(r))
        .collect();
    let code: Vec<String> = HttpReason::ALL
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    assert_eq!(doc, code, "the reasons differ from HttpReason::ALL");
}

#[test]
fn every_connect_error_reason_is_in_the_contract_in_order() {
    let doc: Vec<String> = rows("Connect error reasons")
        .iter()
        .map(|r| first_name(r))
        .collect();
    let code: Vec<String> = HttpReason::CONNECT_ERROR
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    assert_eq!(
        doc, code,
        "the reasons differ from HttpReason::CONNECT_ERROR"
    );
}

#[test]
fn the_reader_finds_what_it_reads() {
    // A page that lost its tables would pass the comparisons above vacuously.
    assert_eq!(rows("Outcomes").len(), Outcome::ALL.len());
    assert!(rows("Metrics").len() > 30);
    assert!(rows("Result record").len() > 30);
    assert_eq!(ticked("a `b` c `d`"), ["b", "d"]);
}

/// A config of `main` (the agent file), one probe and its prompt, loaded from a temporary folder.
fn loaded(main: &str) -> (tempfile::TempDir, crate::config::Config) {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("llm-canary.yaml", main);
    write("probes/p.yaml", "name: p\nprompt: q.txt\n");
    write("prompts/q.txt", "Hello?\n");
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).expect("valid");
    (dir, cfg)
}

#[test]
fn every_slo_rule_rules_writes_is_in_the_contract() {
    let (_dir, cfg) = loaded(
        "targets:\n  - name: t\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    slo:\n      availability: 99%\n      latency: [{figure: ttft, at_most: 1s, share: 90%}]\n",
    );
    let text = crate::slo_rules::generate(&cfg).expect("rules");
    let code: BTreeSet<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            l.strip_prefix("- record: ")
                .or_else(|| l.strip_prefix("- alert: "))
        })
        .map(str::to_string)
        .collect();
    let mut doc = BTreeSet::new();
    for row in rows("SLO rules") {
        for name in ticked(&row[0]) {
            match name.strip_suffix("WINDOW") {
                Some(stem) => {
                    for w in ["5m", "30m", "1h", "6h", "3d"] {
                        doc.insert(format!("{stem}{w}"));
                    }
                }
                None => {
                    doc.insert(name);
                }
            }
        }
    }
    let gaps = differences("SLO rule", &code, &doc);
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}

/// Every key of every object in `v`, at any depth.
fn keys(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, inner) in m {
                out.insert(k.clone());
                keys(inner, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|inner| keys(inner, out)),
        _ => {}
    }
}

#[test]
fn the_fleet_page_paths_fields_and_rules_are_the_contracts() {
    let rows = rows("Fleet page");
    let names: Vec<String> = rows.iter().map(|r| first_name(r)).collect();
    let doc_paths: BTreeSet<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("GET ").map(str::to_string))
        .collect();
    let code_paths: BTreeSet<String> = crate::fleet::PATHS.iter().map(|p| p.to_string()).collect();
    let mut gaps = differences("fleet page path", &code_paths, &doc_paths);

    let doc_rules: BTreeSet<String> = names
        .iter()
        .filter(|n| n.starts_with("llm_canary:"))
        .cloned()
        .collect();
    let code_rules: BTreeSet<String> = include_str!("../deploy/prometheus/status-page.rules.yml")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: ").map(str::to_string))
        .collect();
    gaps.extend(differences(
        "fleet page recording rule",
        &code_rules,
        &doc_rules,
    ));

    let doc_fields: BTreeSet<String> = names
        .iter()
        .filter(|n| !n.starts_with("GET ") && !n.starts_with("llm_canary:"))
        .cloned()
        .collect();
    let mut code_fields = BTreeSet::new();
    let example = serde_json::to_value(crate::fleet::model::example()).expect("serializes");
    keys(&example, &mut code_fields);
    // The 503 of a store outage is JSON too.
    let outage = serde_json::to_value(crate::fleet::outage_example()).expect("serializes");
    keys(&outage, &mut code_fields);
    gaps.extend(differences(
        "fleet page JSON field",
        &code_fields,
        &doc_fields,
    ));
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
    assert!(
        code_rules.len() >= 2 && code_fields.len() > 15,
        "{code_rules:?} {code_fields:?}"
    );
}

#[test]
fn the_status_store_key_is_in_the_contract_and_loads() {
    let files: BTreeSet<String> = rows("Files").iter().flat_map(|r| ticked(&r[0])).collect();
    assert!(files.contains("status.store"), "{files:?}");
    let (dir, cfg) = loaded(
        "status: {history: 30d, store: state/status.db}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
    );
    assert_eq!(cfg.status_store, Some(dir.path().join("state/status.db")));
}

#[test]
fn the_web_config_key_and_flag_are_in_the_contract_and_load() {
    let files: BTreeSet<String> = rows("Files").iter().flat_map(|r| ticked(&r[0])).collect();
    assert!(files.contains("agent.web_config_file"), "{files:?}");
    let (dir, cfg) = loaded(
        "agent: {web_config_file: tls/web.yml}\ntargets:\n  - {name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}\n",
    );
    assert_eq!(
        cfg.agent.web_config_file,
        Some(dir.path().join("tls/web.yml"))
    );
    for command in ["run", "check", "status-page"] {
        let row = rows("Commands")
            .into_iter()
            .find(|r| first_name(r) == command)
            .unwrap_or_else(|| panic!("{command} is in the contract"));
        assert!(
            ticked(&row[1])
                .iter()
                .any(|f| f == "--web.config.file FILE"),
            "{command}: {row:?}"
        );
    }
}

/// The value a cloud setting is written with in the test below.
fn cloud_setting_yaml(name: &str) -> String {
    let value = if name.ends_with("managed_identity") {
        "true"
    } else {
        "x"
    };
    match name.split_once('.') {
        Some((outer, inner)) => format!("{outer}: {{{inner}: {value}}}"),
        None => format!("{name}: {value}"),
    }
}

#[test]
fn every_cloud_setting_in_the_contract_is_a_key_a_target_takes() {
    let settings: Vec<String> = rows("Cloud credentials")
        .iter()
        .map(|r| first_name(r))
        .filter(|n| !n.contains(' ') && !n.starts_with('/'))
        .collect();
    for name in [
        "aws.profile",
        "api_version",
        "entra.tenant_id",
        "entra.managed_identity",
    ] {
        assert!(
            settings.iter().any(|s| s == name),
            "{name} is not in the contract: {settings:?}"
        );
    }
    let parse = |name: &str| {
        let text = format!(
            "name: t\nbase_url: http://127.0.0.1:1/v1\nmodel: m\n{}\n",
            cloud_setting_yaml(name)
        );
        serde_saphyr::from_str::<crate::config::raw::RawTarget>(&text).map(|_| ())
    };
    for name in &settings {
        if let Err(e) = parse(name) {
            panic!("{name}, in docs/design.md, is not a target key: {e}");
        }
    }
    // The check can fail: a key no target takes is refused.
    assert!(parse("aws.nonsense").is_err());
}

#[test]
fn the_sims_flags_are_in_the_contract() {
    use clap::CommandFactory;
    let row = rows("Commands")
        .into_iter()
        .find(|r| first_name(r) == "sim")
        .expect("sim is in the contract");
    let cli = crate::cli::Cli::command();
    let sim = cli.find_subcommand("sim").expect("the sim command");
    for long in sim.get_arguments().filter_map(|a| a.get_long()) {
        assert!(
            row[1].contains(&format!("--{long}")),
            "sim --{long} is not in the contract: {row:?}"
        );
    }
    assert!(row[1].contains("--tls-cert"), "{row:?}");
}

#[test]
fn the_outputs_tls_keys_and_the_fleet_pages_flags_are_in_the_contract() {
    use clap::CommandFactory;
    let files = rows("Files");
    let main = files
        .iter()
        .find(|r| first_name(r) == "llm-canary.yaml")
        .expect("a row for llm-canary.yaml");
    let keys = ticked(&main[1]);
    let tls = [
        "ca_file",
        "cert_file",
        "key_file",
        "server_name",
        "insecure_skip_verify",
        "min_version",
    ];
    for key in tls.iter().chain(&["tls:", "proxy_url", "no_proxy"]) {
        assert!(
            keys.iter().any(|k| k == key),
            "{key} is not in the contract: {keys:?}"
        );
    }
    // Every one of them loads on every output.
    let (cert, key) = test_certificate();
    let block = "tls: {ca_file: ca.pem, cert_file: ca.pem, key_file: client.key, server_name: canary.test, insecure_skip_verify: false, min_version: TLS13}, proxy_url: \"http://127.0.0.1:3128\", no_proxy: localhost";
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in [
        (
            "llm-canary.yaml".to_string(),
            format!(
                "push: {{url: \"https://127.0.0.1:9\", {block}}}\nremote_write: {{url: \"https://127.0.0.1:9/api/v1/write\", {block}}}\notlp: {{endpoint: \"https://127.0.0.1:9\", {block}}}\ntargets:\n  - {{name: t, base_url: \"http://127.0.0.1:9/v1\", model: m}}\n"
            ),
        ),
        ("ca.pem".to_string(), cert),
        ("client.key".to_string(), key),
        ("probes/p.yaml".to_string(), "name: p\nprompt: q.txt\n".to_string()),
        ("prompts/q.txt".to_string(), "Hello?\n".to_string()),
    ] {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    let cfg = crate::config::load(&dir.path().join("llm-canary.yaml")).expect("valid");
    let holders: Vec<String> = cfg
        .tls_blocks()
        .iter()
        .map(|(h, _)| h.to_string())
        .collect();
    assert_eq!(holders, ["push", "remote_write", "otlp"]);

    // The fleet page's flags, in its row of the commands.
    let commands = rows("Commands");
    let row = commands
        .iter()
        .find(|r| first_name(r) == "status-page")
        .expect("a row for status-page");
    let cli = crate::cli::Cli::command();
    let page = cli
        .find_subcommand("status-page")
        .expect("the status-page command");
    let flags: Vec<String> = page
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| l.starts_with("prometheus-"))
        .map(|l| format!("--{l}"))
        .collect();
    assert_eq!(flags.len(), 6, "{flags:?}");
    let documented = ticked(&row[1]);
    for flag in &flags {
        assert!(
            documented
                .iter()
                .any(|d| d.split_whitespace().next() == Some(flag)),
            "{flag} is not in the contract: {documented:?}"
        );
    }
}

#[test]
fn every_command_is_in_the_contract() {
    use clap::CommandFactory;
    let code: BTreeSet<String> = crate::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let doc: BTreeSet<String> = rows("Commands").iter().map(|r| first_name(r)).collect();
    let gaps = differences("command", &code, &doc);
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
    assert!(code.contains("record"), "{code:?}");
}

#[test]
fn the_gates_early_stop_is_in_the_contract() {
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let gate = cli.find_subcommand("gate").expect("gate is a command");
    assert!(gate
        .get_arguments()
        .any(|a| a.get_long() == Some("keep-sampling")));
    let row = rows("Commands")
        .into_iter()
        .find(|r| first_name(r) == "gate")
        .expect("gate is in the contract");
    assert!(row[1].contains("`[--keep-sampling]`"), "{row:?}");
    let report = section("Gate report");
    assert!(report.contains("`stopped_by`") && report.contains("`early`"));
    assert_eq!(
        serde_json::to_value(crate::gate::stats::Stopped::Early).ok(),
        Some(serde_json::json!("early"))
    );
}

#[test]
fn answers_held_to_each_other_are_in_the_contract() {
    use crate::config::gate::Figure;
    // The gate figure: the page names it, and the code reads every quantile it names.
    assert!(section("Gate report").contains("`answer_similarity_pNN` (NN = 50, 90, 95, 99)"));
    for q in [50, 90, 95, 99] {
        assert_eq!(
            Figure::parse(&format!("answer_similarity_p{q}")),
            Ok(Figure::AnswerSimilarity(q))
        );
    }
    // The probe key the outcomes and the record field name.
    let drift = rows("Outcomes")
        .into_iter()
        .find(|r| first_name(r) == "answer_drift")
        .expect("answer_drift is in the contract");
    assert!(drift[2].contains("`checks.reference`") && drift[2].contains("`min_similarity`"));
    assert!(drift[2].contains(&format!(
        "default {}",
        crate::checks::DEFAULT_MIN_SIMILARITY
    )));
    let keys = serde_saphyr::from_str::<crate::config::raw::RawChecks>(
        "reference: {file: r.txt, min_similarity: 0.5}",
    );
    assert!(keys.is_ok(), "{keys:?}");
}

#[test]
fn prompt_ignored_is_described_with_the_codes_figures() {
    use crate::runner::echo;
    let row = rows("Outcomes")
        .into_iter()
        .find(|r| first_name(r) == "prompt_ignored")
        .expect("prompt_ignored is in the contract");
    let text = &row[2];
    for figure in [
        format!("is {} or more", echo::MIN_SIMILARITY),
        format!("under {} visible characters", echo::MIN_VISIBLE_CHARS),
        format!("within {} minutes", echo::WINDOW.as_secs() / 60),
    ] {
        assert!(text.contains(&figure), "{figure:?} not in {text:?}");
    }
}
