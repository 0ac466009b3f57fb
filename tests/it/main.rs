//! The integration tests: one crate, linked once, one module per suite. Each test still runs in
//! a process of its own under nextest. The suites that need a real LLM server or a stress budget
//! (real_llm, real_llm_flavors, fire_drill, chaos), and the release artifacts' tests (deb,
//! release: run as root by scripts/test-release) are their own crates behind features.

#[path = "../common/mod.rs"]
mod common;

mod bedrock;
mod cache_check;
mod calibrate;
mod cli;
mod cloud_credentials;
mod config_errors;
mod content_checks;
mod corpus;
mod cron_differential;
mod daemon;
mod deploy_fleet;
mod deploy_kit;
mod doc_configs;
mod docs;
mod drift;
mod examples;
mod fleet_page;
mod front_door;
mod fuzz_regressions;
mod gate;
mod gemini;
mod ladder;
mod maintenance_rules;
mod mcp;
mod measurement;
mod on_demand;
mod otlp;
mod outcomes;
mod outputs_tls;
mod packaging;
mod priority;
mod probing_cost;
mod remote_write;
mod report;
mod requests;
mod slo_rules;
mod status_page;
mod status_store;
mod watch;
mod web_config;
mod wire;
