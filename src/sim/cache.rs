//! The caches a canary must defeat: an HTTP response cache keyed on the request body (bypassed
//! by `Cache-Control: no-cache`) and a prefix cache keyed on model, `cache_salt` and prompt
//! (bypassed by `cache_prompt: false`). A hit answers faster, as a real one would, and its
//! usage says how many prompt tokens were cached. A scenario may break the prefix cache
//! (`prefix-cache-broken`), as an upgrade or a speculative-decoding flag does on real servers:
//! it never hits, so nothing comes sooner and no token is cached.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::http::HttpRequest;

const MAX_CACHED: usize = 10_000;

/// What a request found in the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hit {
    Miss,
    /// The prompt's prefix was cached: the first token comes four times sooner.
    Prefix,
    /// The whole response was cached: it comes at once.
    Http,
}

impl Hit {
    /// As the `x-sim-cache` response header says it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Hit::Miss => "miss",
            Hit::Prefix => "prefix-hit",
            Hit::Http => "http-hit",
        }
    }
}

#[derive(Default)]
pub(super) struct Caches {
    prefix: Mutex<HashSet<String>>,
    http: Mutex<HashSet<Vec<u8>>>,
}

/// What one request found in each cache (the request log keeps both).
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub http: bool,
    pub prefix: bool,
}

impl Found {
    /// What the answer may take from the caches: the HTTP cache first, as it sits in front.
    pub(super) fn hit(self) -> Hit {
        match (self.http, self.prefix) {
            (true, _) => Hit::Http,
            (false, true) => Hit::Prefix,
            (false, false) => Hit::Miss,
        }
    }
}

impl Caches {
    /// Looks a request up in both caches, each of which remembers it for next time;
    /// `prefix_cache`: the scenario's prefix cache works.
    pub(super) fn look_up(
        &self,
        req: &HttpRequest,
        body: &Value,
        model: &str,
        prompt: &str,
        prefix_cache: bool,
    ) -> Found {
        let no_cache = req
            .header("cache-control")
            .is_some_and(|v| v.contains("no-cache"));
        let http = !no_cache && !insert(&self.http, req.body.clone());
        let key = format!(
            "{model}\u{0}{}\u{0}{prompt}",
            body["cache_salt"].as_str().unwrap_or_default()
        );
        let prefix =
            prefix_cache && body["cache_prompt"] != json!(false) && !insert(&self.prefix, key);
        Found { http, prefix }
    }
}

/// Whether `key` is new to the cache. A long-running sim (fire drills, soaks) must not grow
/// without bound: an over-full cache starts afresh, as a real one evicts.
fn insert<T: std::hash::Hash + Eq>(cache: &Mutex<HashSet<T>>, key: T) -> bool {
    let mut cache = cache.lock().expect("sim state lock");
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(key)
}
