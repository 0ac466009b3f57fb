//! The figures calibrate compares, and one reading of the server's.

use serde::Serialize;

use crate::result::ProbeResult;

/// A figure both sides may report, in the order they are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Ttft,
    E2e,
    Tpot,
    /// Queue time: the server's alone (a client waits it inside its TTFT).
    Queue,
}

impl Figure {
    pub fn as_str(self) -> &'static str {
        match self {
            Figure::Ttft => "ttft",
            Figure::E2e => "e2e",
            Figure::Tpot => "tpot",
            Figure::Queue => "queue",
        }
    }

    /// Our own value of this figure in one run; `None` for the figures only the server has.
    pub(super) fn ours(self, r: &ProbeResult) -> Option<f64> {
        match self {
            Figure::Ttft => r.measured.figures.ttft_ms,
            Figure::E2e => r.measured.figures.e2e_ms,
            Figure::Tpot => r.measured.figures.tpot_ms,
            Figure::Queue => None,
        }
    }

    /// Only the server knows it: it is shown, never compared.
    pub(super) fn servers_alone(self) -> bool {
        self == Figure::Queue
    }

    /// A latency, which the round trip explains part of.
    pub(super) fn is_latency(self) -> bool {
        matches!(self, Figure::Ttft | Figure::E2e)
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One of the server's figures for one sample, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reading {
    pub figure: Figure,
    /// Where the server says it: its metric, or the response's field.
    pub from: String,
    pub ms: f64,
}

/// A reading when the server gave a finite value.
pub(super) fn reading(figure: Figure, from: &str, ms: Option<f64>) -> Option<Reading> {
    ms.filter(|v| v.is_finite()).map(|ms| Reading {
        figure,
        from: from.to_string(),
        ms,
    })
}
