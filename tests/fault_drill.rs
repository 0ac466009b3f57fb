//! The fault drill: llama.cpp's server with SmolLM2-135M deployed broken in the ways an operator
//! could get wrong, each probed by a fresh agent with the real-model probe set
//! (`deploy/real-model/`), whose references `llm-canary record` writes from the healthy server
//! first. Every fault must fail a probe in the first cycle with the outcome that names it, and
//! the healthy server, probed cycle after cycle, must raise no alarm. Then the gate: a candidate
//! with a broken chat template or RoPE setting against the healthy baseline fails on
//! `answer_similarity`, and a healthy candidate passes. Prints each fault's outcomes and time to
//! catch (docs/detectors.md). Run with scripts/test-real-llm (built only with the `real-llm`
//! feature); about 10 minutes on two cores.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::llama::{model_path, LlamaServer};
use common::services::free_port;
use common::TempDir;
use llm_canary::testing::config::{self, Config};
use llm_canary::testing::outcome::Outcome;
use llm_canary::testing::runner::Runner;

/// The real-model kit's address for the server, replaced by the drill's.
const KIT_URL: &str = "http://127.0.0.1:8080";
const CHAT: &str = "smollm2-chat";
const COMPLETIONS: &str = "smollm2-completions";
/// The candidate target the gate holds to the healthy one.
const CANDIDATE: &str = "candidate";

/// A chat template that reads a field the messages do not have: the model sees the turn
/// markers and no question, as with a template written for another server's message shape.
const WRONG_TEMPLATE: &str = "{%- for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['text'] }}<|im_end|>\n{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

struct Fault {
    name: &'static str,
    /// Server flags; `{dir}` is the drill's folder.
    flags: &'static [&'static str],
    /// Serve a copy of the model with bytes flipped.
    corrupt: bool,
    /// The outcomes that name this fault: one probe must give one of them in the first cycle.
    names: &'static [Outcome],
}

const FAULTS: [Fault; 6] = [
    Fault {
        name: "wrong chat template",
        flags: &["--chat-template-file", "{dir}/wrong-template.jinja"],
        corrupt: false,
        names: &[Outcome::PromptIgnored],
    },
    Fault {
        name: "RoPE frequency base 10",
        flags: &["--rope-freq-base", "10"],
        corrupt: false,
        names: &[Outcome::AnswerDrift],
    },
    Fault {
        name: "RoPE frequency scale 4",
        flags: &["--rope-freq-scale", "4"],
        corrupt: false,
        names: &[Outcome::AnswerDrift, Outcome::Repetition],
    },
    Fault {
        name: "EOS ignored",
        flags: &["--ignore-eos"],
        corrupt: false,
        names: &[
            Outcome::AnswerDrift,
            Outcome::Truncated,
            Outcome::Repetition,
        ],
    },
    Fault {
        name: "corrupted weights",
        flags: &[],
        corrupt: true,
        names: &[Outcome::EmptyOutput, Outcome::AnswerDrift],
    },
    Fault {
        name: "repetition penalty 0.5",
        flags: &["--repeat-penalty", "0.5"],
        corrupt: false,
        names: &[Outcome::Repetition, Outcome::AnswerDrift],
    },
];

/// Copies the real-model kit into `dir` with its targets at `url`, a candidate target at
/// `candidate`, and no reference files (the drill records them).
fn kit(dir: &Path, url: &str, candidate: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/real-model");
    let agent = std::fs::read_to_string(root.join("llm-canary.yaml")).unwrap();
    assert!(
        agent.contains(KIT_URL),
        "the kit's targets are at {KIT_URL}"
    );
    let agent = agent.replace(KIT_URL, url)
        + &format!("  - {{name: {CANDIDATE}, base_url: {candidate}/v1, api: openai-chat, server: llama-cpp, model: smollm2-135m}}\n");
    std::fs::write(dir.join("llm-canary.yaml"), agent).unwrap();
    for sub in ["probes", "prompts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in std::fs::read_dir(root.join(sub)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(dir.join("wrong-template.jinja"), WRONG_TEMPLATE).unwrap();
}

/// `llm-canary ARGS`, its exit code and output.
fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The probes with a reference on the chat and completions targets: what the drill fires.
fn pairs(cfg: &Config) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in cfg.probes.iter().filter(|p| p.checks.reference.is_some()) {
        for t in p.targets.iter().filter(|t| *t == CHAT || *t == COMPLETIONS) {
            out.push((p.name.clone(), t.clone()));
        }
    }
    out
}

/// One cycle, each pair once in order, up to the first run whose outcome is in `until`; each
/// run's probe, outcome, sentence and when it ended (from `t0`).
async fn cycle(
    runner: &Runner,
    cfg: &Config,
    t0: Instant,
    until: &[Outcome],
) -> Vec<(String, Outcome, String, Duration)> {
    let mut out = Vec::new();
    for (probe, target) in pairs(cfg) {
        let r = common::llama::run_named(runner, cfg, &probe, &target).await;
        out.push((
            format!("{probe}@{target}"),
            r.judged.outcome,
            r.judged.error.clone().unwrap_or_default(),
            t0.elapsed(),
        ));
        if until.contains(&r.judged.outcome) {
            break;
        }
    }
    out
}

/// Flips one byte in every 997 from a tenth of the file on.
fn corrupt_copy(to: &Path) {
    let mut bytes = std::fs::read(model_path()).unwrap();
    let from = bytes.len() / 10;
    for i in (from..bytes.len()).step_by(997) {
        bytes[i] ^= 0xFF;
    }
    std::fs::write(to, bytes).unwrap();
}

async fn start(dir: &Path, fault: Option<&Fault>) -> LlamaServer {
    let model = match fault {
        Some(f) if f.corrupt => {
            let copy = dir.join("corrupted.gguf");
            corrupt_copy(&copy);
            copy.to_string_lossy().into_owned()
        }
        _ => model_path(),
    };
    let dir = dir.to_string_lossy().into_owned();
    let flags: Vec<String> = fault
        .map(|f| f.flags.iter().map(|x| x.replace("{dir}", &dir)).collect())
        .unwrap_or_default();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    LlamaServer::start_model(free_port(), 2, &model, &flags).await
}

/// `gate` of the candidate against the healthy baseline; its answer_similarity verdicts.
fn gate(config: &Path) -> (i32, Vec<String>, String) {
    let (code, out) = cli(&[
        "gate",
        "-c",
        &config.to_string_lossy(),
        "--target",
        CANDIDATE,
        "--baseline-target",
        CHAT,
        // One probe: a CPU model's runs take seconds each.
        "--probe",
        "computer",
        "--max-samples",
        "40",
        "--format",
        "json",
    ]);
    let json = &out[out.find('{').unwrap_or(0)..];
    // The report is the first JSON object; stderr's progress lines follow it.
    let report: serde_json::Value = serde_json::Deserializer::from_str(json)
        .into_iter()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("gate wrote no report: {out}"));
    let verdicts = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["limits"].as_array().unwrap().clone())
        .filter(|l| l["name"] == "answer_similarity_p50")
        .map(|l| format!("{} ({})", l["verdict"].as_str().unwrap(), l["message"]))
        .collect();
    (code, verdicts, out)
}

/// The kit in a fresh folder, its references recorded from `healthy` with `record` (after
/// `check` refused it without them, and before `check` accepts it).
fn recorded(dir: &TempDir, healthy: &LlamaServer) -> Config {
    let config_path = dir.path().join("llm-canary.yaml");
    let config = config_path.to_string_lossy().into_owned();
    kit(dir.path(), &healthy.url(), &healthy.url());
    let (code, out) = cli(&["check", "-c", &config]);
    assert_eq!(code, 2, "check without references: {out}");
    assert!(out.contains("llm-canary record"), "{out}");
    for target in [CHAT, COMPLETIONS] {
        let (code, out) = cli(&["record", "-c", &config, "--target", target]);
        assert_eq!(code, 0, "record --target {target}: {out}");
        println!("{out}");
    }
    let (code, out) = cli(&["check", "-c", &config]);
    assert_eq!(code, 0, "check with the recorded references: {out}");
    let cfg = config::load(&config_path).unwrap();
    assert!(pairs(&cfg).len() >= 3, "{:?}", pairs(&cfg));
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_named_in_its_first_cycle_and_healthy_raises_no_alarm() {
    let dir = TempDir::new("fault-drill");
    let config_path = dir.path().join("llm-canary.yaml");
    let healthy = start(dir.path(), None).await;
    let cfg = recorded(&dir, &healthy);

    // Healthy, cycle after cycle on one agent: no alarm.
    let runner = Runner::new(1);
    let t0 = Instant::now();
    for n in 0..2 {
        for (pair, outcome, why, _) in cycle(&runner, &cfg, t0, &[]).await {
            assert_eq!(outcome, Outcome::Ok, "healthy cycle {n}, {pair}: {why}");
        }
    }
    println!("healthy: 2 cycles of {} runs, all ok", pairs(&cfg).len());

    // Each fault on a server of its own, probed by a fresh agent, until a run names it.
    let mut figures = Vec::new();
    for fault in &FAULTS {
        let server = start(dir.path(), Some(fault)).await;
        let t0 = Instant::now();
        std::fs::write(
            &config_path,
            std::fs::read_to_string(&config_path)
                .unwrap()
                .replace(&healthy.url(), &server.url()),
        )
        .unwrap();
        let cfg = config::load(&config_path).unwrap();
        let runs = cycle(&Runner::new(1), &cfg, t0, fault.names).await;
        // Back to the healthy server for the next fault.
        std::fs::write(
            &config_path,
            std::fs::read_to_string(&config_path)
                .unwrap()
                .replace(&server.url(), &healthy.url()),
        )
        .unwrap();
        drop(server);
        let outcomes: Vec<String> = runs
            .iter()
            .map(|(pair, o, _, _)| format!("{pair} {o}"))
            .collect();
        let caught = runs.iter().find(|(_, o, _, _)| fault.names.contains(o));
        let Some((pair, outcome, why, at)) = caught else {
            panic!(
                "{}: no probe named it ({:?}) in the first cycle: {runs:#?}",
                fault.name, fault.names
            );
        };
        println!(
            "{}: {outcome} on {pair} after {:.1} s ({why}); runs: {}",
            fault.name,
            at.as_secs_f64(),
            outcomes.join(", ")
        );
        figures.push((fault.name, *outcome, pair.clone(), *at));
    }
    println!("\n| fault | outcome | probe | time to catch |\n|---|---|---|---|");
    for (name, outcome, pair, at) in figures {
        println!(
            "| {name} | `{outcome}` | {pair} | {:.0} s |",
            at.as_secs_f64()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_fails_a_broken_candidate_on_answer_similarity_and_passes_a_healthy_one() {
    let dir = TempDir::new("fault-drill-gate");
    let config_path = dir.path().join("llm-canary.yaml");
    let healthy = start(dir.path(), None).await;
    recorded(&dir, &healthy);
    for (what, fault) in [
        ("wrong chat template", Some(&FAULTS[0])),
        ("RoPE frequency base 10", Some(&FAULTS[1])),
        ("healthy", None),
    ] {
        let candidate = start(dir.path(), fault).await;
        // The references stay; the config now names this candidate.
        kit(dir.path(), &healthy.url(), &candidate.url());
        let t0 = Instant::now();
        let (code, verdicts, out) = gate(&config_path);
        drop(candidate);
        println!(
            "gate, {what} candidate: exit {code} after {:.0} s, answer_similarity_p50 {verdicts:?}",
            t0.elapsed().as_secs_f64()
        );
        assert!(!verdicts.is_empty(), "{out}");
        match fault {
            None => {
                assert_eq!(code, 0, "{out}");
                assert!(verdicts.iter().all(|v| v.starts_with("pass")), "{out}");
            }
            Some(_) => {
                assert_eq!(code, 1, "{out}");
                assert!(verdicts.iter().any(|v| v.starts_with("fail")), "{out}");
            }
        }
    }
}
