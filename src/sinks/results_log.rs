//! The results log: every result as one JSON line (the record of docs/design.md), rotated by size so the
//! per-request history Prometheus cannot hold stays bounded on disk: `results.jsonl`, then
//! `results.jsonl.1` (newest) ... `results.jsonl.N` (oldest).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::ResultsLogSettings as Settings;
use crate::result::ProbeResult;

pub(crate) struct ResultsLog {
    settings: Settings,
    file: File,
    size: u64,
}

fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// A log and its rotated files, oldest first: `PATH.N` … `PATH.1`, then `PATH` (those that
/// exist). The results log rotates by renaming `PATH` to `PATH.1`, `.1` to `.2` and so on; the
/// directory is read for them, so a file midway through that renaming (`.7` gone, `.8` there)
/// does not hide the older ones. `PATH` is looked for first: renamed to `.1` after that, it is
/// in the directory then, so a rotating log is never found empty.
pub fn log_files(path: &Path) -> Vec<PathBuf> {
    let current = path.exists();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let mut older: Vec<(u32, PathBuf)> = std::fs::read_dir(dir.unwrap_or(Path::new(".")))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name();
            let digits = file.to_str()?.strip_prefix(name)?.strip_prefix('.')?;
            let n: u32 = digits.parse().ok()?;
            (n.to_string() == digits).then(|| (n, path.with_file_name(&file)))
        })
        .collect();
    older.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    let mut out: Vec<PathBuf> = older.into_iter().map(|(_, p)| p).collect();
    if current {
        out.push(path.to_path_buf());
    }
    out
}

impl ResultsLog {
    pub(crate) fn open(settings: &Settings) -> std::io::Result<ResultsLog> {
        if let Some(dir) = settings.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&settings.path)?;
        let size = file.metadata()?.len();
        Ok(ResultsLog {
            settings: settings.clone(),
            file,
            size,
        })
    }

    pub(crate) fn append(&mut self, r: &ProbeResult) -> std::io::Result<()> {
        let mut line = r.to_json_line();
        line.push('\n');
        if self.size > 0 && self.size + line.len() as u64 > self.settings.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(line.as_bytes())?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let p = &self.settings.path;
        let keep = self.settings.keep;
        let _ = std::fs::remove_file(rotated(p, keep));
        for n in (1..keep).rev() {
            let from = rotated(p, n);
            if from.exists() {
                std::fs::rename(&from, rotated(p, n + 1))?;
            }
        }
        std::fs::rename(p, rotated(p, 1))?;
        self.file = OpenOptions::new().create(true).append(true).open(p)?;
        self.size = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(i: usize) -> ProbeResult {
        let mut r = ProbeResult::example();
        r.id.probe = format!("p{i}");
        r
    }

    #[test]
    fn rotates_by_size_and_keeps_n_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let line_len = result(0).to_json_line().len() as u64 + 1;
        let settings = Settings {
            path: dir.join("sub/results.jsonl"),
            max_bytes: line_len * 3,
            keep: 2,
        };
        let mut log = ResultsLog::open(&settings).unwrap();
        for i in 0..10 {
            log.append(&result(i)).unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let current = read(&settings.path);
        assert_eq!(current.lines().count(), 1);
        assert!(current.contains("\"probe\":\"p9\""));
        assert_eq!(read(&rotated(&settings.path, 1)).lines().count(), 3);
        assert!(read(&rotated(&settings.path, 1)).contains("\"probe\":\"p8\""));
        assert!(read(&rotated(&settings.path, 2)).contains("\"probe\":\"p5\""));
        assert!(
            !rotated(&settings.path, 3).exists(),
            "only `keep` rotated files"
        );
        // Reopening appends.
        drop(log);
        let mut log = ResultsLog::open(&settings).unwrap();
        log.append(&result(10)).unwrap();
        assert_eq!(read(&settings.path).lines().count(), 2);
    }
}
