//! Where results go: the metrics registry (scraped on /metrics, pushed to a Pushgateway, written
//! to a remote-write receiver), the results log, the status page's history and the incidents on it. Sinks turn
//! results into output; nothing here measures anything.

pub mod budget;
pub mod incidents;
pub mod metrics;
pub mod otlp;
pub mod otlp_trace;
pub mod outbound;
pub mod pair_series;
pub mod push;
pub mod remote_write;
pub mod results_log;
pub mod state;
pub mod status_history;
pub mod status_store;
