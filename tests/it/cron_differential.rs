//! Differential test of the schedule: our `Cron` (croner) against Python's croniter, an
//! independent implementation, on thousands of random valid expressions in several time zones,
//! starting around daylight-saving changes. croniter lives in `.venv-tools/` (scripts/test
//! installs it); one Python process answers a whole batch over stdin/stdout JSON.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use llm_canary::testing::schedule::{Cron, Schedule};

const SEED: u64 = 0x5eed_c4a7;
const EXPRESSIONS: usize = 3000;
const FIRES: usize = 10;
/// Each expression runs in one zone that changes its clock (starting near a change, mostly)
/// and one that never does. Lord Howe moves its clock by 30 minutes.
const DST_ZONES: [&str; 3] = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"];
const PLAIN_ZONES: [&str; 2] = ["UTC", "Asia/Kolkata"];
/// Python processes run side by side.
const BATCHES: usize = 2;

/// croniter with the options that make it standard cron: day-of-month OR day-of-week
/// (`day_or`, its default, said out loud) and seconds as the first of six fields. It also
/// reports whether it read a day field spelled other than `*` as `*` while the other day field
/// is restricted (see `FULL_DAY_FIELD`).
const CRONITER: &str = r#"
import json, sys
from datetime import datetime
from zoneinfo import ZoneInfo
from croniter import croniter
req = json.load(sys.stdin)
out = []
for expr, six, tz, start in req["cases"]:
    base = datetime.fromtimestamp(start, ZoneInfo(tz))
    try:
        it = croniter(expr, base, day_or=True, second_at_beginning=six)
        free = ("*", "?")
        collapsed = any(
            it.expanded[f] == ["*"]
            and it.expressions[f] not in free
            and it.expressions[6 - f] not in free
            for f in (2, 4)
        )
        fires = [int(it.get_next(datetime).timestamp()) for _ in range(req["fires"])]
        out.append({"fires": fires, "collapsed": collapsed})
    except Exception as e:
        out.append(f"{type(e).__name__}: {e}")
json.dump(out, sys.stdout)
"#;

struct Case {
    expr: String,
    six: bool,
    zone: &'static str,
    tz: TimeZone,
    start: i64,
}

// ---- the generator: valid standard cron only, in every spelling users write ----

struct Field {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECOND: Field = Field {
    min: 0,
    max: 59,
    names: &[],
};
const MINUTE: Field = SECOND;
const HOUR: Field = Field {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Field = Field {
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
// 0 and 7 are both Sunday.
const DOW: Field = Field {
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"],
};

const MACROS: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

fn value(rng: &mut fastrand::Rng, f: &Field, v: u32) -> String {
    if !f.names.is_empty() && rng.u8(..3) == 0 {
        let name = f.names[(v - f.min) as usize];
        match rng.u8(..3) {
            0 => name.to_uppercase(),
            1 => name[..1].to_uppercase() + &name[1..],
            _ => name.to_string(),
        }
    } else {
        v.to_string()
    }
}

/// `a-b` with a < b: croniter reads `a-a` as the whole cycle and `b-a` as wrapping, both
/// deviations from cron, so neither is generated.
fn range(rng: &mut fastrand::Rng, f: &Field) -> String {
    let a = rng.u32(f.min..f.max);
    let b = rng.u32(a + 1..=f.max);
    format!("{}-{}", value(rng, f, a), value(rng, f, b))
}

fn item(rng: &mut fastrand::Rng, f: &Field) -> String {
    match rng.u8(..10) {
        0..=4 => {
            let v = rng.u32(f.min..=f.max);
            value(rng, f, v)
        }
        5..=7 => range(rng, f),
        _ => format!("{}/{}", range(rng, f), rng.u32(1..=f.max)),
    }
}

fn field(rng: &mut fastrand::Rng, f: &Field, star_weight: u8) -> String {
    let roll = rng.u8(..20);
    if roll < star_weight {
        return "*".into();
    }
    match roll % 4 {
        0 => format!("*/{}", rng.u32(1..=f.max.min(30))),
        1 => {
            let n = rng.usize(2..=4);
            (0..n).map(|_| item(rng, f)).collect::<Vec<_>>().join(",")
        }
        _ => item(rng, f),
    }
}

fn expression(rng: &mut fastrand::Rng) -> (String, bool) {
    if rng.u8(..20) == 0 {
        return (MACROS[rng.usize(..MACROS.len())].to_string(), false);
    }
    // Hours 1-3 are where clocks change: bias towards them so that DST is exercised.
    let hour = match rng.u8(..10) {
        0..=2 => rng.u32(1..=3).to_string(),
        3 => format!("{},{}", rng.u32(0..=1), rng.u32(2..=3)),
        _ => field(rng, &HOUR, 4),
    };
    let day_star = |rng: &mut fastrand::Rng| if rng.u8(..8) == 0 { "?" } else { "*" };
    let mut dom = field(rng, &DOM, 12);
    if dom == "*" {
        dom = day_star(rng).into();
    }
    let mut dow = field(rng, &DOW, 12);
    if dow == "*" {
        dow = day_star(rng).into();
    }
    let five = format!(
        "{} {hour} {dom} {} {dow}",
        field(rng, &MINUTE, 4),
        field(rng, &MONTH, 14)
    );
    if rng.u8(..3) == 0 {
        let second = match rng.u8(..3) {
            0 => "0".to_string(),
            _ => field(rng, &SECOND, 4),
        };
        (format!("{second} {five}"), true)
    } else {
        (five, false)
    }
}

/// A start instant in 2024-2030: in a zone that changes its clock, mostly within two days
/// before to two hours after a change; sometimes on a whole minute, where many expressions are
/// due (the next fire time must be strictly after it).
fn start(rng: &mut fastrand::Rng, tz: &TimeZone) -> i64 {
    let from = Timestamp::from_second(1_704_067_200).unwrap(); // 2024-01-01
    let until = Timestamp::from_second(1_924_992_000).unwrap(); // 2031-01-01
    let changes: Vec<i64> = tz
        .following(from)
        .take_while(|t| t.timestamp() < until)
        .map(|t| t.timestamp().as_second())
        .collect();
    let t = if !changes.is_empty() && rng.u8(..4) != 0 {
        changes[rng.usize(..changes.len())] + rng.i64(-2 * 86_400..2 * 3_600)
    } else {
        rng.i64(from.as_second()..until.as_second())
    };
    if rng.u8(..10) == 0 {
        t - t.rem_euclid(60)
    } else {
        t
    }
}

fn cases() -> Vec<Case> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut out = Vec::new();
    let mut made = 0;
    while made < EXPRESSIONS {
        let (expr, six) = expression(&mut rng);
        if let Err(e) = Cron::parse(&expr) {
            // The generator may pair days and months that never meet (`31 2`, `30 feb`).
            assert_eq!(
                e.to_string(),
                "the expression never fires",
                "{expr:?} is valid cron"
            );
            continue;
        }
        for zone in [
            DST_ZONES[made % DST_ZONES.len()],
            PLAIN_ZONES[made % PLAIN_ZONES.len()],
        ] {
            let tz = TimeZone::get(zone).unwrap();
            out.push(Case {
                expr: expr.clone(),
                six,
                zone,
                tz: tz.clone(),
                start: start(&mut rng, &tz),
            });
        }
        made += 1;
    }
    out
}

// ---- the reference ----

struct Reference {
    fires: Vec<i64>,
    /// croniter read a day field spelled other than `*` as `*`.
    collapsed: bool,
}

const MISSING: &str =
    "croniter is missing from .venv-tools/: run scripts/test, which installs it (this test never \
     skips: without its reference, the schedule is unchecked)";

/// croniter's answer for each case, or its error.
fn croniter(cases: &[Case]) -> Vec<Result<Reference, String>> {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-tools/bin/python");
    assert!(py.exists(), "{} does not exist. {MISSING}", py.display());
    let children: Vec<_> = cases
        .chunks(cases.len().div_ceil(BATCHES))
        .map(|batch| {
            let req = serde_json::json!({
                "fires": FIRES,
                "cases": batch.iter().map(|c| (&c.expr, c.six, c.zone, c.start)).collect::<Vec<_>>(),
            });
            let mut child = Command::new(&py)
                .args(["-c", CRONITER])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let body = serde_json::to_vec(&req).unwrap();
            // Written from a thread: a large request could fill the pipe while Python's
            // answer fills the other one.
            let writer = std::thread::spawn(move || stdin.write_all(&body));
            (child, writer)
        })
        .collect();
    let mut out = Vec::with_capacity(cases.len());
    for (child, writer) in children {
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(
            !stderr.contains("No module named 'croniter'"),
            "{MISSING}\n{stderr}"
        );
        assert!(done.status.success(), "the croniter batch failed: {stderr}");
        writer.join().unwrap().unwrap();
        let answers: Vec<serde_json::Value> = serde_json::from_slice(&done.stdout).unwrap();
        out.extend(answers.into_iter().map(|a| match a {
            serde_json::Value::String(e) => Err(e),
            a => Ok(Reference {
                fires: serde_json::from_value(a["fires"].clone()).unwrap(),
                collapsed: a["collapsed"].as_bool().unwrap(),
            }),
        }));
    }
    out
}

// ---- where the two may differ by design ----
//
// Each class below is a place where croniter departs from Vixie cron and we do not (or, for
// seconds, where Vixie has nothing to say). A disagreement is excluded only when it sits exactly
// there; every other one fails the test.

/// croniter reads a day field that covers every day but is spelled otherwise (`*/1`, `0-6`,
/// `1-31`) as `*` when the other day field contains a `*` (`*/16`), so the two combine with AND;
/// we keep the POSIX rule that only `*` (or `?`) leaves a day field unrestricted, so they combine
/// with OR. croniter does this as an optimisation of its expansion, not as a rule of cron.
const FULL_DAY_FIELD: &str = "a full day field spelled other than `*`";
/// A time the clock skips, of a job with `*` leading its second, minute or hour field: Vixie
/// cron does not run such jobs for skipped minutes, nor do we; croniter carries the time past
/// the gap (unless the hour field is exactly `*`).
const GAP_CARRIED: &str = "a wildcard job's skipped time carried past the gap";
/// A repeated time of a fixed-time job: Vixie cron runs it on the first pass only, as we do;
/// croniter runs it again on the second.
const FIXED_REPEATED: &str = "a fixed-time job run twice in a repeated hour";
/// A fixed-time job whose time the clock skips, with seconds: we run it at the first instant
/// after the jump (as croner does for single times), croniter at the same second of the first
/// minute after it. Vixie cron has no seconds; both run "right after the jump".
const SECONDS_AFTER_GAP: &str = "the second at which a skipped fixed time runs after the gap";
/// A wildcard job in the second pass of a repeated half hour (Lord Howe): Vixie cron runs
/// wildcard jobs on both passes, as we do; croniter skips the second pass of a 30-minute repeat.
const SECOND_PASS_MISSED: &str = "a wildcard job's second pass of a 30-minute repeat";

/// Vixie cron's wildcard job: `*` leads the second, minute or hour field (`@hourly` too).
fn wildcard(expr: &str) -> bool {
    let fields: Vec<&str> = match expr {
        "@hourly" => return true,
        e if e.starts_with('@') => return false,
        e => e.split_whitespace().collect(),
    };
    fields[..fields.len() - 3]
        .iter()
        .any(|f| f.starts_with('*'))
}

#[derive(PartialEq)]
enum Clock {
    /// Less than a minute after the clock jumped forward.
    Landing,
    /// In the second pass of a repeated range.
    SecondPass,
}

fn clock(tz: &TimeZone, t: i64) -> Option<Clock> {
    let ts = Timestamp::from_second(t).unwrap();
    let change = tz.preceding(ts + 1.second()).next()?;
    let at = change.timestamp();
    let before = tz.to_offset(at - 1.second()).seconds();
    let after = change.offset().seconds();
    let since = t - at.as_second();
    if after > before && since < 60 {
        Some(Clock::Landing)
    } else if after < before && since < i64::from(before - after) {
        Some(Clock::SecondPass)
    } else {
        None
    }
}

#[derive(Default)]
struct Tally {
    compared: usize,
    excluded: BTreeMap<&'static str, usize>,
}

/// Walks both lists of fire times in step; a fire time only one side has is skipped on that
/// side when it belongs to a class above, and counted.
fn reconcile(case: &Case, ours: &[i64], theirs: &Reference, tally: &mut Tally) -> bool {
    if ours != theirs.fires && theirs.collapsed {
        *tally.excluded.entry(FULL_DAY_FIELD).or_default() += ours.len();
        return true;
    }
    let wild = wildcard(&case.expr);
    let theirs = &theirs.fires;
    let (mut i, mut j) = (0, 0);
    while i < ours.len() && j < theirs.len() {
        let (o, t) = (ours[i], theirs[j]);
        if o == t {
            tally.compared += 1;
            i += 1;
            j += 1;
            continue;
        }
        // (class, steps on our side, steps on theirs)
        let class = if t < o {
            match clock(&case.tz, t) {
                Some(Clock::Landing) if wild => (GAP_CARRIED, 0, 1),
                Some(Clock::SecondPass) if !wild => (FIXED_REPEATED, 0, 1),
                _ => return false,
            }
        } else {
            match (clock(&case.tz, o), clock(&case.tz, t)) {
                (Some(Clock::Landing), Some(Clock::Landing)) if !wild && t - o < 60 => {
                    (SECONDS_AFTER_GAP, 1, 1)
                }
                (Some(Clock::SecondPass), _) if wild => (SECOND_PASS_MISSED, 1, 0),
                _ => return false,
            }
        };
        *tally.excluded.entry(class.0).or_default() += 1;
        i += class.1;
        j += class.2;
    }
    true
}

fn ours(case: &Case) -> Vec<i64> {
    let from = Timestamp::from_second(case.start)
        .unwrap()
        .to_zoned(case.tz.clone());
    Schedule::from(Cron::parse(&case.expr).unwrap())
        .upcoming(&from, FIRES)
        .iter()
        .map(|z| z.timestamp().as_second())
        .collect()
}

fn show(tz: &TimeZone, v: &[i64]) -> Vec<String> {
    v.iter()
        .map(|t| {
            Timestamp::from_second(*t)
                .unwrap()
                .to_zoned(tz.clone())
                .strftime("%F %T%:z")
                .to_string()
        })
        .collect()
}

#[test]
fn croner_agrees_with_croniter() {
    let started = std::time::Instant::now();
    let cases = cases();
    let reference = croniter(&cases);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for (case, theirs) in cases.iter().zip(&reference) {
        let ours = ours(case);
        let agreed = match theirs {
            Ok(theirs) => reconcile(case, &ours, theirs, &mut tally),
            Err(e) => {
                failures.push(format!("{:?} in {}: croniter: {e}", case.expr, case.zone));
                continue;
            }
        };
        if !agreed {
            let theirs = &theirs.as_ref().unwrap().fires;
            failures.push(format!(
                "{:?} in {} after {}:\n  ours   {:?}\n  theirs {:?}",
                case.expr,
                case.zone,
                show(&case.tz, &[case.start])[0],
                show(&case.tz, &ours),
                show(&case.tz, theirs)
            ));
        }
    }
    let excluded: usize = tally.excluded.values().sum();
    eprintln!(
        "{EXPRESSIONS} expressions, {} cases in {} zones: {} fire times agree, {excluded} \
         excluded {:?}, {} disagreements; {:?}",
        cases.len(),
        DST_ZONES.len() + PLAIN_ZONES.len(),
        tally.compared,
        tally.excluded,
        failures.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements with croniter:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The classes are narrow: if they start to swallow much, something else is going on.
    assert!(
        excluded * 100 < tally.compared,
        "{excluded} fire times excluded against {} compared",
        tally.compared
    );
}
