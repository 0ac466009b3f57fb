//! `record`: a target's answers at temperature 0 become its probes' `checks.reference` files,
//! so other targets are held to them (`answer_drift`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::RecordArgs;
use crate::config::{Config, Pair, Probe};

pub(super) async fn record(
    cfg: &Config,
    args: &RecordArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let probes: Vec<String> = args.probe.iter().cloned().collect();
    let pairs = super::once::select_pairs(cfg, &probes, std::slice::from_ref(&args.target))?;
    let (mut runs, mut files): (Vec<Pair>, Vec<PathBuf>) = (Vec::new(), Vec::new());
    for (p, t) in pairs {
        let Some(reference) = &p.checks.reference else {
            writeln!(out, "{}: no checks.reference, nothing to write", p.name)?;
            continue;
        };
        files.push(reference.file.clone());
        runs.push((Arc::new(recording(&p)), t));
    }
    if runs.is_empty() {
        out.flush()?;
        anyhow::bail!(
            "no probe of target {} names a checks.reference file to write",
            args.target
        );
    }
    // One at a time, each run once (a cache check's too: its answer is the reference).
    let runner = super::once::runner(cfg, 1);
    let mut all_written = true;
    for ((p, t), reference) in runs.iter().zip(&files) {
        let r = runner.run_one(p, t).await;
        let answer = r.measured.answer.as_deref().filter(|_| r.success());
        let Some(answer) = answer else {
            all_written = false;
            let why = r.judged.error.as_deref().unwrap_or("");
            writeln!(
                out,
                "{}: the run failed ({}{}{why}); {} is left as it was",
                r.id.probe,
                r.judged.outcome,
                if why.is_empty() { "" } else { ": " },
                reference.display()
            )?;
            continue;
        };
        if let Some(dir) = reference.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(reference, answer.as_bytes())
            .with_context(|| format!("cannot write {}", reference.display()))?;
        writeln!(
            out,
            "{}: wrote {} ({} characters from {})",
            r.id.probe,
            reference.display(),
            answer.chars().count(),
            args.target
        )?;
    }
    out.flush()?;
    Ok(if all_written {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The probe as `record` runs it: at temperature 0, and without its reference (which it is
/// about to write).
fn recording(p: &Probe) -> Probe {
    let mut p = p.clone();
    p.temperature = Some(0.0);
    p.checks.reference = None;
    p
}
