//! Prometheus remote-write, protocol 1.0 (what every store accepts): the registry, sampled
//! with one timestamp, becomes snappy-compressed protobuf batches in a queue bounded by
//! samples; when an outage outlasts it, the oldest batches go first and are counted. This
//! module owns the wire format, the queue and the route; the daemon's remote writer owns the
//! schedule, and its outbox the retries.

use prometheus::proto::{MetricFamily, MetricType};
use prost::bytes::Bytes;
use prost::Message;
use std::collections::VecDeque;

use super::outbound::Route;
use crate::config::RemoteWriteSettings;

/// `prometheus.WriteRequest` (prompb/remote.proto). Field 3 (metadata) is left out: version
/// 1.0 of the protocol does not define it.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: labels sorted by name, `__name__` among them.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// A value at a time in milliseconds since the Unix epoch.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// One request's body, ready to send (and to resend as it is), and the items (samples, data
/// points, spans) it holds.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    pub seq: u64,
    pub body: Bytes,
    pub items: usize,
}

/// Batches waiting for the receiver, at most `max_items` items in all. Every queued sender of
/// the daemon uses it.
#[derive(Debug)]
pub(crate) struct Queue {
    batches: VecDeque<Batch>,
    items: usize,
    max_items: usize,
    next_seq: u64,
}

impl Queue {
    pub(crate) fn new(max_items: usize) -> Queue {
        Queue {
            batches: VecDeque::new(),
            items: 0,
            max_items,
            next_seq: 0,
        }
    }

    /// Items queued now.
    pub(crate) fn items(&self) -> usize {
        self.items
    }

    /// A new bound (after a reload); returns the items dropped to fit it.
    pub(crate) fn set_max(&mut self, max_items: usize) -> usize {
        self.max_items = max_items;
        self.make_room(0)
    }

    /// Drops the oldest batches until `incoming` more items fit. The newest data is what an
    /// alert needs after an outage, and a receiver refuses items older than what it holds.
    fn make_room(&mut self, incoming: usize) -> usize {
        let mut dropped = 0;
        while self.items + incoming > self.max_items {
            let Some(b) = self.batches.pop_front() else {
                break;
            };
            self.items -= b.items;
            dropped += b.items;
        }
        dropped
    }

    /// Appends a batch; returns the items dropped to make room (the batch itself when it
    /// alone exceeds the bound).
    pub(crate) fn push(&mut self, body: Bytes, items: usize) -> usize {
        if items > self.max_items {
            return items;
        }
        let dropped = self.make_room(items);
        self.batches.push_back(Batch {
            seq: self.next_seq,
            body,
            items,
        });
        self.next_seq += 1;
        self.items += items;
        dropped
    }

    /// The oldest batch, to send (a cheap copy: the body is shared).
    pub(crate) fn front(&self) -> Option<Batch> {
        self.batches.front().cloned()
    }

    /// Removes batch `seq` if it is still the oldest (an outage may have dropped it meanwhile);
    /// returns its items.
    pub(crate) fn remove(&mut self, seq: u64) -> usize {
        match self.batches.front() {
            Some(b) if b.seq == seq => {
                let n = b.items;
                self.batches.pop_front();
                self.items -= n;
                n
            }
            _ => 0,
        }
    }

    /// Empties the queue (its sender was configured away); returns the items dropped.
    pub(crate) fn clear(&mut self) -> usize {
        let n = self.items;
        self.batches.clear();
        self.items = 0;
        n
    }
}

/// Turns metric families into batches of at most `per_send` samples, all stamped with one
/// timestamp, each labelled with `extra` (the agent's static labels, `job`, `instance`) beside
/// its own labels.
pub(crate) struct Sampler<'a, F: FnMut(Bytes, usize)> {
    extra: &'a [(String, String)],
    timestamp_ms: i64,
    per_send: usize,
    pending: Vec<TimeSeries>,
    out: F,
}

/// `le` values as the text format writes them, so a series is the same whether scraped or
/// written.
fn bound(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else {
        v.to_string()
    }
}

impl<'a, F: FnMut(Bytes, usize)> Sampler<'a, F> {
    pub(crate) fn new(
        extra: &'a [(String, String)],
        timestamp_ms: i64,
        per_send: usize,
        out: F,
    ) -> Self {
        Sampler {
            extra,
            timestamp_ms,
            per_send: per_send.max(1),
            pending: Vec::new(),
            out,
        }
    }

    fn series(&mut self, base: &[Label], name: String, more: Option<(&str, String)>, value: f64) {
        let mut labels = Vec::with_capacity(base.len() + 2);
        labels.extend_from_slice(base);
        labels.push(Label {
            name: "__name__".into(),
            value: name,
        });
        if let Some((k, v)) = more {
            labels.push(Label {
                name: k.into(),
                value: v,
            });
        }
        labels.sort_by(|a, b| a.name.cmp(&b.name));
        self.pending.push(TimeSeries {
            labels,
            samples: vec![Sample {
                value,
                timestamp: self.timestamp_ms,
            }],
        });
        if self.pending.len() >= self.per_send {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let req = WriteRequest {
            timeseries: std::mem::take(&mut self.pending),
        };
        let samples = req.timeseries.len();
        let body = snap::raw::Encoder::new()
            .compress_vec(&req.encode_to_vec())
            .expect("snappy compresses any input that fits in memory");
        (self.out)(Bytes::from(body), samples);
    }

    pub(crate) fn family(&mut self, mf: &MetricFamily) {
        let name = mf.name();
        for m in mf.get_metric() {
            let base: Vec<Label> = m
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .chain(self.extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map(|(k, v)| Label {
                    name: k.into(),
                    value: v.into(),
                })
                .collect();
            match mf.get_field_type() {
                MetricType::COUNTER => {
                    self.series(&base, name.into(), None, m.get_counter().get_value())
                }
                MetricType::GAUGE => {
                    self.series(&base, name.into(), None, m.get_gauge().get_value())
                }
                // The agent registers no untyped metrics (and the crate is retiring the type).
                MetricType::UNTYPED => {}
                MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    let bucket = format!("{name}_bucket");
                    for b in h.get_bucket() {
                        let le = Some(("le", bound(b.upper_bound())));
                        self.series(&base, bucket.clone(), le, b.cumulative_count() as f64);
                    }
                    let count = h.get_sample_count() as f64;
                    self.series(&base, bucket, Some(("le", bound(f64::INFINITY))), count);
                    self.series(&base, format!("{name}_sum"), None, h.get_sample_sum());
                    self.series(&base, format!("{name}_count"), None, count);
                }
                MetricType::SUMMARY => {
                    let s = m.get_summary();
                    for q in s.get_quantile() {
                        let quantile = Some(("quantile", q.quantile().to_string()));
                        self.series(&base, name.into(), quantile, q.value());
                    }
                    self.series(&base, format!("{name}_sum"), None, s.sample_sum());
                    let count = s.sample_count() as f64;
                    self.series(&base, format!("{name}_count"), None, count);
                }
            }
        }
    }

    /// Hands over the last, partial batch.
    pub(crate) fn finish(mut self) {
        self.flush();
    }
}

/// Where batches go: the receiver, with the protocol's headers.
pub(crate) fn route(settings: &RemoteWriteSettings) -> Route {
    Route {
        what: "remote write",
        url: settings.url.clone(),
        headers: &[
            ("content-type", "application/x-protobuf"),
            ("content-encoding", "snappy"),
            ("x-prometheus-remote-write-version", "0.1.0"),
        ],
        auth: settings.auth.clone(),
        timeout: settings.timeout,
        max_backoff: settings.max_backoff,
        outbound: settings.outbound.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

    fn decode(body: &[u8]) -> WriteRequest {
        let raw = snap::raw::Decoder::new().decompress_vec(body).unwrap();
        WriteRequest::decode(raw.as_slice()).unwrap()
    }

    fn families() -> Vec<MetricFamily> {
        let r = Registry::new();
        let c = IntCounterVec::new(Opts::new("runs_total", "h"), &["probe", "Zone"]).unwrap();
        let h = HistogramVec::new(
            HistogramOpts::new("ttft_seconds", "h").buckets(vec![0.5, 1.0]),
            &["probe"],
        )
        .unwrap();
        r.register(Box::new(c.clone())).unwrap();
        r.register(Box::new(h.clone())).unwrap();
        c.with_label_values(&["p", "z"]).inc_by(3);
        h.with_label_values(&["p"]).observe(0.7);
        r.gather()
    }

    #[test]
    fn families_become_sorted_series_with_one_timestamp_in_batches() {
        let extra = vec![("instance".to_string(), "a-1".to_string())];
        let mut out = Vec::new();
        let mut s = Sampler::new(&extra, 1_700_000_000_123, 4, |b, n| out.push((b, n)));
        for mf in &families() {
            s.family(mf);
        }
        s.finish();
        // 1 counter + 3 buckets (0.5, 1, +Inf) + sum + count = 6 series: batches of 4 and 2.
        assert_eq!(out.iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![4, 2]);
        let series: Vec<TimeSeries> = out.iter().flat_map(|(b, _)| decode(b).timeseries).collect();
        let text: Vec<String> = series
            .iter()
            .map(|t| {
                let l: Vec<String> = t
                    .labels
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.value))
                    .collect();
                format!(
                    "{} {}@{}",
                    l.join(","),
                    t.samples[0].value,
                    t.samples[0].timestamp
                )
            })
            .collect();
        assert_eq!(
            text,
            [
                "Zone=z,__name__=runs_total,instance=a-1,probe=p 3@1700000000123",
                "__name__=ttft_seconds_bucket,instance=a-1,le=0.5,probe=p 0@1700000000123",
                "__name__=ttft_seconds_bucket,instance=a-1,le=1,probe=p 1@1700000000123",
                "__name__=ttft_seconds_bucket,instance=a-1,le=+Inf,probe=p 1@1700000000123",
                "__name__=ttft_seconds_sum,instance=a-1,probe=p 0.7@1700000000123",
                "__name__=ttft_seconds_count,instance=a-1,probe=p 1@1700000000123",
            ]
        );
    }

    #[test]
    fn the_queue_keeps_the_newest_and_counts_what_it_drops() {
        let mut q = Queue::new(10);
        assert_eq!(q.push(Bytes::from_static(b"a"), 4), 0);
        assert_eq!(q.push(Bytes::from_static(b"b"), 4), 0);
        // A third batch of 4 needs room: the oldest (a) goes.
        assert_eq!(q.push(Bytes::from_static(b"c"), 4), 4);
        assert_eq!(q.items(), 8);
        let front = q.front().unwrap();
        assert_eq!(&front.body[..], b"b");
        // Delivered: gone. A stale sequence number (dropped meanwhile) removes nothing.
        assert_eq!(q.remove(front.seq), 4);
        assert_eq!(q.remove(front.seq), 0);
        assert_eq!(q.items(), 4);
        // A batch larger than the whole queue is dropped at once.
        assert_eq!(q.push(Bytes::from_static(b"d"), 11), 11);
        assert_eq!(q.set_max(3), 4);
        assert_eq!((q.items(), q.front().is_none()), (0, true));
        q.push(Bytes::from_static(b"e"), 2);
        assert_eq!(q.clear(), 2);
    }
}
