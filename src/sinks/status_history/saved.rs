//! A pair's history as the status store keeps it: its slots as rows (one per
//! 5-minute slot, hour and UTC day that holds runs) and the rest in one piece (the rings' heads,
//! the open slot's and the open day's samples, the last runs and the last failures). The
//! history (`PairHistory::saved`, `touched`, `restored`) goes to and from these.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::days::Daily;
use super::run::Failure;
use super::slots::{Counts, Fine, Reservoir};
use crate::sinks::state::Recent;

/// A 5-minute slot: its runs, failures and maintenance runs, TTFT p50 and p95 and mean decode
/// speed (on the history's 16-bit log scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FineRow {
    /// Unix seconds / 300.
    pub bucket: i64,
    pub runs: u16,
    pub failed: u16,
    pub maintenance: u16,
    pub ttft_p50: u16,
    pub ttft_p95: u16,
    pub tps: u16,
}

/// An hour: its runs, failures and maintenance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CoarseRow {
    /// Unix seconds / 3600.
    pub bucket: i64,
    pub runs: u16,
    pub failed: u16,
    pub maintenance: u16,
}

/// A UTC day: its runs, failures and maintenance runs, TTFT p50 and p95 and median decode speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DayRow {
    /// Unix seconds / 86400.
    pub day: i64,
    pub runs: u32,
    pub failed: u32,
    pub maintenance: u32,
    pub ttft_p50: u16,
    pub ttft_p95: u16,
    pub tps_p50: u16,
}

/// A uniform sample as saved: how many figures it has seen, and the ones it keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Sample {
    seen: u32,
    #[serde(with = "packed")]
    kept: Vec<u16>,
}

/// Figures on the 16-bit log scale as one base64 string of their little-endian bytes: a third
/// of their size as JSON numbers, so a pair's tail fits one database page.
mod packed {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

    pub(super) fn serialize<S: Serializer>(v: &[u16], s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        s.serialize_str(&B64.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = B64.decode(text).map_err(serde::de::Error::custom)?;
        Ok(bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect())
    }
}

impl<const N: usize> From<&Reservoir<N>> for Sample {
    fn from(r: &Reservoir<N>) -> Sample {
        Sample {
            seen: r.seen,
            kept: r.v.clone(),
        }
    }
}

impl Sample {
    pub(super) fn reservoir<const N: usize>(&self) -> Reservoir<N> {
        let mut v = self.kept.clone();
        v.truncate(N);
        Reservoir { seen: self.seen, v }
    }
}

/// What a pair's history holds beside its slots, in one piece.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tail {
    pub(super) fine_head: Option<i64>,
    pub(super) coarse_head: Option<i64>,
    pub(super) day_head: Option<i64>,
    pub(super) open_bucket: i64,
    pub(super) open_ttft: Sample,
    /// The open slot's decode speeds' sum, as its IEEE 754 bits (exact through JSON).
    pub(super) open_tps_sum: u64,
    pub(super) open_tps_n: u32,
    pub(super) open_day: i64,
    pub(super) open_day_ttft: Sample,
    pub(super) open_day_tps: Sample,
    pub(super) recent: Recent,
    pub(super) figures_head: Option<i64>,
    /// The recent figures ring's slots, in the ring's order, TTFT and decode speed in turn.
    #[serde(with = "packed")]
    pub(super) figures: Vec<u16>,
    pub(super) last: Option<(Timestamp, String, bool)>,
    /// Oldest first.
    pub(super) failures: Vec<Failure>,
}

/// A pair's history, or the part of it one run changed: the rows it holds (or touched) and
/// its tail.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SavedPair {
    pub probe: String,
    pub target: String,
    pub fine: Vec<FineRow>,
    pub coarse: Vec<CoarseRow>,
    pub days: Vec<DayRow>,
    pub tail: Tail,
}

pub(super) fn fine_row(bucket: i64, f: Fine) -> FineRow {
    FineRow {
        bucket,
        runs: f.counts.runs,
        failed: f.counts.failed,
        maintenance: f.counts.maintenance,
        ttft_p50: f.ttft_p50,
        ttft_p95: f.ttft_p95,
        tps: f.tps,
    }
}

pub(super) fn coarse_row(bucket: i64, c: Counts) -> CoarseRow {
    CoarseRow {
        bucket,
        runs: c.runs,
        failed: c.failed,
        maintenance: c.maintenance,
    }
}

pub(super) fn day_row(day: i64, d: Daily) -> DayRow {
    DayRow {
        day,
        runs: d.runs,
        failed: d.failed,
        maintenance: d.maintenance,
        ttft_p50: d.ttft_p50,
        ttft_p95: d.ttft_p95,
        tps_p50: d.tps_p50,
    }
}

// And back: each row's slot, as the history held it.

impl From<&FineRow> for Fine {
    fn from(r: &FineRow) -> Fine {
        Fine {
            counts: Counts {
                runs: r.runs,
                failed: r.failed,
                maintenance: r.maintenance,
            },
            ttft_p50: r.ttft_p50,
            ttft_p95: r.ttft_p95,
            tps: r.tps,
        }
    }
}

impl From<&CoarseRow> for Counts {
    fn from(r: &CoarseRow) -> Counts {
        Counts {
            runs: r.runs,
            failed: r.failed,
            maintenance: r.maintenance,
        }
    }
}

impl From<&DayRow> for Daily {
    fn from(r: &DayRow) -> Daily {
        Daily {
            runs: r.runs,
            failed: r.failed,
            maintenance: r.maintenance,
            ttft_p50: r.ttft_p50,
            ttft_p95: r.ttft_p95,
            tps_p50: r.tps_p50,
        }
    }
}
