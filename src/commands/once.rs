//! `once`: every selected (probe, target) pair now, a table or JSON lines, exit 0/1.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;

use crate::cli::Format;
use crate::config::Config;
use crate::report;
use crate::runner::{Pair, Runner};

pub struct OnceOptions {
    pub probes: Vec<String>,
    pub targets: Vec<String>,
    pub format: Format,
    pub show_output: bool,
    pub concurrency: Option<usize>,
}

/// The pairs a command line selects; an unknown name is an error, not an empty run.
pub fn select_pairs(
    cfg: &Config,
    probes: &[String],
    targets: &[String],
) -> anyhow::Result<Vec<Pair>> {
    for p in probes {
        if !cfg.probes.iter().any(|x| &x.name == p) {
            bail!(
                "unknown probe {p:?} (known: {})",
                cfg.probes
                    .iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    for t in targets {
        if cfg.target(t).is_none() {
            bail!(
                "unknown target {t:?} (known: {})",
                cfg.targets
                    .iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let mut pairs = Vec::new();
    for p in cfg
        .probes
        .iter()
        .filter(|p| probes.is_empty() || probes.contains(&p.name))
    {
        for tn in p
            .targets
            .iter()
            .filter(|t| targets.is_empty() || targets.contains(t))
        {
            if let Some(t) = cfg.target(tn) {
                pairs.push((p.clone(), t.clone()));
            }
        }
    }
    if pairs.is_empty() {
        bail!("no probe runs against the selected targets");
    }
    Ok(pairs)
}

pub async fn once(
    cfg: &Config,
    opts: &OnceOptions,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let pairs = select_pairs(cfg, &opts.probes, &opts.targets)?;
    let mut runner = Runner::new(opts.concurrency.unwrap_or(cfg.agent.concurrency));
    runner.show_output = opts.show_output;
    let results = Arc::new(runner).run_all(pairs).await;
    for r in &results {
        tracing::info!(probe = %r.probe, target = %r.target, outcome = %r.outcome, request_id = %r.request_id, "probe run finished");
    }
    match opts.format {
        Format::Table => write!(out, "{}", report::table::render(&results))?,
        Format::Json => {
            for r in &results {
                writeln!(out, "{}", r.to_json_line())?;
            }
        }
    }
    out.flush()?;
    Ok(if results.iter().all(|r| r.success) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
