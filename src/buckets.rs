//! Histogram bucket bounds of docs/design.md, at the bottom of the house: the metrics registry
//! builds its histograms on them, and config checks that a latency objective's bound is one.

/// TTFT and end-to-end buckets, in seconds (docs/design.md).
pub(crate) const LATENCY_BUCKETS: [f64; 20] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0,
    20.0, 30.0, 60.0,
];
