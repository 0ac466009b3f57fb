//! The database: opened (refusing a corrupt file or another program's), read whole at start,
//! written a transaction per batch of runs' changes (those queued together), and swept of what the retention
//! leaves out in small batches.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Transaction};

use super::schema::{APPLICATION_ID, TABLES, VERSION};
use crate::sinks::incidents::{Incident, SavedIncidents};
use crate::sinks::state::Recent;
use crate::sinks::status_history::{
    CoarseRow, DayRow, FineRow, SavedPair, COARSE_SECONDS, COARSE_SLOTS, DAY_SECONDS, FINE_SECONDS,
    FINE_SLOTS,
};

/// SQLite's page cache, in KiB.
const CACHE_KIB: u32 = 256;

/// Rows deleted per statement when the retention sweeps: each its own short transaction, so a
/// sweep never holds the writer (or a reader) for long.
const SWEEP_BATCH: usize = 500;

/// What one run changed: its pair's slots and tail, the incident detector's last runs of the
/// pair, and the incident the run opened, extended or closed.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub pair: SavedPair,
    pub recent: Option<Recent>,
    pub incident: Option<Incident>,
}

/// Why the store cannot be opened, read or written, with its path: one sentence.
#[derive(Debug, thiserror::Error)]
#[error("status store {}: {why}", path.display())]
pub(crate) struct StoreError {
    pub path: PathBuf,
    pub why: String,
}

/// An open store.
pub(crate) struct Db {
    conn: Connection,
    path: PathBuf,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

/// A SQLite error as a sentence: what SQLite says, with a plain word for the cases a user
/// meets.
fn sentence(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => {
            "not a SQLite database (a corrupt or foreign file): move it away to start afresh".into()
        }
        Some(ErrorCode::DatabaseCorrupt) => {
            "the database is corrupt: move it away to start afresh".into()
        }
        Some(ErrorCode::DiskFull) => format!("the disk is full ({e})"),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            format!("cannot write it ({e})")
        }
        _ => e.to_string(),
    }
}

impl Db {
    /// Opens the store at `path`, creating it (and its folder) if it does not exist; refuses a
    /// file that is not a SQLite database, another program's database, a newer schema, or one
    /// that fails SQLite's quick check.
    pub(crate) fn open(path: &Path) -> Result<Db, StoreError> {
        let fail = |why: String| StoreError {
            path: path.to_path_buf(),
            why,
        };
        let sql = |e: rusqlite::Error| fail(sentence(&e));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create its folder: {e}")))?;
        }
        let conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
        let id: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(sql)?;
        let objects: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .map_err(sql)?;
        if id != APPLICATION_ID && !(id == 0 && objects == 0) {
            return Err(fail(format!(
                "a SQLite database of another program (application_id {id:#x}), not an llm-canary status store"
            )));
        }
        let check: Vec<String> = {
            let mut st = conn.prepare("PRAGMA quick_check").map_err(sql)?;
            let rows = st.query_map([], |r| r.get::<_, String>(0)).map_err(sql)?;
            rows.collect::<Result<_, _>>().map_err(sql)?
        };
        if check != ["ok"] {
            return Err(fail(format!(
                "fails SQLite's quick check ({}): move it away to start afresh",
                check.first().map_or("no answer", String::as_str)
            )));
        }
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if version > VERSION {
            return Err(fail(format!(
                "written by a newer llm-canary (schema {version}, this one reads {VERSION})"
            )));
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(fail(format!(
                "cannot use write-ahead logging (journal mode {mode})"
            )));
        }
        // A small page cache: the writer touches a few pages a run, and start-up reads each
        // table once in key order; SQLite's default (2 MiB) would be a fifth of the daemon's idle
        // footprint.
        conn.execute_batch(&format!(
            "PRAGMA synchronous = NORMAL;
             PRAGMA cache_size = -{CACHE_KIB};
             BEGIN;
             PRAGMA application_id = {APPLICATION_ID};
             {TABLES}
             PRAGMA user_version = {VERSION};
             COMMIT;"
        ))
        .map_err(sql)?;
        Ok(Db {
            conn,
            path: path.to_path_buf(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        StoreError {
            path: self.path.clone(),
            why: sentence(&e),
        }
    }

    /// Everything the store holds: every pair's history (a pair whose tail does not read is
    /// left out, with a warning: the results log fills it) and the incident detector's state.
    pub(crate) fn load(&self) -> Result<(Vec<SavedPair>, SavedIncidents), StoreError> {
        self.read().map_err(|e| self.err(e))
    }

    fn read(&self) -> rusqlite::Result<(Vec<SavedPair>, SavedIncidents)> {
        let mut pairs = self.read_pairs()?;
        self.read_slots(&mut pairs)?;
        let incidents = self.read_incidents()?;
        Ok((pairs.into_values().collect(), incidents))
    }

    /// The pairs by their row id, each with its tail and no slots yet.
    fn read_pairs(&self) -> rusqlite::Result<HashMap<i64, SavedPair>> {
        let c = &self.conn;
        let mut pairs: HashMap<i64, SavedPair> = HashMap::new();
        let mut st = c.prepare("SELECT id, probe, target, tail FROM pair")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let (id, probe, target, tail): (i64, String, String, String) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            match serde_json::from_str(&tail) {
                Ok(tail) => {
                    let p = SavedPair {
                        probe,
                        target,
                        tail,
                        ..SavedPair::default()
                    };
                    pairs.insert(id, p);
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), probe, target, error = %e, "a pair's history in the status store does not read; the results log fills it")
                }
            }
        }
        Ok(pairs)
    }

    /// The pairs' slots, fine, coarse and daily, each table in its key order (time first).
    fn read_slots(&self, pairs: &mut HashMap<i64, SavedPair>) -> rusqlite::Result<()> {
        let c = &self.conn;
        each_slot(
            c,
            "SELECT pair, bucket, runs, failed, maintenance, ttft_p50, ttft_p95, tps FROM fine ORDER BY bucket, pair",
            pairs,
            |p, r| {
                p.fine.push(FineRow {
                    bucket: r.get(1)?,
                    runs: r.get(2)?,
                    failed: r.get(3)?,
                    maintenance: r.get(4)?,
                    ttft_p50: r.get(5)?,
                    ttft_p95: r.get(6)?,
                    tps: r.get(7)?,
                });
                Ok(())
            },
        )?;
        each_slot(
            c,
            "SELECT pair, bucket, runs, failed, maintenance FROM coarse ORDER BY bucket, pair",
            pairs,
            |p, r| {
                p.coarse.push(CoarseRow {
                    bucket: r.get(1)?,
                    runs: r.get(2)?,
                    failed: r.get(3)?,
                    maintenance: r.get(4)?,
                });
                Ok(())
            },
        )?;
        each_slot(
            c,
            "SELECT pair, day, runs, failed, maintenance, ttft_p50, ttft_p95, tps_p50 FROM day ORDER BY day, pair",
            pairs,
            |p, r| {
                p.days.push(DayRow {
                    day: r.get(1)?,
                    runs: r.get(2)?,
                    failed: r.get(3)?,
                    maintenance: r.get(4)?,
                    ttft_p50: r.get(5)?,
                    ttft_p95: r.get(6)?,
                    tps_p50: r.get(7)?,
                });
                Ok(())
            },
        )
    }

    /// The incident detector's last runs of each pair, and the incidents.
    fn read_incidents(&self) -> rusqlite::Result<SavedIncidents> {
        let c = &self.conn;
        let mut incidents = SavedIncidents::default();
        let mut st = c.prepare("SELECT probe, target, runs FROM recent")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let (probe, target, runs): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
            if let Ok(recent) = serde_json::from_str(&runs) {
                incidents.recent.push((probe, target, recent));
            }
        }
        let mut st = c.prepare("SELECT body FROM incident")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let body: String = r.get(0)?;
            match serde_json::from_str::<Incident>(&body) {
                Ok(i) => incidents.list.push(i),
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "an incident in the status store does not read; left out")
                }
            }
        }
        Ok(incidents)
    }

    /// Runs' changes, in one transaction: each is whole in the store or not at all.
    pub(crate) fn write(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let mut run = || -> rusqlite::Result<()> {
            let tx = self.conn.transaction()?;
            for change in changes {
                put_pair(&tx, &change.pair)?;
                if let Some(r) = &change.recent {
                    put_recent(&tx, &change.pair.probe, &change.pair.target, r)?;
                }
                if let Some(i) = &change.incident {
                    put_incident(&tx, i)?;
                }
            }
            tx.commit()
        };
        run().map_err(|e| self.err(e))
    }

    /// Every pair's history and the incidents, in one transaction (after the results log
    /// filled what the store lacked).
    pub(crate) fn save_all(
        &mut self,
        pairs: &[SavedPair],
        incidents: &SavedIncidents,
    ) -> Result<(), StoreError> {
        let mut run = || -> rusqlite::Result<()> {
            let tx = self.conn.transaction()?;
            for p in pairs {
                put_pair(&tx, p)?;
            }
            for (probe, target, r) in &incidents.recent {
                put_recent(&tx, probe, target, r)?;
            }
            for i in &incidents.list {
                put_incident(&tx, i)?;
            }
            tx.commit()
        };
        run().map_err(|e| self.err(e))
    }

    /// Deletes, as of `now`, the slots the history no longer shows and the days and ended
    /// incidents older than `retention`, `SWEEP_BATCH` rows a statement; answers how many.
    pub(crate) fn sweep(
        &mut self,
        now: Timestamp,
        retention: Duration,
    ) -> Result<usize, StoreError> {
        let secs = now.as_second();
        let horizon = secs.saturating_sub(i64::try_from(retention.as_secs()).unwrap_or(i64::MAX));
        let cuts: [(&str, &str, i64); 4] = [
            (
                "fine",
                "bucket, pair",
                secs.div_euclid(FINE_SECONDS) - FINE_SLOTS as i64,
            ),
            (
                "coarse",
                "bucket, pair",
                secs.div_euclid(COARSE_SECONDS) - COARSE_SLOTS as i64,
            ),
            ("day", "day, pair", horizon.div_euclid(DAY_SECONDS)),
            ("incident", "id", horizon.saturating_mul(1000)),
        ];
        let mut deleted = 0;
        for (table, key, cut) in cuts {
            let column = match table {
                "fine" | "coarse" => "bucket",
                "day" => "day",
                _ => "ended_ms",
            };
            let sql = format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {column} < ?1 LIMIT {SWEEP_BATCH})"
            );
            loop {
                let n = self
                    .conn
                    .execute(&sql, params![cut])
                    .map_err(|e| self.err(e))?;
                deleted += n;
                if n < SWEEP_BATCH {
                    break;
                }
            }
        }
        Ok(deleted)
    }

    /// `PRAGMA integrity_check`'s answer: `["ok"]` for a sound database.
    #[cfg(test)]
    pub(crate) fn integrity_check(&self) -> Result<Vec<String>, StoreError> {
        let check = || -> rusqlite::Result<Vec<String>> {
            let mut st = self.conn.prepare("PRAGMA integrity_check")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        };
        check().map_err(|e| self.err(e))
    }
}

/// Hands each row of `sql` (whose first column is a pair's id) to `add` with its pair; rows of
/// pairs that did not read are passed over.
fn each_slot(
    c: &Connection,
    sql: &str,
    pairs: &mut HashMap<i64, SavedPair>,
    mut add: impl FnMut(&mut SavedPair, &rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let mut st = c.prepare(sql)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        if let Some(p) = pairs.get_mut(&r.get(0)?) {
            add(p, r)?;
        }
    }
    Ok(())
}

fn put_pair(tx: &Transaction<'_>, p: &SavedPair) -> rusqlite::Result<()> {
    let tail = serde_json::to_string(&p.tail)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let id: i64 = tx
        .query_row(
            "INSERT INTO pair (probe, target, tail) VALUES (?1, ?2, ?3)
             ON CONFLICT (probe, target) DO UPDATE SET tail = excluded.tail RETURNING id",
            params![p.probe, p.target, tail],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or_default();
    for r in &p.fine {
        tx.execute(
            "INSERT OR REPLACE INTO fine (pair, bucket, runs, failed, maintenance, ttft_p50, ttft_p95, tps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                r.bucket,
                r.runs,
                r.failed,
                r.maintenance,
                r.ttft_p50,
                r.ttft_p95,
                r.tps
            ],
        )?;
    }
    for r in &p.coarse {
        tx.execute(
            "INSERT OR REPLACE INTO coarse (pair, bucket, runs, failed, maintenance) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, r.bucket, r.runs, r.failed, r.maintenance],
        )?;
    }
    for r in &p.days {
        tx.execute(
            "INSERT OR REPLACE INTO day (pair, day, runs, failed, maintenance, ttft_p50, ttft_p95, tps_p50) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                r.day,
                r.runs,
                r.failed,
                r.maintenance,
                r.ttft_p50,
                r.ttft_p95,
                r.tps_p50
            ],
        )?;
    }
    Ok(())
}

fn put_recent(tx: &Transaction<'_>, probe: &str, target: &str, r: &Recent) -> rusqlite::Result<()> {
    let runs = serde_json::to_string(r)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    tx.execute(
        "INSERT OR REPLACE INTO recent VALUES (?1, ?2, ?3)",
        params![probe, target, runs],
    )?;
    Ok(())
}

fn put_incident(tx: &Transaction<'_>, i: &Incident) -> rusqlite::Result<()> {
    let body = serde_json::to_string(i)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    tx.execute(
        "INSERT OR REPLACE INTO incident VALUES (?1, ?2, ?3)",
        params![i.id, i.ended_at.map(|t| t.as_millisecond()), body],
    )?;
    Ok(())
}
