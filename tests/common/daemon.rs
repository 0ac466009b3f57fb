//! `llm-canary run` as a child process of a test: started on a folder of config files, its
//! stderr kept in `daemon.log` there, killed on drop.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};

use super::TempDir;

pub struct Daemon {
    pub child: Child,
    pub dir: TempDir,
    /// Its `agent.listen` port.
    pub port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// Writes `files` (`llm-canary.yaml` among them) into a fresh folder and runs the daemon on
    /// it, behind `wrapper` (a command that execs the rest, such as `prlimit`) if one is given.
    pub fn start(files: &[(&str, &str)], port: u16, wrapper: &[&str]) -> Daemon {
        let dir = TempDir::new("daemon");
        dir.write(files);
        Daemon::start_in(dir, port, wrapper)
    }

    /// Runs the daemon on a folder already written (a restart on what another one left).
    pub fn start_in(dir: TempDir, port: u16, wrapper: &[&str]) -> Daemon {
        let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(env!("CARGO_BIN_EXE_llm-canary"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_llm-canary")),
        };
        let child = cmd
            .args(["--log-level", "info,llm_canary=debug", "run", "-c"])
            .arg(dir.path().join("llm-canary.yaml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Daemon { child, dir, port }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What it logged so far, for a failing assertion's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }
}
