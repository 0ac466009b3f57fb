//! `check`: the config is valid; here is what it will do (each probe's targets and next fire
//! times), and what deserves a warning.

use std::fmt::Write;

use crate::config::Config;

pub fn describe(cfg: &Config, now: &jiff::Timestamp) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: valid: agent {:?}, {} target(s), {} probe(s)",
        cfg.path.display(),
        cfg.agent.name,
        cfg.targets.len(),
        cfg.probes.len()
    );
    if !cfg.agent.labels.is_empty() {
        let labels: Vec<String> = cfg
            .agent
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "agent labels: {}", labels.join(", "));
    }
    if let Some((i, n)) = cfg.agent.shard {
        let all: usize = cfg.probes.iter().map(|p| p.targets.len()).sum();
        let _ = writeln!(
            s,
            "shard {i}/{n}: {} of {all} (probe, target) pairs",
            crate::daemon::scheduled_pairs(cfg).len()
        );
    }
    for p in &cfg.probes {
        let _ = writeln!(
            s,
            "probe {} ({}) -> {}",
            p.name,
            p.file.display(),
            p.targets.join(", ")
        );
        match &p.schedule {
            Some(cron) => {
                let from = now.to_zoned(p.timezone.clone());
                let next: Vec<String> = cron
                    .upcoming(&from, 3)
                    .iter()
                    .map(|z| z.to_string())
                    .collect();
                let _ = writeln!(
                    s,
                    "  schedule {:?}: next {}",
                    cron.as_str(),
                    next.join(", ")
                );
            }
            None => {
                let _ = writeln!(s, "  no schedule: runs only with `once` and `gate`");
            }
        }
    }
    for w in &cfg.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
