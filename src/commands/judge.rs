//! `judge`: a probe's checks on given text (a file, stdin, or JSON lines), each verdict as a run
//! would give it: outcome, failed checks, the sentence, the repetition report and its measures.

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::checks::{self, repetition::Report};
use crate::cli::{Format, JudgeArgs};
use crate::config::{Config, Probe};
use crate::outcome::Outcome;

/// One line of `--jsonl`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: serde_json::Value,
    text: String,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// A verdict, spelled as the result record spells the same fields.
#[derive(Debug, Serialize)]
struct Verdict {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<serde_json::Value>,
    probe: String,
    outcome: Outcome,
    success: bool,
    failed_checks: Vec<Outcome>,
    finish_reason: String,
    output_chars: usize,
    repetition_score: Option<f64>,
    error: Option<String>,
    repetition: Option<Report>,
}

fn verdict(probe: &Probe, id: Option<serde_json::Value>, text: &str, finish: &str) -> Verdict {
    let answer = checks::Answer {
        text,
        finish_reason: Some(finish),
        // The text is the user's own: a failed check may quote it.
        show_text: true,
        ..checks::Answer::default()
    };
    let v = checks::judge(&probe.checks, &answer);
    let outcome = v.outcome();
    Verdict {
        id,
        probe: probe.name.clone(),
        outcome,
        success: outcome == Outcome::Ok,
        error: v.explanation(),
        failed_checks: v.failed(),
        finish_reason: finish.to_owned(),
        output_chars: v.output_chars,
        repetition_score: v
            .repetition
            .as_ref()
            .map(|r| (r.measures.score * 1000.0).round() / 1000.0),
        repetition: v.repetition,
    }
}

fn read_all(path: Option<&Path>) -> anyhow::Result<String> {
    let mut text = String::new();
    match path {
        Some(p) => {
            text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
        }
        None => {
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading stdin")?;
        }
    }
    Ok(text)
}

fn verdicts(probe: &Probe, args: &JudgeArgs) -> anyhow::Result<Vec<Verdict>> {
    let Some(path) = &args.jsonl else {
        let text = read_all(args.text_file.as_deref())?;
        return Ok(vec![verdict(probe, None, &text, &args.finish_reason)]);
    };
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
        Box::new(std::io::BufReader::new(file))
    };
    let mut out = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(&line).with_context(|| {
            format!(
                "{} line {}: not a {{\"id\", \"text\"}} object",
                path.display(),
                n + 1
            )
        })?;
        let finish = l.finish_reason.as_deref().unwrap_or(&args.finish_reason);
        out.push(verdict(probe, Some(l.id), &l.text, finish));
    }
    Ok(out)
}

/// The table: one block per verdict, what a reader asks first at the top.
fn render(verdicts: &[Verdict]) -> String {
    let mut s = String::new();
    for v in verdicts {
        if !s.is_empty() {
            s.push('\n');
        }
        let mut row = |k: &str, val: &str| s.push_str(&format!("{k:<15}{val}\n"));
        if let Some(id) = &v.id {
            let id = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
            row("id", &id);
        }
        row("outcome", v.outcome.as_str());
        let failed: Vec<&str> = v.failed_checks.iter().map(|o| o.as_str()).collect();
        row(
            "failed checks",
            &if failed.is_empty() {
                "-".into()
            } else {
                failed.join(", ")
            },
        );
        if let Some(e) = &v.error {
            row("why", e);
        }
        row("characters", &v.output_chars.to_string());
        let Some(r) = &v.repetition else {
            row("repetition", "off");
            continue;
        };
        let found: Vec<String> = r
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.detector().as_str(), f.describe()))
            .collect();
        row(
            "repetition",
            &if found.is_empty() {
                "none found".into()
            } else {
                found.join("; ")
            },
        );
        let m = &r.measures;
        row(
            "measures",
            &format!(
                "score {:.3}, units {}, items {}, seq_rep_4 {:.3} (second half {:.3}), recurring items {:.2}, compression {:.3}, template lines {:.2}, repeated rows {}, clause endings {:.2}, repeated sentences {}, sentence endings {:.2}, items taking turns {}, enumeration repeats {}",
                m.score, m.units, m.items, m.seq_rep_4, m.late_seq_rep_4, m.recurring_item_ratio, m.compression_ratio,
                m.template_line_ratio, m.repeated_rows, m.clause_ending_ratio, m.repeated_sentences,
                m.sentence_ending_ratio, m.turn_items, m.enumeration_repeats
            ),
        );
    }
    let ok = verdicts.iter().filter(|v| v.success).count();
    s.push_str(&format!("\n{ok} of {} answers ok\n", verdicts.len()));
    s
}

pub(super) fn judge(
    cfg: &Config,
    args: &JudgeArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let Some(probe) = cfg.probes.iter().find(|p| p.name == args.probe) else {
        bail!(crate::util::unknown_name(
            "probe",
            &args.probe,
            cfg.probes.iter().map(|p| p.name.as_str())
        ));
    };
    let verdicts = verdicts(probe, args)?;
    match args.format {
        Format::Table => write!(out, "{}", render(&verdicts))?,
        Format::Json => {
            for v in &verdicts {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(v).expect("a verdict always serializes")
                )?;
            }
        }
    }
    out.flush()?;
    Ok(if verdicts.iter().all(|v| v.success) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
