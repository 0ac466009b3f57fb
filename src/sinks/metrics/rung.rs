//! A context ladder's rung on the metrics: the label its runs' series carry, and a collector
//! that leaves the label out where it is empty.

use prometheus::core::Collector;
use prometheus::proto::LabelPair;

/// The label a ladder rung's series carry.
pub(super) const RUNG: &str = "rung";

/// A run's series key: the pair's label values and its rung (`""` for none, which
/// [`Rungless`] leaves out).
pub(super) fn run_key(pair: &[String], rung: Option<u32>) -> Vec<String> {
    let mut v = pair.to_vec();
    v.push(rung.map(|r| r.to_string()).unwrap_or_default());
    v
}

/// A collector whose series leave out an empty `rung` label: a probe without a ladder, and a
/// ladder's series of the whole firing, have none. (Prometheus reads an empty label as absent
/// anyway; the text and remote-write are the same without it.)
pub(super) struct Rungless<C>(pub(super) C);

impl<C: Collector> Collector for Rungless<C> {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let mut families = self.0.collect();
        for f in &mut families {
            for m in f.mut_metric().iter_mut() {
                let empty = |l: &LabelPair| l.name() == RUNG && l.value().is_empty();
                if m.get_label().iter().any(empty) {
                    let labels = m.take_label().into_iter().filter(|l| !empty(l)).collect();
                    m.set_label(labels);
                }
            }
        }
        families
    }
}
