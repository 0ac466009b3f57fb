//! The web config in force: re-read when the file or a certificate it names changes, checked
//! on each new connection (a few `stat`s), as the toolkit re-reads its file on each request.
//! A broken new file leaves the last good one in force and is logged once per reason.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

use super::file::WebConfig;
use super::users::Checks;
use crate::config::ConfigError;

/// What identifies one version of a file: a rotated file changes at least one.
type Stamp = Option<(SystemTime, u64, u64)>;

/// The running web config of one listener.
pub(crate) struct Web {
    path: PathBuf,
    state: Mutex<State>,
    checks: Checks,
}

struct State {
    config: Arc<WebConfig>,
    stamps: Vec<Stamp>,
    /// Why the last re-read failed, logged once until the reason changes.
    failed: Option<String>,
}

fn stamps(files: &[PathBuf]) -> Vec<Stamp> {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata(f).ok()?;
            Some((m.modified().ok()?, m.len(), m.ino()))
        })
        .collect()
}

impl Web {
    /// Loads the web config at `path`: any error is the caller's to report.
    pub(crate) fn load(path: &Path) -> Result<Web, ConfigError> {
        let config = super::file::load(path)?;
        let stamps = stamps(&config.watched);
        Ok(Web {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                config: Arc::new(config),
                stamps,
                failed: None,
            }),
            checks: Checks::default(),
        })
    }

    /// Whether the endpoints speak TLS: fixed from the start (turning it on or off takes a
    /// restart), so no file is looked at.
    pub(crate) fn tls(&self) -> bool {
        self.state.lock().expect("web config lock").config.tls()
    }

    /// The config for a new connection: the one in force, re-read first if any of its files
    /// changed since it was read.
    pub(crate) fn current(&self) -> Arc<WebConfig> {
        let mut st = self.state.lock().expect("web config lock");
        if stamps(&st.config.watched) == st.stamps {
            return st.config.clone();
        }
        // Until a changed file loads, each connection tries it again, as the toolkit reads its
        // file on every request: the fix may be a file the broken one names but the good one
        // did not, whose arrival no stamp here would see.
        let outcome = super::file::load(&self.path).and_then(|new| {
            if new.tls() == st.config.tls() {
                Ok(new)
            } else {
                Err(ConfigError::file(
                    &self.path,
                    "turning TLS on or off takes a restart",
                ))
            }
        });
        match outcome {
            Ok(new) => {
                st.stamps = stamps(&new.watched);
                st.config = Arc::new(new);
                st.failed = None;
                tracing::info!(file = %self.path.display(), "web config re-read");
            }
            Err(e) => {
                let why = e.to_string();
                if st.failed.as_deref() != Some(why.as_str()) {
                    tracing::warn!(error = %why, "the changed web config is not used; the last good one stays in force");
                    st.failed = Some(why);
                }
            }
        }
        st.config.clone()
    }

    /// The refusal to answer a request with, if `config`'s basic auth refuses its `headers`.
    pub(crate) async fn refusal(
        &self,
        config: &WebConfig,
        headers: &HeaderMap,
    ) -> Option<Response<Full<Bytes>>> {
        if config.users.is_empty() || self.checks.admit(&config.users, headers).await {
            return None;
        }
        let mut r = Response::new(Full::new(Bytes::from_static(b"Unauthorized\n")));
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
        r.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        Some(r)
    }
}
