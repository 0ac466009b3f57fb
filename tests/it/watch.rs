//! `llm-canary watch` in a real terminal: tmux (on a socket of the test's own) runs a shell in a
//! detached session of a fixed size; the test types the command, reads the screen with
//! capture-pane until the pairs and their states appear, sends `q`, and checks that the command
//! exited 0 and gave the terminal back (the alternate screen left, the shell's screen as it was).
//! Once running the probes itself against the sim, once following a real daemon (`run`) that
//! is then stopped.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::TempDir;
use llm_canary::testing::sim::Sim;

const KEY: &str = "sk-watch-test-7c6a180b36896a0a";
const HEADER_SECRET: &str = "hdr-watch-test-e4da3b7fbbce2345";
/// Every second, so the first runs come at once.
const PROBE: &str = "name: p\nschedule: \"* * * * * *\"\nprompt: q.txt\nmax_tokens: 64\ntimeouts: {ttft: 5s, stall: 5s, total: 10s}\n";
/// Bound on every wait for the screen.
const PATIENCE: Duration = Duration::from_secs(30);

/// A tmux server of this test's own, killed on drop.
struct Tmux {
    socket: PathBuf,
    _dir: TempDir,
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]);
    }
}

impl Tmux {
    /// A session running `sh` in a 120 × 30 terminal, with `env` set.
    fn start(env: &[(&str, &str)]) -> Tmux {
        let dir = TempDir::new("tmux");
        let tmux = Tmux {
            socket: dir.path().join("socket"),
            _dir: dir,
        };
        let mut args = vec!["new-session", "-d", "-s", "w", "-x", "120", "-y", "30"];
        let vars: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for v in &vars {
            args.extend(["-e", v]);
        }
        args.push("sh");
        tmux.ok(&args);
        // Keys sent before the shell's prompt is drawn are echoed ahead of it, and the prompt
        // then stands where the command's output begins: wait for the prompt first.
        tmux.until("the shell's prompt", &mut String::new(), |s| {
            !s.trim().is_empty()
        });
        tmux
    }

    fn command(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["-f", "/dev/null"])
            .args(args)
            .output()
    }

    /// Runs a tmux command that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = match self.command(args) {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "tmux is missing: install it (Debian: apt-get install tmux; scripts/test does)"
            ),
            Err(e) => panic!("tmux {args:?}: {e}"),
        };
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.ok(&["capture-pane", "-p", "-t", "w"])
    }

    fn typed(&self, line: &str) {
        self.ok(&["send-keys", "-t", "w", "-l", line]);
        self.ok(&["send-keys", "-t", "w", "Enter"]);
    }

    /// Polls the screen until `done` holds of it; every screen seen is kept for the secret check.
    fn until(&self, what: &str, seen: &mut String, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            seen.push_str(&screen);
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{what}: not on the screen within {PATIENCE:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn alternate_screen_on(&self) -> bool {
        self.ok(&["display-message", "-p", "-t", "w", "#{alternate_on}"])
            .trim()
            == "1"
    }
}

/// The screen's line that names `pair` (target then probe), if it has one.
fn row<'a>(screen: &'a str, target: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|l| l.split_whitespace().take(2).eq([target, "p"]))
}

fn state_of<'a>(screen: &'a str, target: &str) -> Option<&'a str> {
    row(screen, target)?.split_whitespace().nth(2)
}

fn watch_command(args: &[&str]) -> String {
    let mut line = format!("'{}' watch", env!("CARGO_BIN_EXE_llm-canary"));
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    // The exit status, where the screen shows it once the view is gone. The quotes split the
    // marker in the typed text, so no line of the command, however the pane wraps it, reads as
    // the exit line.
    line.push_str("; echo \"watch exit\"\"ed $?\"");
    line
}

/// `q`, then: the command exited 0, the alternate screen is left, and what the shell showed
/// before (the typed command) is back.
fn quit_and_check_restored(tmux: &Tmux, seen: &mut String) {
    assert!(
        tmux.alternate_screen_on(),
        "the view is not on the alternate screen"
    );
    tmux.ok(&["send-keys", "-t", "w", "q"]);
    // The echo's own line, which the typed command cannot hold (see watch_command).
    let status = |s: &str| {
        s.lines()
            .map(str::trim_end)
            .find(|l| {
                l.strip_prefix("watch exited ")
                    .is_some_and(|n| n.parse::<i32>().is_ok())
            })
            .map(str::to_string)
    };
    let screen = tmux.until("the exit status", seen, |s| status(s).is_some());
    assert_eq!(
        status(&screen).as_deref(),
        Some("watch exited 0"),
        "watch did not exit 0:\n{screen}"
    );
    assert!(
        !tmux.alternate_screen_on(),
        "the alternate screen is still on"
    );
    // Joined, the pane's wrapped lines are the typed command whole, however long its paths.
    let joined = tmux.ok(&["capture-pane", "-p", "-J", "-t", "w"]);
    assert!(
        joined.contains("llm-canary' watch '"),
        "the shell's screen is not back:\n{joined}"
    );
    // The terminal is out of raw mode: a typed line is echoed and run as usual.
    tmux.typed("echo restored-$((40 + 2))");
    tmux.until("the shell's echo", seen, |s| s.contains("restored-42"));
}

/// The agent file: a healthy target (with `healthy_keys`), one whose answers loop, one whose
/// port is closed.
fn agent_yaml(sim: &Sim, extra_agent: &str, healthy_keys: &str) -> String {
    format!(
        "agent:\n  name: canary-watch\n{extra_agent}targets:\n\
         - {{name: healthy, base_url: \"{}\", model: m{healthy_keys}}}\n\
         - {{name: looping, base_url: \"{}\", model: m}}\n\
         - {{name: refused, base_url: \"http://127.0.0.1:{}/v1\", model: m}}\n",
        sim.base_url("healthy"),
        sim.base_url("repetition"),
        common::closed_port(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_probes_by_itself_in_a_real_terminal_and_restores_it() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let dir = TempDir::new("watch");
    // Outputs the config asks for, which the view must leave alone: a port to serve on and a
    // results log.
    let port = common::services::free_port();
    let agent = agent_yaml(
        &sim,
        &format!("  listen: 127.0.0.1:{port}\n  results_log: results.jsonl\n"),
        &format!(", api_key_env: WATCH_TEST_KEY, headers: {{x-canary-secret: {HEADER_SECRET}}}"),
    );
    dir.write(&[
        ("llm-canary.yaml", &agent),
        ("probes/p.yaml", PROBE),
        ("prompts/q.txt", common::PROMPT),
    ]);
    let tmux = Tmux::start(&[("WATCH_TEST_KEY", KEY)]);
    let config = dir.path().join("llm-canary.yaml");
    tmux.typed(&watch_command(&["-c", config.to_str().unwrap()]));
    let mut seen = String::new();
    let screen = tmux.until("the three pairs judged", &mut seen, |s| {
        state_of(s, "healthy") == Some("up")
            && state_of(s, "looping") == Some("down")
            && state_of(s, "refused") == Some("down")
            && s.contains("Latest failures")
            && row(s, "healthy").is_some_and(|r| r.contains(" ms") && r.contains("tok/s"))
    });
    assert!(screen.contains("agent canary-watch"), "{screen}");
    assert!(
        screen.contains("3 pairs: 1 up · 0 degraded · 2 down"),
        "{screen}"
    );
    let looping = row(&screen, "looping").unwrap();
    assert!(looping.contains("repetition"), "{looping}");
    let refused = row(&screen, "refused").unwrap();
    assert!(refused.contains("connect_error"), "{refused}");
    assert!(
        screen.contains("refused/p  connect_error  connect: connection refused"),
        "{screen}"
    );
    // The healthy pair's figures: a TTFT, a decode speed and a run moments ago.
    let healthy = row(&screen, "healthy").unwrap();
    assert!(
        healthy.contains(" ms") && healthy.contains("tok/s"),
        "{healthy}"
    );
    assert!(healthy.contains("s ago"), "{healthy}");
    // Nothing served, nothing logged.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "watch listens on agent.listen"
    );
    assert!(
        !dir.path().join("results.jsonl").exists(),
        "watch wrote the results log"
    );

    quit_and_check_restored(&tmux, &mut seen);
    assert!(!seen.contains(KEY), "the API key is on the screen");
    assert!(
        !seen.contains(HEADER_SECRET),
        "a header's value is on the screen"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_follows_a_daemon_and_says_when_it_is_gone() {
    let sim = Sim::start("127.0.0.1:0").await.unwrap();
    let port = common::services::free_port();
    let agent = agent_yaml(&sim, &format!("  listen: 127.0.0.1:{port}\n"), "");
    let daemon = common::daemon::Daemon::start(
        &[
            ("llm-canary.yaml", &agent),
            ("probes/p.yaml", PROBE),
            ("prompts/q.txt", common::PROMPT),
        ],
        port,
        &[],
    );

    let tmux = Tmux::start(&[]);
    tmux.typed(&watch_command(&["--from", &daemon.url("")]));
    let mut seen = String::new();
    let screen = tmux.until("the daemon's pairs", &mut seen, |s| {
        state_of(s, "healthy") == Some("up") && state_of(s, "refused") == Some("down")
    });
    assert!(
        screen.contains(&format!("following http://127.0.0.1:{port}/api/v1/status")),
        "{screen}"
    );
    assert!(screen.contains("agent canary-watch"), "{screen}");

    // The daemon stops: a line says so, and the last figures stay.
    drop(daemon);
    let screen = tmux.until("the daemon gone", &mut seen, |s| {
        s.contains("cannot read the daemon's status")
    });
    assert!(screen.contains("connection refused"), "{screen}");
    assert!(screen.contains("the figures are from"), "{screen}");
    assert_eq!(state_of(&screen, "healthy"), Some("up"), "{screen}");

    quit_and_check_restored(&tmux, &mut seen);
}

#[test]
fn watch_without_a_terminal_says_so_and_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-canary"))
        .args(["watch", "-c", "no-such.yaml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("watch draws a live view and its output is not a terminal"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
