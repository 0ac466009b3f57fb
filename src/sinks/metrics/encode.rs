//! The registry in Prometheus's text format: the whole of it for /metrics and a push, or one
//! pair's series for /probe.

use prometheus::core::Collector;
use prometheus::proto::LabelPair;
use prometheus::{Encoder, TextEncoder};

use super::Metrics;

impl Metrics {
    /// One collector's families in the text format, with the agent's labels added (sorted)
    /// as the registry's gather() would.
    fn encode_collector(&self, c: &dyn Collector, buf: &mut Vec<u8>) {
        self.encode_collector_where(c, buf, |_| true)
    }

    /// The same, keeping only the series `keep` accepts.
    fn encode_collector_where(
        &self,
        c: &dyn Collector,
        buf: &mut Vec<u8>,
        keep: impl Fn(&prometheus::proto::Metric) -> bool,
    ) {
        for mut mf in c.collect() {
            mf.mut_metric().retain(&keep);
            if mf.get_metric().is_empty() {
                continue;
            }
            let mut metrics = mf.take_metric();
            for m in &mut metrics {
                let mut labels = m.take_label();
                for (k, v) in &self.static_labels {
                    let mut l = LabelPair::default();
                    l.set_name(k.clone());
                    l.set_value(v.clone());
                    labels.push(l);
                }
                labels.sort_by(|a, b| a.name().cmp(b.name()));
                m.set_label(labels);
            }
            mf.set_metric(metrics);
            TextEncoder::new()
                .encode(&[mf], buf)
                .expect("encoding into memory cannot fail");
        }
    }

    /// The whole registry in the Prometheus text format, one collector at a time: what the
    /// registry's gather() would copy whole (a thousand pairs make over 100,000 series) is
    /// never in memory at once, only the text.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector(c, &mut buf);
        }
        buf
    }

    /// The same, giving way to other tasks between collectors: on the daemon's one thread, the
    /// text of a large registry would otherwise delay the timestamps of probe runs in flight.
    /// (A blocking thread would not: each one the pool starts keeps its own malloc arena, and
    /// with it the memory of the largest text it wrote.)
    pub async fn encode_yielding(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector(c, &mut buf);
            tokio::task::yield_now().await;
        }
        buf
    }

    /// One pair's series (those labelled with its probe and target, and its target's own), for
    /// `/probe`: what blackbox_exporter answers for one module and target.
    pub fn encode_pair(&self, probe: &str, target: &str) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in self.collectors() {
            self.encode_collector_where(c, &mut buf, |m| {
                let value = |k: &str| {
                    m.get_label()
                        .iter()
                        .find(|l| l.name() == k)
                        .map(|l| l.value())
                };
                value("target") == Some(target) && value("probe").is_none_or(|p| p == probe)
            });
        }
        buf
    }
}
