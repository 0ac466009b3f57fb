//! Turning results into text for people (a table) and machines (JSON lines). Knows nothing of
//! how results were measured.

pub mod table;

use std::time::Duration;

/// `1.5s`, `250ms`, `2m` — durations as a person writes them.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        format!("{}µs", d.as_micros())
    } else if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
