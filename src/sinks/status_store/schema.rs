//! The store's tables: a pair's slots as rows (5-minute, hourly, daily), its tail (samples,
//! last runs, last failures) as one JSON value, the incident detector's last runs per pair,
//! and the incidents. Small integers throughout: the figures are the history's 16-bit log
//! scale, the buckets Unix seconds over the slot's length. Slots are keyed time first: the runs
//! of one firing (every pair at once) land in the same few pages, and the sweep deletes a range.

/// `PRAGMA application_id`: "LLMC". A SQLite file with another is not ours to write.
pub(super) const APPLICATION_ID: i64 = 0x4c4c_4d43;

/// `PRAGMA user_version` of this schema.
pub(super) const VERSION: i64 = 1;

pub(super) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS pair (
    id INTEGER PRIMARY KEY,
    probe TEXT NOT NULL,
    target TEXT NOT NULL,
    tail TEXT NOT NULL,
    UNIQUE (probe, target)
);
CREATE TABLE IF NOT EXISTS fine (
    pair INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    maintenance INTEGER NOT NULL,
    ttft_p50 INTEGER NOT NULL,
    ttft_p95 INTEGER NOT NULL,
    tps INTEGER NOT NULL,
    PRIMARY KEY (bucket, pair)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS coarse (
    pair INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    maintenance INTEGER NOT NULL,
    PRIMARY KEY (bucket, pair)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS day (
    pair INTEGER NOT NULL,
    day INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    maintenance INTEGER NOT NULL,
    ttft_p50 INTEGER NOT NULL,
    ttft_p95 INTEGER NOT NULL,
    tps_p50 INTEGER NOT NULL,
    PRIMARY KEY (day, pair)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recent (
    probe TEXT NOT NULL,
    target TEXT NOT NULL,
    runs TEXT NOT NULL,
    PRIMARY KEY (probe, target)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS incident (
    id TEXT PRIMARY KEY,
    ended_ms INTEGER,
    body TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS incident_ended ON incident (ended_ms);
";
