//! Inputs the fuzzers found (tests/fixtures/fuzz/<target>/), kept as regression tests: each must
//! finish quickly and without a panic.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// What libFuzzer hands a `&str` target: the longest valid UTF-8 prefix.
fn as_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
    }
}

fn each(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            run(&bytes);
            let _ = tx.send(());
        });
        // A hang fails the test instead of stalling it.
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{} hangs", path.display()));
    }
}

#[test]
fn config_loader_findings() {
    each("config_loader", |bytes| {
        let text = as_text(bytes);
        for msg in
            llm_canary::config::check_yaml(&text)
                .into_iter()
                .chain(llm_canary::config::check_yaml(&String::from_utf8_lossy(
                    bytes,
                )))
        {
            assert!(!msg.contains('\n'), "{msg}");
        }
    });
}
