//! What tests and benchmarks read about a process, and the machine, from /proc: resident set,
//! CPU time, open file descriptors. (The benchmarks include this file from `benches/support`.)
#![allow(dead_code)]

/// USER_HZ, the unit of /proc's CPU times: 100 on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

/// A `VmRSS:`-style field of /proc/<pid>/status, in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().ok()? + f[12].parse::<f64>().ok()?;
    Some(ticks / TICKS_PER_SECOND)
}

pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The whole machine's busy CPU time (user, nice, system, irq, softirq) and the time its host
/// stole, in seconds summed over cores, from /proc/stat.
pub fn machine_cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<f64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal
    let busy = f[0] + f[1] + f[2] + f[5] + f[6];
    Some((busy / TICKS_PER_SECOND, f[7] / TICKS_PER_SECOND))
}
