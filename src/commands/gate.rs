//! `gate`: run the gate, show its progress, print the table or the JSON, write the JUnit and
//! Markdown files, and exit 0 pass, 1 fail, 2 error.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Format, GateArgs};
use crate::config::{Config, Inconclusive};
use crate::gate::ProbeNeeds;
use crate::gate::{self, report, EarlyStop, Event, GateError, GateOptions, Plan};

impl From<&GateArgs> for GateOptions {
    fn from(a: &GateArgs) -> GateOptions {
        GateOptions {
            target: a.target.clone(),
            baseline_target: a.baseline_target.clone(),
            baseline_file: a.baseline.clone(),
            require_baseline: a.require_baseline,
            samples: a.samples,
            max_samples: a.max_samples,
            warmup: a.warmup,
            probes: a.probes.clone(),
            concurrency: a.concurrency,
            wait_ready: a.wait_ready,
            keep_sampling: a.keep_sampling,
        }
    }
}

/// The gate's progress on stderr: a bar on a terminal, plain lines otherwise.
struct Progress {
    tty: bool,
    last_tenth: usize,
    open: Vec<String>,
    /// A sequential gate reports its looks; plain lines then come from them alone.
    sequential: bool,
    /// Why sampling stopped early, said when it is over.
    early: Option<(usize, EarlyStop)>,
}

/// A probe's plan and the least samples per side each of its limits needs to pass, in one
/// line; `None` when it has no limit to judge.
pub(super) fn needs_line(n: &ProbeNeeds) -> Option<String> {
    if n.limits.is_empty() {
        return None;
    }
    let each: Vec<String> = n
        .limits
        .iter()
        .map(|l| match l.samples {
            Some(s) => format!("{} needs {s}", l.limit),
            None => format!("{} cannot pass", l.limit),
        })
        .collect();
    Some(format!(
        "{}: {}; least samples per side to pass: {}",
        n.probe,
        plan_words(n.plan),
        each.join(", ")
    ))
}

fn plan_words(plan: Plan) -> String {
    match plan {
        Plan::Sequential { max_samples } => format!("sequential, at most {max_samples} per side"),
        Plan::Fixed { samples } => format!("a fixed {samples} per side"),
    }
}

/// The warning for a probe whose plan is too short for some limits ever to pass.
pub(super) fn short_line(n: &ProbeNeeds) -> Option<String> {
    let short: Vec<String> = n
        .short()
        .map(|l| match l.samples {
            Some(s) => format!("{} (needs {s})", l.limit),
            None => format!("{} (cannot pass)", l.limit),
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    let (they, verb) = if short.len() == 1 {
        ("it", "fails")
    } else {
        ("they", "fail")
    };
    let what = match n.inconclusive {
        Inconclusive::Fail => "so this gate cannot pass (inconclusive: fail)".to_string(),
        Inconclusive::Pass => {
            format!("and inconclusive passes (inconclusive: pass) unless {they} {verb}")
        }
    };
    let takes = match n.plan {
        Plan::Sequential { max_samples } => format!("at most {max_samples}"),
        Plan::Fixed { samples } => format!("{samples}"),
    };
    Some(format!(
        "{}: {takes} samples per side are too few for {} to pass: {they} can only fail or end inconclusive, {what}",
        n.probe,
        short.join(", ")
    ))
}

impl Progress {
    /// Progress is best effort: a closed stderr must not stop the gate.
    fn show(&mut self, e: Event) {
        let _ = self.write(e);
    }

    fn write(&mut self, e: Event) -> std::io::Result<()> {
        let mut err = std::io::stderr().lock();
        match e {
            Event::Waiting { target, last } => writeln!(err, "gate: waiting for {target}: {last}"),
            Event::Unjudged { limits } => writeln!(
                err,
                "gate: no baseline (--baseline-target T or --baseline FILE): the vs_baseline limits of {limits} are skipped, not judged"
            ),
            Event::Needs(needs) => {
                for n in &needs {
                    if let Some(l) = needs_line(n) {
                        writeln!(err, "gate: {l}")?;
                    }
                    if let Some(w) = short_line(n) {
                        writeln!(err, "gate: warning: {w}")?;
                    }
                }
                Ok(())
            }
            Event::Run { done, total } => self.run(&mut err, done, total),
            Event::StoppedEarly { done, stop } => {
                self.early = Some((done, stop));
                Ok(())
            }
            Event::Done => {
                // The bar's line ends with sampling.
                if self.tty {
                    writeln!(err)?;
                }
                match self.early.take() {
                    Some((done, e)) => writeln!(
                        err,
                        "gate: {done} runs, stopped early: {} {} {} failed after {} samples per side (--keep-sampling samples on)",
                        e.probe, e.name, e.limit, e.samples
                    ),
                    None => Ok(()),
                }
            }
            Event::Open { done, total, open } => {
                self.open = open;
                self.sequential = true;
                if self.tty {
                    self.bar(&mut err, done, total)
                } else if self.open.is_empty() {
                    writeln!(err, "gate: {done} runs, every limit decided")
                } else {
                    writeln!(
                        err,
                        "gate: {done} runs, {} open: {}",
                        self.open.len(),
                        self.open.join(", ")
                    )
                }
            }
        }
    }

    fn run(&mut self, err: &mut dyn Write, done: usize, total: usize) -> std::io::Result<()> {
        if self.tty {
            return self.bar(err, done, total);
        }
        let tenth = (done * 10) / total.max(1);
        if !self.sequential && (tenth > self.last_tenth || done == total) {
            self.last_tenth = tenth;
            writeln!(err, "gate: {done}/{total} runs")?;
        }
        Ok(())
    }

    /// The bar, redrawn in place, with the limits still open after it.
    fn bar(&self, err: &mut dyn Write, done: usize, total: usize) -> std::io::Result<()> {
        let width = 30;
        let filled = width * done / total.max(1);
        write!(
            err,
            "\r[{}{}] {done}/{total} runs",
            "#".repeat(filled),
            "-".repeat(width - filled)
        )?;
        if !self.open.is_empty() {
            write!(err, "; open: {}\x1b[K", self.open.join(", "))?;
        }
        Ok(())
    }
}

pub(super) async fn gate(
    cfg: &Config,
    outs: &GateArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
        last_tenth: 0,
        open: Vec::new(),
        sequential: false,
        early: None,
    };
    let r = match gate::run(cfg, &GateOptions::from(outs), &mut |e| progress.show(e)).await {
        Ok(r) => r,
        Err(GateError::Setup(e)) => return Err(e),
        Err(GateError::NotReady(nr)) => {
            let msg = nr.to_string();
            eprintln!("gate FAILED: {msg}");
            if let Some(p) = &outs.junit {
                std::fs::write(p, report::junit_not_ready(&msg))
                    .with_context(|| format!("cannot write {}", p.display()))?;
            }
            if let Some(p) = &outs.summary {
                std::fs::write(p, format!("## ❌ llm-canary gate\n\n{msg}\n"))
                    .with_context(|| format!("cannot write {}", p.display()))?;
            }
            return Ok(ExitCode::from(1));
        }
    };
    match outs.format {
        Format::Table => write!(out, "{}", report::table(&r))?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?,
    }
    out.flush()?;
    if let Some(p) = &outs.junit {
        std::fs::write(p, report::junit(&r))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &outs.summary {
        std::fs::write(p, report::markdown(&r))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(if r.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
