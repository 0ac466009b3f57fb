//! `calibrate`: run the calibration, show its progress on a terminal, print the table or the
//! JSON, and exit 0 agree, 1 disagree (errors exit 2 through the caller).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use crate::calibrate::{self, Calibration, Options, Progress};
use crate::cli::{CalibrateArgs, Format};
use crate::config::Config;

pub(super) async fn calibrate(
    cfg: &Config,
    args: &CalibrateArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let opts = Options {
        target: args.target.clone(),
        probe: args.probe.clone(),
        samples: args.samples,
        tolerance: args.tolerance,
        metrics_url: args.metrics_url.clone(),
    };
    // Progress is for a person watching; a pipe or a log gets the result alone.
    let watched = std::io::stderr().is_terminal();
    let c = calibrate::calibrate(cfg, &opts, |p| {
        if watched {
            show(p);
        }
    })
    .await?;
    match args.format {
        Format::Table => write!(out, "{}", table(&c))?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?,
    }
    out.flush()?;
    Ok(if c.agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One line on stderr, rewritten in place as the samples go.
fn show(p: Progress) {
    let mut err = std::io::stderr().lock();
    let _ = match p {
        Progress::RoundTrip(ms) => writeln!(err, "round trip {ms:.1} ms"),
        Progress::Sample { done, of } if done == of => writeln!(err, "\rsample {done}/{of}"),
        Progress::Sample { done, of } => write!(err, "\rsample {done}/{of}"),
    };
}

/// The table a person reads.
fn table(c: &Calibration) -> String {
    let mut s = format!(
        "calibrate {} ({}), probe {}: {}; round trip {:.1} ms; each side's {} over {} sample(s)\n",
        c.target, c.server, c.probe, c.source, c.round_trip_ms, c.statistic, c.samples
    );
    s.push_str(&format!(
        "{:<6} {:>7} {:>11} {:>13} {:>10} {:>7} {:>12}  {}\n",
        "figure",
        "samples",
        "ours ms",
        "server ms",
        "gap ms",
        "ratio",
        "unexplained",
        "server's figure"
    ));
    for x in &c.comparisons {
        let unexplained = x
            .unexplained
            .map_or("-".to_string(), |u| format!("{:+.1}%", u * 100.0));
        s.push_str(&format!(
            "{:<6} {:>7} {:>11.2} {:>13.2} {:>+10.2} {:>7.3} {:>12}  {}\n",
            x.figure,
            x.samples,
            x.ours_ms,
            x.theirs_ms,
            x.gap_ms,
            x.ratio,
            unexplained,
            x.server_figure
        ));
    }
    for x in &c.server_only {
        s.push_str(&format!(
            "{:<6} {:>7} {:>11} {:>13.2} {:>10} {:>7} {:>12}  {} (the server's alone: a client waits it inside its TTFT)\n",
            x.figure, x.samples, "-", x.theirs_ms, "-", "-", "-", x.server_figure
        ));
    }
    for note in &c.notes {
        s.push_str(note);
        s.push('\n');
    }
    s.push_str(&c.verdict);
    s.push('\n');
    s
}
