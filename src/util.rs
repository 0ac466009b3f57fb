//! Small helpers every layer may use, at the bottom of the house so no module reaches up to
//! another for them: durations for people, error chains on one line, clipping foreign text, a
//! pair's stable hash, and the stop signals.

use std::time::Duration;

/// `1.5s`, `250ms`, `2m` — durations as a person writes them.
pub(crate) fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        format!("{}µs", d.as_micros())
    } else if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A stable hash of a (probe, target) pair (FNV-1a), the same on every agent and every start:
/// it picks a pair's shard and its share of the probe's jitter.
pub(crate) fn pair_hash(probe: &str, target: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in probe.bytes().chain([0u8]).chain(target.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// An error with its causes, one line (`{:#}` style), as the user should read it.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// Why a connection could not be made, in a few words: the innermost cause of `e` (the HTTP
/// stack wraps it three deep), an OS error by its kind ("connection refused") rather than its
/// number, and the address tried: `connection refused (127.0.0.1:9)`.
pub(crate) fn connect_failure(e: &reqwest::Error) -> String {
    let mut root: &(dyn std::error::Error + 'static) = e;
    while let Some(next) = root.source() {
        root = next;
    }
    let io = root.downcast_ref::<std::io::Error>();
    let reason = match io.map(std::io::Error::kind) {
        Some(kind)
            if kind != std::io::ErrorKind::Other && io.and_then(|e| e.raw_os_error()).is_some() =>
        {
            kind.to_string()
        }
        _ if e.is_timeout() => "timed out".to_string(),
        _ => root.to_string(),
    };
    match e
        .url()
        .and_then(|u| Some((u.host_str()?.to_string(), u.port_or_known_default()?)))
    {
        Some((host, port)) => format!("{reason} ({host}:{port})"),
        None => reason,
    }
}

/// Foreign text on one line, cut to 200 characters, for an error message.
pub fn clip(s: &str) -> String {
    one_line(s, 200)
}

/// `s` on one line (runs of whitespace as one space, control characters dropped), at most `n`
/// characters, with `…` when cut.
pub(crate) fn one_line(s: &str, n: usize) -> String {
    let mut out = String::new();
    let mut taken = 0;
    for word in s.split_whitespace() {
        for c in (!out.is_empty())
            .then_some(' ')
            .into_iter()
            .chain(word.chars())
        {
            if c.is_control() {
                continue;
            }
            if taken == n {
                out.push('…');
                return out;
            }
            out.push(c);
            taken += 1;
        }
    }
    out
}

/// The sentence for a name the config does not have, with the ones it has: a typo shows.
pub(crate) fn unknown_name<'a>(
    what: &str,
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    let known: Vec<&str> = known.into_iter().collect();
    format!("unknown {what} {name:?} (known: {})", known.join(", "))
}

/// A short, printable excerpt of foreign bytes for an error message.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]);
    text.chars().filter(|c| !c.is_control()).collect()
}

/// SIGTERM or SIGINT. The handlers are installed by this call, not at the first await, so a
/// signal sent once the caller has said it is ready is never met by the default action.
pub(crate) fn terminate_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let handlers = {
        use tokio::signal::unix::{signal, SignalKind};
        signal(SignalKind::terminate()).and_then(|t| Ok((t, signal(SignalKind::interrupt())?)))
    };
    async move {
        #[cfg(unix)]
        if let Ok((mut term, mut int)) = handlers {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(human_duration(Duration::from_micros(250)), "250µs");
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(120)), "2m");
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn clipped_text_is_short_and_printable() {
        assert_eq!(clip("a\nb"), "a b");
        assert_eq!(one_line("  a \t b\u{7}c ", 10), "a bc");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
        let long = "x".repeat(300);
        assert_eq!(clip(&long).chars().count(), 201);
        assert_eq!(snippet(b"<html>\r\n<body>"), "<html><body>");
    }
}
