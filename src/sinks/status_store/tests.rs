//! Tests of the store's database: what is saved reads back the same, a run's change lands in
//! one transaction, the sweep keeps what the page shows, and files that are not ours are refused.

use std::time::Duration;

use jiff::Timestamp;

use super::*;
use crate::sinks::incidents::Incidents;
use crate::sinks::status_history::{Run, SavedPair, StatusHistory};

fn run(probe: &str, at: Timestamp, ok: bool) -> Run {
    Run {
        probe: probe.into(),
        target: "t".into(),
        started_at: at,
        outcome: if ok { "ok" } else { "timeout" }.into(),
        success: ok,
        maintenance: false,
        warmup: false,
        cache_phase: None,
        ttft_ms: Some(80.0),
        tokens_per_second: Some(55.5),
        http_status: Some(200),
        request_id: "r".into(),
        trace_id: String::new(),
        error: (!ok).then(|| "no first token within 2s".into()),
        failed_checks: vec![],
        repetition: None,
    }
}

fn sorted(mut pairs: Vec<SavedPair>) -> Vec<SavedPair> {
    pairs.sort_by(|a, b| a.probe.cmp(&b.probe));
    pairs
}

#[test]
fn what_is_saved_and_written_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/status.db");
    let keys = [("p".to_string(), "t".to_string()), ("q".into(), "t".into())];
    let history = StatusHistory::default();
    history.retain_pairs(&keys);
    let mut incidents = Incidents::new(Duration::from_secs(90 * 86_400));
    incidents.retain_pairs(&keys);
    let now = Timestamp::from_second(1_900_000_000).unwrap();
    // Thirty days, hourly: the whole saved at once (as after a replay).
    for h in (1..30 * 24).rev() {
        let at = now - jiff::SignedDuration::from_hours(h);
        for p in ["p", "q"] {
            let r = run(p, at, h % 17 != 0);
            history.record(&r);
            incidents.record(&r);
        }
    }
    let mut db = Db::open(&path).unwrap();
    db.save_all(&history.saved(), &incidents.saved()).unwrap();
    // Then a run at a time (as the writer does), one of them failing.
    for (i, p) in ["p", "q", "p"].into_iter().enumerate() {
        let r = run(p, now + jiff::SignedDuration::from_secs(i as i64), i != 1);
        let pair = history.record_saved(&r).unwrap();
        let (recent, incident) = incidents.record_saved(&r).unwrap();
        let change = Change {
            pair,
            recent: Some(recent),
            incident,
        };
        db.write(std::slice::from_ref(&change)).unwrap();
    }
    drop(db);
    let db = Db::open(&path).unwrap();
    let (pairs, inc) = db.load().unwrap();
    // The store keeps rows the history has moved past until the sweep; restored, the history
    // is the one saved.
    let restored = StatusHistory::default();
    restored.retain_pairs(&keys);
    for p in &pairs {
        restored.restore(p);
    }
    assert_eq!(sorted(restored.saved()), sorted(history.saved()));
    let mut want = incidents.saved();
    let mut got = inc;
    for s in [&mut want, &mut got] {
        s.recent.sort_by(|a, b| a.0.cmp(&b.0));
        s.list.sort_by(|a, b| a.id.cmp(&b.id));
    }
    assert_eq!(got, want);
    assert_eq!(db.integrity_check().unwrap(), ["ok"]);
}

#[test]
fn the_sweep_deletes_what_the_page_no_longer_shows_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("status.db");
    let history = StatusHistory::default();
    history.retain_pairs(&[("p".into(), "t".into())]);
    let mut db = Db::open(&path).unwrap();
    let now = Timestamp::from_second(1_900_000_000).unwrap();
    // Every 5 minutes for 20 days, each written as it landed: 5,760 slots, most of them old.
    for i in (0..20 * 288).rev() {
        let r = run("p", now - jiff::SignedDuration::from_secs(300 * i), true);
        let pair = history.record_saved(&r).unwrap();
        let change = Change {
            pair,
            recent: None,
            incident: None,
        };
        db.write(std::slice::from_ref(&change)).unwrap();
    }
    let deleted = db.sweep(now, Duration::from_secs(7 * 86_400)).unwrap();
    // Of 5,760 five-minute slots all but the day's 289; of the 481 hours they span all but the
    // week's 169; of 21 days the 13 before the retention.
    assert_eq!(deleted, (5760 - 289) + (481 - 169) + 13);
    let (pairs, _) = db.load().unwrap();
    let kept = history.saved();
    assert_eq!(pairs[0].tail, kept[0].tail);
    assert!(pairs[0].fine.len() >= kept[0].fine.len());
    let restored = StatusHistory::default();
    restored.retain_pairs(&[("p".into(), "t".into())]);
    restored.restore(&pairs[0]);
    assert_eq!(
        serde_json::to_string(&restored.snapshot_target("t", now)).unwrap(),
        serde_json::to_string(&history.snapshot_target("t", now)).unwrap()
    );
    assert_eq!(db.sweep(now, Duration::from_secs(7 * 86_400)).unwrap(), 0);
}

#[test]
fn files_that_are_not_a_store_of_ours_are_refused_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.db");
    std::fs::write(
        &garbage,
        b"not a database at all, just some text that is long enough to read ".repeat(100),
    )
    .unwrap();
    let e = Db::open(&garbage).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("status store {}: ", garbage.display())),
        "{e}"
    );
    assert!(e.contains("not a SQLite database"), "{e}");
    let foreign = dir.path().join("foreign.db");
    let c = rusqlite::Connection::open(&foreign).unwrap();
    c.execute_batch("PRAGMA application_id = 42; CREATE TABLE t (x);")
        .unwrap();
    drop(c);
    let e = Db::open(&foreign).unwrap_err().to_string();
    assert!(e.contains("another program (application_id 0x2a)"), "{e}");
    // An empty file is a new store.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    Db::open(&empty).unwrap();
    Db::open(&empty).unwrap();
}
