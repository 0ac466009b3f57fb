//! Where results go: the metrics registry (scraped on /metrics and pushed to a Pushgateway) and
//! the results log. Sinks turn results into output; nothing here measures anything.

pub mod metrics;
pub mod push;
pub mod results_log;
