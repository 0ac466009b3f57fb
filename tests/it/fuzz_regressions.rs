//! Inputs the fuzzers found (tests/fixtures/fuzz/<target>/), kept as regression tests: each must
//! finish quickly and without a panic. A failure names the file and says which of the two it was.

use std::any::Any;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// What libFuzzer hands a `&str` target: the longest valid UTF-8 prefix.
fn as_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

/// Runs `run` on every file of `dir`, each on its own thread so a hang can be told from a
/// panic: a hang sends nothing within `limit`; a panic drops the sender, and the thread's
/// join hands back the panic's message.
fn each_in(dir: &Path, limit: Duration, run: fn(&[u8])) {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(
        !paths.is_empty(),
        "{}: no fixtures, so nothing would be tested",
        dir.display()
    );
    for path in paths {
        let bytes = std::fs::read(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            run(&bytes);
            let _ = tx.send(());
        });
        match rx.recv_timeout(limit) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => {
                panic!("{} hangs: not done within {limit:?}", path.display())
            }
            Err(RecvTimeoutError::Disconnected) => {
                let message = match worker.join() {
                    Err(payload) => panic_message(payload.as_ref()).to_string(),
                    Ok(()) => "(ended without a word)".to_string(),
                };
                panic!("{} panics: {message}", path.display());
            }
        }
    }
}

fn each(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    each_in(&dir, Duration::from_secs(10), run);
}

#[test]
fn config_loader_findings() {
    each("config_loader", |bytes| {
        let text = as_text(bytes);
        for msg in llm_canary::testing::config::check_yaml(&text)
            .into_iter()
            .chain(llm_canary::testing::config::check_yaml(
                &String::from_utf8_lossy(bytes),
            ))
        {
            assert!(!msg.contains('\n'), "{msg}");
        }
    });
}

/// How `each_in` fails, as its panic message.
fn failure(dir: &Path, limit: Duration, run: fn(&[u8])) -> String {
    let payload = std::panic::catch_unwind(|| each_in(dir, limit, run)).unwrap_err();
    panic_message(payload.as_ref()).to_string()
}

#[test]
fn a_panic_is_reported_as_a_panic_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("crash-1"), "x").unwrap();
    let msg = failure(dir.path(), Duration::from_secs(10), |_| panic!("boom"));
    assert!(msg.ends_with("crash-1 panics: boom"), "{msg}");
}

#[test]
fn a_hang_is_reported_as_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("timeout-1"), "x").unwrap();
    let msg = failure(dir.path(), Duration::from_millis(50), |_| {
        std::thread::sleep(Duration::from_secs(1))
    });
    assert!(msg.contains("timeout-1 hangs"), "{msg}");
}

#[test]
fn an_empty_fixture_folder_fails() {
    let dir = tempfile::tempdir().unwrap();
    let msg = failure(dir.path(), Duration::from_secs(10), |_| {});
    assert!(
        msg.ends_with("no fixtures, so nothing would be tested"),
        "{msg}"
    );
}
