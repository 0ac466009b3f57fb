//! Each side's figures gathered over the samples, summarised by their medians, and the
//! verdict: what the round trip leaves of the TTFT gap, against the tolerance.

use super::figure::{Figure, Reading};
use super::server::{Alone, Source, RECOUNT_AFTER};
use serde::Serialize;

use crate::result::ProbeResult;
use crate::timeline::nearest_rank;

/// One figure, ours beside one of the server's, each side's median over the samples both have.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub figure: Figure,
    /// Where the server reports it: a metric, or a response field.
    pub server_figure: String,
    pub samples: usize,
    pub ours_ms: f64,
    pub theirs_ms: f64,
    /// Ours minus theirs: network, queueing, tokenization.
    pub gap_ms: f64,
    pub ratio: f64,
    /// What the round trip does not explain, relative to the server's figure (latencies only).
    pub unexplained: Option<f64>,
}

/// A figure only the server knows, such as its queue time (which a client waits inside its
/// TTFT): the median over the samples.
#[derive(Debug, Clone, Serialize)]
pub struct ServerOnly {
    pub figure: Figure,
    pub server_figure: String,
    pub samples: usize,
    pub theirs_ms: f64,
}

/// One figure from one of the server's sources: (ours, theirs) for each sample.
struct Row {
    figure: Figure,
    from: String,
    samples: Vec<(Option<f64>, f64)>,
}

/// The rows, in the order first seen.
#[derive(Default)]
pub(super) struct Collected {
    rows: Vec<Row>,
}

impl Collected {
    pub(super) fn add(&mut self, r: &ProbeResult, readings: Vec<Reading>) {
        for x in readings {
            let ours = x.figure.ours(r);
            // A figure both sides have is compared over the samples where both have it.
            if ours.is_none() && !x.figure.servers_alone() {
                continue;
            }
            match self
                .rows
                .iter_mut()
                .find(|row| row.figure == x.figure && row.from == x.from)
            {
                Some(row) => row.samples.push((ours, x.ms)),
                None => self.rows.push(Row {
                    figure: x.figure,
                    from: x.from,
                    samples: vec![(ours, x.ms)],
                }),
            }
        }
    }

    /// The comparisons and the server-only figures, grouped by figure.
    pub(super) fn summarise(mut self, rtt: f64) -> (Vec<Comparison>, Vec<ServerOnly>) {
        self.rows.sort_by_key(|row| row.figure);
        let (mut both, mut theirs_only) = (Vec::new(), Vec::new());
        for Row {
            figure,
            from,
            samples,
        } in self.rows
        {
            let pairs: Vec<(f64, f64)> = samples
                .iter()
                .filter_map(|(o, t)| o.map(|o| (o, *t)))
                .collect();
            if pairs.is_empty() {
                theirs_only.push(ServerOnly {
                    figure,
                    server_figure: from,
                    samples: samples.len(),
                    theirs_ms: median(samples.iter().map(|s| s.1)),
                });
                continue;
            }
            let rtt = figure.is_latency().then_some(rtt);
            both.push(compare(figure, from, &pairs, rtt));
        }
        (both, theirs_only)
    }
}

/// The nearest-rank median: always one of the values (`values` is never empty here).
pub(super) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    nearest_rank(&v, 0.5)
}

pub(super) fn compare(
    figure: Figure,
    server_figure: String,
    pairs: &[(f64, f64)],
    round_trip: Option<f64>,
) -> Comparison {
    let ours = median(pairs.iter().map(|p| p.0));
    let theirs = median(pairs.iter().map(|p| p.1));
    Comparison {
        figure,
        server_figure,
        samples: pairs.len(),
        ours_ms: ours,
        theirs_ms: theirs,
        gap_ms: ours - theirs,
        ratio: if theirs > 0.0 {
            ours / theirs
        } else {
            f64::NAN
        },
        unexplained: round_trip
            .filter(|_| theirs > 0.0)
            .map(|rtt| (ours - theirs - rtt) / theirs),
    }
}

/// What the samples left out, and why.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub shared: usize,
    /// The most requests the server counted between two scrapes.
    pub most: f64,
    pub uncounted: usize,
    pub failed: usize,
}

impl Tally {
    pub(super) fn note(&mut self, alone: Alone) {
        match alone {
            Alone::Yes => {}
            Alone::Shared(n) => {
                self.shared += 1;
                self.most = self.most.max(n.unwrap_or(0.0));
            }
            Alone::Uncounted => self.uncounted += 1,
        }
    }
}

/// The samples left out, said plainly: a shared server, or a scrape that did not see ours.
pub(super) fn left_out(source: &Source, t: &Tally, samples: u32) -> Vec<String> {
    let mut notes = Vec::new();
    let (counter, rows) = source.counted_by();
    if t.shared > 0 {
        let how_many = if t.most > 0.0 {
            format!(" (up to {} requests between two scrapes)", t.most)
        } else {
            " (its token counters moved by more than our response's own counts)".into()
        };
        notes.push(format!(
            "{} of {samples} sample(s) {rows}: the server served other requests meanwhile{how_many}, so its figures were not ours alone: this is a shared server; calibrate where no other traffic reaches it",
            t.shared
        ));
    }
    if t.uncounted > 0 {
        notes.push(format!(
            "{} of {samples} sample(s) {rows}: the server's `{counter}` did not move while our request ran (nor {} ms after it ended), so its figures hold nothing of ours: are these metrics another replica's, behind a load balancer? (--metrics-url)",
            t.uncounted,
            RECOUNT_AFTER.as_millis()
        ));
    }
    if t.failed > 0 {
        notes.push(format!(
            "{} of {samples} sample(s) failed and were left out",
            t.failed
        ));
    }
    notes
}

/// Agreement on TTFT, against each of the server's TTFT figures: what the round trip leaves of
/// the gap between the medians must be within the tolerance of the server's median.
pub(super) fn verdict(
    comparisons: &[Comparison],
    rtt: f64,
    tolerance: f64,
    t: &Tally,
) -> (bool, String) {
    let ttft: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| c.figure == Figure::Ttft)
        .collect();
    let off = |c: &Comparison| c.unexplained.unwrap_or(f64::NAN);
    let Some(worst) = ttft
        .iter()
        .copied()
        .max_by(|a, b| off(a).abs().total_cmp(&off(b).abs()))
    else {
        return (
            false,
            format!(
                "no sample gave both sides' time to first token ({} failed, {} shared with other traffic, {} not counted by the server)",
                t.failed, t.shared, t.uncounted
            ),
        );
    };
    let w = off(worst);
    if w.abs() <= tolerance {
        let each: Vec<String> = ttft
            .iter()
            .map(|c| format!("{:+.1}% against {}", off(c) * 100.0, c.server_figure))
            .collect();
        (
            true,
            format!(
                "agree: after the {rtt:.1} ms round trip, our median TTFT is within {:.1}% of the server's ({})",
                tolerance * 100.0,
                each.join(", ")
            ),
        )
    } else {
        (
            false,
            format!(
                "disagree: after the {rtt:.1} ms round trip, our median TTFT is {:+.1}% off the server's {} (tolerance {:.1}%): {}",
                w * 100.0,
                worst.server_figure,
                tolerance * 100.0,
                if w > 0.0 {
                    "the server reports less than a client waits (queueing in front of it, or its figures leave something out)"
                } else {
                    "the server reports more than a client waits (its clock or its figures are wrong)"
                }
            ),
        )
    }
}
