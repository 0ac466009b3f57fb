//! `llm-canary mcp` as a real process, spoken to in JSON-RPC over stdio as an MCP client would:
//! initialize, tools/list, and tools/call for every tool. A key read from `api_key_env` (sent
//! to a target that echoes it back, like a leaky proxy) is in no byte it writes.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::TempDir;
use llm_canary::testing::sim::Sim;
use serde_json::{json, Value};

const KEY: &str = "sk-mcp-test-5d41402abc4b2a76";
const PROBE: &str = "name: p\nschedule: \"*/5 * * * *\"\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {ttft: 5s, stall: 5s, total: 10s}\n";

struct Session {
    child: std::process::Child,
    /// Taken (closed) to end the session.
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Every line it wrote, for the secret check.
    seen: String,
    next_id: u64,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Session {
    fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().expect("the session is open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    /// A request; its response (whatever notifications come first are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no answer to {method} within 60 s"));
            self.seen.push_str(&line);
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
            if v["id"] == id {
                return v;
            }
        }
    }

    /// tools/call; the tool's structured content, and whether it is an error.
    fn tool(&mut self, name: &str, args: Value) -> (Value, bool) {
        let r = self.call("tools/call", json!({"name": name, "arguments": args}));
        let result = &r["result"];
        assert!(result.is_object(), "{name}: {r:#}");
        // The same JSON as text, for clients that read only content.
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, result["structuredContent"], "{name}");
        (
            result["structuredContent"].clone(),
            result["isError"] == true,
        )
    }
}

impl Session {
    /// `llm-canary mcp -c DIR/llm-canary.yaml ARGS`, initialized.
    fn start(dir: &TempDir, args: &[&str]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
            .args(["mcp", "-c"])
            .arg(dir.path().join("llm-canary.yaml"))
            .args(args)
            .env("MCP_TEST_KEY", KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Session {
            child,
            stdin: Some(stdin),
            lines,
            seen: String::new(),
            next_id: 0,
        };
        let init = s.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "1"}}),
        );
        assert_eq!(
            init["result"]["serverInfo"]["name"], "llm-canary",
            "{init:#}"
        );
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init:#}"
        );
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_from_a_daemon_is_its_api_v1_status() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = common::services::free_port();
    let agent = format!(
        "agent:\n  name: canary-mcp\n  listen: 127.0.0.1:{port}\ntargets:\n\
         - {{name: healthy, base_url: \"{}\", model: m}}\n",
        sim.base_url("healthy"),
    );
    let probe = PROBE.replace("*/5 * * * *", "* * * * * *");
    let daemon = common::daemon::Daemon::start(
        &[
            ("llm-canary.yaml", &agent),
            ("probes/p.yaml", &probe),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );
    let api = daemon.url("/api/v1/status");
    common::services::eventually("the daemon's first run", Duration::from_secs(30), || {
        let api = api.clone();
        async move {
            let text = reqwest::get(&api).await.ok()?.text().await.ok()?;
            let v: Value = serde_json::from_str(&text).ok()?;
            (v["targets"][0]["probes"][0]["state"] == "up").then_some(())
        }
    })
    .await;
    let mut s = Session::start(&daemon.dir, &["--from", &daemon.url("")]);
    let (status, err) = s.tool("status", json!({}));
    assert!(!err, "{status:#}");
    // The daemon's own document, not a fresh run's records.
    assert_eq!(status["targets"][0]["target"], "healthy", "{status:#}");
    assert_eq!(
        status["targets"][0]["probes"][0]["state"], "up",
        "{status:#}"
    );
    assert!(status.get("results").is_none(), "{status:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_answers_a_json_rpc_session_and_never_shows_the_key() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = TempDir::new("mcp");
    let agent = format!(
        "agent:\n  name: canary-mcp\n  results_log: results.jsonl\ntargets:\n\
         - {{name: healthy, base_url: \"{}\", model: m, api_key_env: MCP_TEST_KEY, labels: {{env: test}}}}\n\
         - {{name: leaky, base_url: \"{}\", model: m, api_key_env: MCP_TEST_KEY}}\n",
        sim.base_url("healthy"),
        sim.base_url("echo-auth"),
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let mut s = Session::start(&dir, &[]);

    let list = s.call("tools/list", json!({}));
    let mut names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["list_targets", "probe", "report", "status"],
        "{list:#}"
    );

    let (targets, err) = s.tool("list_targets", json!({}));
    assert!(!err);
    assert_eq!(targets["targets"][0]["target"], "healthy", "{targets:#}");
    assert_eq!(targets["targets"][0]["probes"], json!(["p"]));
    assert_eq!(targets["targets"][0]["labels"]["env"], "test");

    let (status, err) = s.tool("status", json!({}));
    assert!(!err, "{status:#}");
    let results = status["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{status:#}");
    let of = |t: &str| results.iter().find(|r| r["target"] == t).unwrap();
    // The record's own field names.
    assert_eq!(of("healthy")["outcome"], "ok", "{status:#}");
    assert!(of("healthy")["ttft_ms"].as_f64().unwrap() > 0.0);
    assert!(of("healthy")["tokens_per_second"].is_number());
    // The leaky target got the key and sent it back in its 401.
    assert_eq!(of("leaky")["outcome"], "http_error", "{status:#}");
    assert_eq!(of("leaky")["http_status"], 401, "{status:#}");

    let (one, err) = s.tool("probe", json!({"probe": "p", "target": "healthy"}));
    assert!(!err, "{one:#}");
    assert_eq!(one["result"]["probe"], "p");
    assert_eq!(one["result"]["success"], true);
    // Only configured pairs: an unknown target is refused, and a URL is not a target.
    let (refused, err) = s.tool(
        "probe",
        json!({"probe": "p", "target": "http://example.com/v1"}),
    );
    assert!(err, "{refused:#}");
    assert!(
        refused["error"].as_str().unwrap().contains("target"),
        "{refused:#}"
    );

    // The report tool on a results log of records like the ones above.
    let log: String = results.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(dir.path().join("results.jsonl"), log).unwrap();
    let (report, err) = s.tool("report", json!({"since": "1h"}));
    assert!(!err, "{report:#}");
    let pairs = report["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "{report:#}");
    assert!(pairs
        .iter()
        .any(|p| p["target"] == "leaky" && p["success_rate"] == 0.0));

    let unknown = s.call("tools/call", json!({"name": "shell", "arguments": {}}));
    assert!(unknown["error"].is_object(), "{unknown:#}");

    drop(s.stdin.take());
    let status = s.child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut s.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        status.success(),
        "mcp exited {status:?} at the end of input: {stderr}"
    );
    assert!(!s.seen.is_empty());
    assert!(!s.seen.contains(KEY), "the key is in the MCP output");
    assert!(!stderr.contains(KEY), "the key is in the MCP log");
}
