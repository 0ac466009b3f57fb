//! What the daemon benchmarks read about a process from /proc: resident set, CPU time, open
//! file descriptors.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};

#[path = "../../tests/common/procfs.rs"]
mod procfs;
// Each benchmark uses some of them.
#[allow(unused_imports)]
pub use procfs::{cpu_seconds, open_fds, status_kib};

/// The 1-minute load average, to say what else ran while a figure was taken.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The whole seconds at which each (probe, target) pair started a run, from a results log.
pub fn fired_seconds(results_log: &str) -> HashMap<(String, String), BTreeSet<i64>> {
    let mut out: HashMap<(String, String), BTreeSet<i64>> = HashMap::new();
    for l in results_log.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let t: jiff::Timestamp = v["started_at"].as_str().unwrap().parse().unwrap();
        out.entry((
            v["probe"].as_str().unwrap().into(),
            v["target"].as_str().unwrap().into(),
        ))
        .or_default()
        .insert(t.as_second());
    }
    out
}

/// The probing time: `LLM_CANARY_BENCH_SECS`, else `default`. `None` when cargo only lists the
/// benchmarks (`--list`), which must not start anything.
pub fn bench_secs(default: u64) -> Option<u64> {
    if std::env::args().any(|a| a == "--list") {
        return None;
    }
    Some(
        std::env::var("LLM_CANARY_BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default),
    )
}
