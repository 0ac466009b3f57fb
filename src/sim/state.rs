//! What the running sim remembers: the requests it saw, each one's timings, its caches, its
//! per-scenario counters and what it served; the leaf every route and writer records into.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::{cache, http, metrics};

/// What the sim saw of one request.
#[derive(Debug, Clone, Serialize)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub scenario: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub prefix_cache_hit: bool,
    pub http_cache_hit: bool,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        http::header(&self.headers, name)
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Timings {
    pub(super) received: Instant,
    pub(super) headers: Option<Instant>,
    pub(super) first_content: Option<Instant>,
    /// When a `slots=` scenario gave the request its slot (its wait ends).
    pub(super) slot: Option<Instant>,
    /// The client closed the connection while the answer was still being written.
    pub(super) abandoned: bool,
}

impl Timings {
    pub(super) fn ms(&self, at: Option<Instant>) -> Option<f64> {
        at.map(|a| (a - self.received).as_secs_f64() * 1000.0)
    }
}

#[derive(Default)]
pub(super) struct State {
    /// The last [`MAX_SEEN`] requests, oldest first.
    pub(super) seen: Mutex<VecDeque<Seen>>,
    /// Per `X-Request-Id`: when the request arrived, its headers and its first content left.
    pub(super) timings: Mutex<HashMap<String, Timings>>,
    pub(super) caches: cache::Caches,
    /// Per scenario spec: requests seen and the first one's arrival (for `every` and `warm`).
    pub(super) counters: Mutex<HashMap<String, (u64, Instant)>>,
    /// What was served, as vLLM would report it on /metrics.
    pub(super) served: metrics::Served,
    /// The waiting rooms of `slots=` scenarios.
    pub(super) queues: super::queue::Queues,
    /// What the credential stand-ins issued.
    pub(super) issued: super::credentials::Issued,
}

pub(super) const MAX_SEEN: usize = 10_000;
impl State {
    /// Keeps the request log bounded: the oldest entry leaves in O(1).
    pub(super) fn log(&self, seen: Seen) {
        let mut log = self.seen.lock().expect("sim state lock");
        if log.len() >= MAX_SEEN {
            log.pop_front();
        }
        log.push_back(seen);
    }

    /// Request `id` arrived at `t0`: a new request with the same id (a static header) starts
    /// its timings afresh.
    pub(super) fn record_received(&self, id: &str, t0: Instant) {
        let mut m = self.timings.lock().expect("sim state lock");
        if m.len() > 100_000 {
            m.clear();
        }
        m.insert(
            id.to_string(),
            Timings {
                received: t0,
                headers: None,
                first_content: None,
                slot: None,
                abandoned: false,
            },
        );
    }

    /// The instant the first content chunk for request `id` was handed to the kernel.
    pub(super) fn record_first_write(&self, id: &str, at: Instant) {
        if let Some(t) = self.timings.lock().expect("sim state lock").get_mut(id) {
            t.first_content.get_or_insert(at);
        }
    }

    /// Request `id`'s client closed the connection mid-answer.
    pub(super) fn record_abandoned(&self, id: &str) {
        if let Some(t) = self.timings.lock().expect("sim state lock").get_mut(id) {
            t.abandoned = true;
        }
    }

    /// Request `id` got its slot at `at`.
    pub(super) fn record_slot(&self, id: &str, at: Instant) {
        if let Some(t) = self.timings.lock().expect("sim state lock").get_mut(id) {
            t.slot.get_or_insert(at);
        }
    }

    /// The instant the response head for request `id` was written.
    pub(super) fn record_headers(&self, id: &str, at: Instant) {
        if let Some(t) = self.timings.lock().expect("sim state lock").get_mut(id) {
            t.headers.get_or_insert(at);
        }
    }
}
