//! The counters and gauges of each (probe, target) pair, kept as plain numbers per pair and
//! turned into series only when read (a scrape, a push, a remote-write sampling).
//!
//! Through the prometheus crate's `GaugeVec` and `IntCounterVec`, every series keeps its own
//! copy of its family's description and of its label pairs: about 0.9 KB a series with malloc's
//! overhead. A pair has up to 17 such series; 100 pairs were 0.35 MiB of an idle daemon's 8
//! before any of them had run (the counters made at zero), and about 1.5 MiB once all had. Here
//! a pair costs its label values once and 8 bytes a series. Histograms stay in the crate: their
//! per-series cost is mostly their buckets.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};

/// One series of every pair: a family, or one value of a family's extra label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(u8);

impl Slot {
    /// The `i`-th value of the extra label of the family this slot starts.
    pub(crate) fn nth(self, i: usize) -> Slot {
        Slot(self.0 + u8::try_from(i).expect("few label values"))
    }
}

/// Where a series' label value comes from: the pair's values, or the family's own.
enum LabelValue {
    Pair(usize),
    Fixed(String),
}

struct Family {
    desc: Desc,
    kind: MetricType,
    /// Each series' labels, sorted by name (as the crate's are), in slot order from `first`;
    /// a family without extra labels has one series.
    series: Vec<Vec<(String, LabelValue)>>,
    first: u8,
}

/// Families are declared in the order they are read.
pub(crate) struct Builder {
    labels: Vec<String>,
    families: prometheus::Result<Vec<Family>>,
    slots: usize,
}

impl Builder {
    /// `extra`: each series' own labels beyond the pair's (none: one series of the pair's).
    fn add(
        &mut self,
        name: String,
        help: &'static str,
        kind: MetricType,
        extra: Vec<Vec<(&'static str, String)>>,
    ) -> Slot {
        let first = u8::try_from(self.slots).expect("at most 64 series a pair");
        self.slots += extra.len().max(1);
        assert!(self.slots <= 64, "at most 64 series a pair");
        let mut names = self.labels.clone();
        for (label, _) in extra.iter().flatten() {
            if !names.iter().any(|n| n == label) {
                names.push(label.to_string());
            }
        }
        let extra = if extra.is_empty() {
            vec![vec![]]
        } else {
            extra
        };
        let series = extra
            .into_iter()
            .map(|own| {
                let mut labels: Vec<(String, LabelValue)> = own
                    .into_iter()
                    .map(|(l, v)| (l.to_string(), LabelValue::Fixed(v)))
                    .collect();
                let pair = self.labels.iter().enumerate();
                labels.extend(pair.map(|(at, n)| (n.clone(), LabelValue::Pair(at))));
                labels.sort_by(|a, b| a.0.cmp(&b.0));
                labels
            })
            .collect();
        let desc = Desc::new(name, help.to_string(), names, Default::default());
        if let Ok(families) = &mut self.families {
            match desc {
                Ok(desc) => families.push(Family {
                    desc,
                    kind,
                    series,
                    first,
                }),
                Err(e) => self.families = Err(e),
            }
        }
        Slot(first)
    }

    pub(crate) fn gauge(&mut self, name: String, help: &'static str) -> Slot {
        self.add(name, help, MetricType::GAUGE, Vec::new())
    }

    pub(crate) fn counter(&mut self, name: String, help: &'static str) -> Slot {
        self.add(name, help, MetricType::COUNTER, Vec::new())
    }

    /// A counter with one series per value of one extra label (`direction`: input, output).
    pub(crate) fn counter_by(
        &mut self,
        name: String,
        help: &'static str,
        label: &'static str,
        values: impl IntoIterator<Item = &'static str>,
    ) -> Slot {
        let sets = values.into_iter().map(|v| vec![(label, v)]).collect();
        self.counter_by_sets(name, help, sets)
    }

    /// A counter whose series each carry their own extra labels (not all the same ones: an
    /// `http_error` has a `reason`, other outcomes none): the slot of the first set.
    pub(crate) fn counter_by_sets(
        &mut self,
        name: String,
        help: &'static str,
        sets: Vec<Vec<(&'static str, &'static str)>>,
    ) -> Slot {
        let extra = sets
            .into_iter()
            .map(|set| set.into_iter().map(|(l, v)| (l, v.to_string())).collect())
            .collect();
        self.add(name, help, MetricType::COUNTER, extra)
    }

    /// The collector, or the first family whose description was invalid.
    pub(crate) fn build(self) -> prometheus::Result<PairSeries> {
        Ok(PairSeries(Arc::new(Inner {
            families: self.families?,
            slots: self.slots,
            pairs: Mutex::new(BTreeMap::new()),
        })))
    }
}

#[derive(Clone)]
pub(crate) struct PairSeries(Arc<Inner>);

struct Inner {
    families: Vec<Family>,
    slots: usize,
    /// By the pair's label values, in the order of `Builder`'s labels.
    pairs: Mutex<BTreeMap<Box<[String]>, Values>>,
}

impl Inner {
    fn pairs(&self) -> MutexGuard<'_, BTreeMap<Box<[String]>, Values>> {
        self.pairs.lock().expect("pair series lock")
    }
}

/// One pair's numbers.
pub(crate) struct Values {
    /// Bit i: slot i has a series.
    present: u64,
    v: Box<[f64]>,
}

impl Values {
    /// Gives the pair this series at zero if it has none yet.
    pub(crate) fn init(&mut self, slot: Slot) {
        self.present |= 1 << slot.0;
    }

    pub(crate) fn inc(&mut self, slot: Slot) {
        self.init(slot);
        self.v[usize::from(slot.0)] += 1.0;
    }

    /// Adds `by` to a counter.
    pub(crate) fn add(&mut self, slot: Slot, by: f64) {
        self.init(slot);
        self.v[usize::from(slot.0)] += by;
    }

    pub(crate) fn set(&mut self, slot: Slot, value: f64) {
        self.init(slot);
        self.v[usize::from(slot.0)] = value;
    }

    /// Drops the pair's series of a gauge: its figure is absent now.
    pub(crate) fn clear(&mut self, slot: Slot) {
        self.present &= !(1 << slot.0);
        self.v[usize::from(slot.0)] = 0.0;
    }
}

impl PairSeries {
    /// Pairs labelled with `labels` (the same for every family).
    pub(crate) fn builder(labels: &[&str]) -> Builder {
        Builder {
            labels: labels.iter().map(|l| l.to_string()).collect(),
            families: Ok(Vec::new()),
            slots: 0,
        }
    }

    /// Changes the pair's numbers (under one lock), making its entry if it has none.
    pub(crate) fn update(&self, pair: &[String], f: impl FnOnce(&mut Values)) {
        let mut pairs = self.0.pairs();
        if let Some(values) = pairs.get_mut(pair) {
            return f(values);
        }
        let mut values = Values {
            present: 0,
            v: vec![0.0; self.0.slots].into_boxed_slice(),
        };
        f(&mut values);
        pairs.insert(pair.into(), values);
    }

    /// Drops every series of the pair (it left the config).
    #[cfg(test)]
    pub(crate) fn remove(&self, pair: &[String]) {
        self.0.pairs().remove(pair);
    }

    /// Drops every entry whose label values begin with `prefix`, and says which they were.
    pub(crate) fn remove_under(&self, prefix: &[String]) -> Vec<Box<[String]>> {
        let mut pairs = self.0.pairs();
        let gone: Vec<Box<[String]>> = pairs
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        for k in &gone {
            pairs.remove(k);
        }
        gone
    }
}

/// One family of a [`PairSeries`], read on its own: the metrics text and remote-write give way
/// to other tasks between collectors, so a family is one step of that work, as a `GaugeVec`
/// was (16 families of 1,000 pairs read at once held the daemon's thread for the lot).
#[derive(Clone)]
pub(crate) struct PairFamily {
    series: Arc<Inner>,
    i: usize,
}

impl PairSeries {
    /// Each family as its own collector, in the order they were declared.
    pub(crate) fn families(&self) -> impl Iterator<Item = PairFamily> + '_ {
        (0..self.0.families.len()).map(|i| PairFamily {
            series: self.0.clone(),
            i,
        })
    }
}

impl Collector for PairFamily {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.series.families[self.i].desc]
    }

    /// The family's series; nothing when it has none (the text format has no empty family).
    fn collect(&self) -> Vec<MetricFamily> {
        let f = &self.series.families[self.i];
        let pairs = self.series.pairs();
        let mut metrics = Vec::new();
        for (pair, values) in pairs.iter() {
            for (i, own) in f.series.iter().enumerate() {
                let slot = usize::from(f.first) + i;
                if values.present & (1 << slot) == 0 {
                    continue;
                }
                let labels = own
                    .iter()
                    .map(|(name, from)| {
                        let mut l = LabelPair::default();
                        l.set_name(name.clone());
                        l.set_value(match from {
                            LabelValue::Pair(at) => pair[*at].clone(),
                            LabelValue::Fixed(v) => v.clone(),
                        });
                        l
                    })
                    .collect();
                let mut m = Metric::default();
                m.set_label(labels);
                if f.kind == MetricType::COUNTER {
                    let mut c = Counter::default();
                    c.set_value(values.v[slot]);
                    m.set_counter(c);
                } else {
                    let mut g = Gauge::default();
                    g.set_value(values.v[slot]);
                    m.set_gauge(g);
                }
                metrics.push(m);
            }
        }
        if metrics.is_empty() {
            return Vec::new();
        }
        let mut mf = MetricFamily::default();
        mf.set_name(f.desc.fq_name.clone());
        mf.set_help(f.desc.help.clone());
        mf.set_field_type(f.kind);
        mf.set_metric(metrics);
        vec![mf]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(c: &PairSeries) -> String {
        let mut buf = Vec::new();
        let families: Vec<MetricFamily> = c.families().flat_map(|f| f.collect()).collect();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &families, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn series_appear_when_made_read_their_values_and_go_with_their_pair() {
        let mut b = PairSeries::builder(&["probe", "target"]);
        let up = b.gauge("up".into(), "Up.");
        let runs = b.counter_by_sets(
            "runs_total".into(),
            "Runs.",
            vec![
                vec![("outcome", "ok")],
                vec![("outcome", "bad"), ("reason", "auth")],
            ],
        );
        let skipped = b.counter("skipped_total".into(), "Skipped.");
        let s = b.build().unwrap();
        let p = ["p".to_string(), "t".to_string()];
        let q = ["q".to_string(), "t".to_string()];
        s.update(&p, |v| {
            v.init(skipped);
            v.init(runs);
        });
        s.update(&q, |v| v.inc(runs.nth(1)));
        s.update(&q, |v| {
            v.inc(runs.nth(1));
            v.set(up, 0.5);
        });
        let t = text(&s);
        for line in [
            "# TYPE up gauge",
            "up{probe=\"q\",target=\"t\"} 0.5",
            "# TYPE runs_total counter",
            "runs_total{outcome=\"ok\",probe=\"p\",target=\"t\"} 0",
            // Its own labels sorted in among the pair's; the other series has no `reason`.
            "runs_total{outcome=\"bad\",probe=\"q\",reason=\"auth\",target=\"t\"} 2",
            "skipped_total{probe=\"p\",target=\"t\"} 0",
            "# HELP skipped_total Skipped.",
        ] {
            assert!(t.lines().any(|l| l == line), "{line} missing from:\n{t}");
        }
        // Only what was made: no gauge for p, no ok run or skip for q.
        for absent in [
            "up{probe=\"p\"",
            "runs_total{outcome=\"ok\",probe=\"q\"",
            "runs_total{outcome=\"bad\",probe=\"p\"",
            "skipped_total{probe=\"q\"",
        ] {
            assert!(!t.contains(absent), "{absent} in:\n{t}");
        }
        s.remove(&p);
        let t = text(&s);
        assert!(!t.contains("probe=\"p\""), "{t}");
        assert!(
            !t.contains("skipped_total"),
            "an empty family is left out:\n{t}"
        );
        assert!(t.contains("up{probe=\"q\",target=\"t\"} 0.5"), "{t}");
    }
}
