//! The agent's own endpoints behind TLS and auth, configured by a Prometheus exporter-toolkit
//! web config (`--web.config.file`, `agent.web_config_file`), read as the toolkit writes it:
//! `tls_server_config` (server certificate, client-certificate policy, versions, suites),
//! `basic_auth_users` (bcrypt hashes), `http_server_config.headers` and `rate_limit`. Loading
//! validates all of it, files included, into a [`WebConfig`]; [`Web`] is the running thing,
//! which re-reads the file and its certificates when they change and guards every request;
//! [`serve`] serves a [`Door`](crate::listener::Door)'s connections through it.

mod file;
mod live;
mod rate;
mod raw;
mod serve;
mod users;

pub(crate) use file::{load, WebConfig};
pub(crate) use live::Web;
pub(crate) use serve::serve;

#[cfg(test)]
mod tests;
