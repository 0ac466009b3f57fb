//! Where results go: the metrics registry (scraped on /metrics, pushed to a Pushgateway, written
//! to a remote-write receiver), the results log, the status page's history and the incidents on it. Sinks turn
//! results into output; nothing here measures anything.

pub(crate) mod budget;
pub(crate) mod incidents;
pub(crate) mod metrics;
pub(crate) mod otlp;
pub(crate) mod otlp_trace;
pub(crate) mod outbound;
pub(crate) mod pair_series;
pub(crate) mod push;
pub(crate) mod remote_write;
pub(crate) mod results_log;
pub(crate) mod state;
pub(crate) mod status_history;
pub(crate) mod status_store;
