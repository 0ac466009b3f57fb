use super::*;

fn at(s: &str) -> Zoned {
    s.parse().unwrap()
}

fn next(expr: &str, from: &str) -> String {
    Cron::parse(expr)
        .unwrap()
        .next_after(&at(from))
        .unwrap()
        .to_string()
}

fn fires(expr: &str, from: &str, n: usize) -> Vec<String> {
    Schedule::from(Cron::parse(expr).unwrap())
        .upcoming(&at(from), n)
        .iter()
        .map(|z| z.to_string())
        .collect()
}

#[test]
fn five_and_six_fields() {
    assert_eq!(
        next("*/1 * * * *", "2026-01-01T10:00:30Z[UTC]"),
        "2026-01-01T10:01:00+00:00[UTC]"
    );
    assert_eq!(
        next("*/15 * * * * *", "2026-01-01T10:00:30Z[UTC]"),
        "2026-01-01T10:00:45+00:00[UTC]"
    );
    assert_eq!(
        next("30 9 * * 1-5", "2026-01-02T10:00:00Z[UTC]"),
        "2026-01-05T09:30:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 0 1 jan *", "2026-03-01T00:00:00Z[UTC]"),
        "2027-01-01T00:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("@hourly", "2026-01-01T10:59:59Z[UTC]"),
        "2026-01-01T11:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 12 * * sun", "2026-11-29T12:00:00Z[UTC]"),
        "2026-12-06T12:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 12 * * 7", "2026-11-29T12:00:00Z[UTC]"),
        "2026-12-06T12:00:00+00:00[UTC]"
    );
}

#[test]
fn weekdays_are_posix_not_quartz() {
    // 2026-01-03 is a Saturday: `1-5` is Monday to Friday, so the next run is Monday the 5th
    // (the `cron` crate's Quartz reading would fire on Sunday the 4th).
    assert_eq!(
        next("0 9 * * 1-5", "2026-01-03T00:00:00Z[UTC]"),
        "2026-01-05T09:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 9 * * 0", "2026-01-03T00:00:00Z[UTC]"),
        "2026-01-04T09:00:00+00:00[UTC]"
    );
    // Names, any case; a range may end on Sunday.
    assert_eq!(
        next("0 9 * * FRI-sun", "2026-01-05T00:00:00Z[UTC]"),
        "2026-01-09T09:00:00+00:00[UTC]"
    );
    assert_eq!(
        fires("0 9 * * sat-sun", "2026-01-05T00:00:00Z[UTC]", 2),
        [
            "2026-01-10T09:00:00+00:00[UTC]",
            "2026-01-11T09:00:00+00:00[UTC]"
        ]
    );
    assert_eq!(
        next("0 9 1 Feb-Mar/1 *", "2026-01-05T00:00:00Z[UTC]"),
        "2026-02-01T09:00:00+00:00[UTC]"
    );
}

#[test]
fn macros() {
    let from = "2026-01-07T10:30:00Z[UTC]"; // a Wednesday
    for (m, want) in [
        ("@yearly", "2027-01-01T00:00:00+00:00[UTC]"),
        ("@annually", "2027-01-01T00:00:00+00:00[UTC]"),
        ("@monthly", "2026-02-01T00:00:00+00:00[UTC]"),
        ("@weekly", "2026-01-11T00:00:00+00:00[UTC]"),
        ("@daily", "2026-01-08T00:00:00+00:00[UTC]"),
        ("@midnight", "2026-01-08T00:00:00+00:00[UTC]"),
        ("@hourly", "2026-01-07T11:00:00+00:00[UTC]"),
    ] {
        assert_eq!(next(m, from), want, "{m}");
    }
}

#[test]
fn dom_or_dow_when_both_restricted() {
    // 2026-11-29 is a Sunday; the 1st of December is a Tuesday.
    assert_eq!(
        next("0 0 1 * mon", "2026-11-29T12:00:00Z[UTC]"),
        "2026-11-30T00:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 0 1 * mon", "2026-11-30T12:00:00Z[UTC]"),
        "2026-12-01T00:00:00+00:00[UTC]"
    );
    // Only one restricted: that one alone decides; `?` is `*`.
    assert_eq!(
        next("0 0 1 * ?", "2026-11-29T12:00:00Z[UTC]"),
        "2026-12-01T00:00:00+00:00[UTC]"
    );
    assert_eq!(
        next("0 0 * * mon", "2026-11-30T12:00:00Z[UTC]"),
        "2026-12-07T00:00:00+00:00[UTC]"
    );
}

#[test]
fn dst_follows_vixie_cron() {
    // Paris skips 02:00-03:00 on 2026-03-29 and repeats it on 2026-10-25; Lord Howe skips
    // 02:00-02:30 on 2026-10-04.
    let p = |s: &str| format!("2026-{s}[Europe/Paris]");
    let cases: [(&str, String, Vec<String>); 7] = [
        // A fixed time the clock skips runs when it lands, once.
        (
            "30 2 * * *",
            p("03-29T00:30:00+01:00"),
            vec![p("03-29T03:00:00+02:00"), p("03-30T02:30:00+02:00")],
        ),
        // ... lists of fixed times too (croner alone would skip them).
        (
            "0,30 2 * * *",
            p("03-29T00:30:00+01:00"),
            vec![p("03-29T03:00:00+02:00"), p("03-30T02:00:00+02:00")],
        ),
        (
            "10 2 * * *",
            "2026-10-04T00:00:00+10:30[Australia/Lord_Howe]".into(),
            vec![
                "2026-10-04T02:30:00+11:00[Australia/Lord_Howe]".into(),
                "2026-10-05T02:10:00+11:00[Australia/Lord_Howe]".into(),
            ],
        ),
        // A wildcard job skips what does not exist.
        (
            "30 * * * *",
            p("03-29T01:00:00+01:00"),
            vec![p("03-29T01:30:00+01:00"), p("03-29T03:30:00+02:00")],
        ),
        // A fixed time the clock repeats runs on the first pass only (croner alone would
        // repeat the list).
        (
            "0,30 2 * * *",
            p("10-25T01:45:00+02:00"),
            vec![
                p("10-25T02:00:00+02:00"),
                p("10-25T02:30:00+02:00"),
                p("10-26T02:00:00+01:00"),
            ],
        ),
        // ... and starting inside the second pass, its first is already past.
        (
            "45 2 * * *",
            p("10-25T02:40:00+01:00"),
            vec![p("10-26T02:45:00+01:00")],
        ),
        // A wildcard job runs on both passes, and does not go back from the second.
        (
            "30 * * * *",
            p("10-25T01:45:00+02:00"),
            vec![
                p("10-25T02:30:00+02:00"),
                p("10-25T02:30:00+01:00"),
                p("10-25T03:30:00+01:00"),
            ],
        ),
    ];
    for (expr, from, want) in cases {
        assert_eq!(fires(expr, &from, want.len()), want, "{expr} after {from}");
    }
    assert_eq!(
        next("45 * * * *", &p("10-25T02:40:00+01:00")),
        p("10-25T02:45:00+01:00")
    );
}

fn every(secs: u64) -> Schedule {
    Schedule::Every {
        every: Every::new(Duration::from_secs(secs)).unwrap(),
        text: format!("{secs}s"),
    }
}

/// The fire times a pair's loop walks through from `start`, as the daemon asks for them.
fn walk(s: &Schedule, offset: Duration, start: &str, n: usize) -> Vec<String> {
    let mut at = self::at(start);
    (0..n)
        .map(|_| {
            at = s.next_after_offset(&at, offset).unwrap();
            at.timestamp().to_string()
        })
        .collect()
}

#[test]
fn an_interval_keeps_its_phase_across_a_restart() {
    let five = every(300);
    let offset = Duration::from_secs(17);
    // Started at 10:01:02, or restarted at 10:08:40: the same instants, 5 minutes apart, 17 s
    // after each multiple of 5 minutes since the epoch.
    let first = walk(&five, offset, "2026-01-01T10:01:02Z[UTC]", 4);
    assert_eq!(
        first,
        [
            "2026-01-01T10:05:17Z",
            "2026-01-01T10:10:17Z",
            "2026-01-01T10:15:17Z",
            "2026-01-01T10:20:17Z"
        ]
    );
    let restarted = walk(&five, offset, "2026-01-01T10:08:40.5Z[UTC]", 3);
    assert_eq!(restarted, first[1..]);
    // Just inside the offset: the multiple's own fire time is still ahead.
    assert_eq!(
        walk(&five, offset, "2026-01-01T10:05:16.9Z[UTC]", 1),
        ["2026-01-01T10:05:17Z"]
    );
    // Never the same instant twice: asked from a fire time, the next one.
    assert_eq!(
        walk(&five, offset, "2026-01-01T10:05:17Z[UTC]", 1),
        ["2026-01-01T10:10:17Z"]
    );
}

#[test]
fn a_cron_schedule_takes_the_same_offset() {
    let hourly = Schedule::from(Cron::parse("@hourly").unwrap());
    let offset = Duration::from_secs(90);
    assert_eq!(
        walk(&hourly, offset, "2026-01-01T10:00:30Z[UTC]", 2),
        ["2026-01-01T10:01:30Z", "2026-01-01T11:01:30Z"]
    );
    assert_eq!(
        walk(&hourly, Duration::ZERO, "2026-01-01T10:00:30Z[UTC]", 1),
        ["2026-01-01T11:00:00Z"]
    );
}

#[test]
fn every_descriptor_fires_as_its_cron_twin() {
    // `@every 1m` and `* * * * *`, `@every 1h` and `@hourly` fire at the same instants (in
    // UTC; an interval counts from the epoch, not from the zone's midnight).
    let from = "2026-01-07T10:30:30Z[UTC]";
    for (secs, expr) in [(60, "* * * * *"), (3600, "@hourly"), (86_400, "@daily")] {
        let cron = Schedule::from(Cron::parse(expr).unwrap());
        assert_eq!(
            every(secs).upcoming(&at(from), 3),
            cron.upcoming(&at(from), 3),
            "{expr}"
        );
    }
}

#[test]
fn a_pairs_offset_is_stable_and_spread_over_the_jitter() {
    let jitter = Duration::from_secs(60);
    let a = pair_offset(jitter, "capital", "chat-7b");
    assert_eq!(a, pair_offset(jitter, "capital", "chat-7b"));
    assert_eq!(
        pair_offset(Duration::ZERO, "capital", "chat-7b"),
        Duration::ZERO
    );
    let offsets: Vec<Duration> = (0..400)
        .map(|i| pair_offset(jitter, "p", &format!("target-{i}")))
        .collect();
    assert!(offsets.iter().all(|o| *o < jitter));
    // Every quarter of the jitter gets a fair share of 400 pairs.
    let mut quarters = [0; 4];
    for o in &offsets {
        quarters[(o.as_secs() / 15) as usize] += 1;
    }
    assert!(
        quarters.iter().all(|&n| (70..130).contains(&n)),
        "{quarters:?}"
    );
}

#[test]
fn upcoming_is_strictly_increasing() {
    let c = Schedule::from(Cron::parse("*/2 * * * * *").unwrap());
    let v = c.upcoming(&at("2026-01-01T00:00:00.5Z[UTC]"), 3);
    let s: Vec<String> = v.iter().map(|z| z.timestamp().to_string()).collect();
    assert_eq!(
        s,
        [
            "2026-01-01T00:00:02Z",
            "2026-01-01T00:00:04Z",
            "2026-01-01T00:00:06Z"
        ]
    );
}

#[test]
fn errors_say_what_is_wrong() {
    let e = |s: &str| Cron::parse(s).unwrap_err().to_string();
    assert_eq!(
        e("*/61 * * * *"),
        "minute field: step 61 is larger than the range 0-59"
    );
    assert_eq!(e("61 * * * *"), "minute field: 61 is out of range 0-59");
    assert!(e("* * * *").starts_with("expected 5 fields"));
    assert!(e("0 0 0 1 1 * 2030").starts_with("expected 5 fields"));
    assert_eq!(e("0 0 30 2 *"), "the expression never fires");
    assert_eq!(
        e("*/0 * * * *"),
        "minute field: step \"0\" must be a positive number"
    );
    assert_eq!(e("0 25 * * *"), "hour field: 25 is out of range 0-23");
    assert_eq!(
        e("0 0 * foo *"),
        "month field: \"foo\" is neither a number nor a name in jan-dec"
    );
    assert_eq!(
        e("0 0 5-1 * *"),
        "day-of-month field: range \"5-1\" runs backwards"
    );
    assert_eq!(
        e("5/15 * * * *"),
        "minute field: \"5/15\" steps from a single value, which standard cron does not \
         allow; write \"5-59/15\""
    );
    assert!(e("@reboot").starts_with("unknown macro \"@reboot\""));
}

#[test]
fn names_only_in_their_own_field() {
    // croner alone would read `jan` in day-of-week as 1 (Monday).
    let e = |s: &str| Cron::parse(s).unwrap_err().to_string();
    assert_eq!(
        e("0 0 * * jan"),
        "day-of-week field: \"jan\" is neither a number nor a name in sun-sat"
    );
    assert_eq!(
        e("0 0 * mon *"),
        "month field: \"mon\" is neither a number nor a name in jan-dec"
    );
    assert_eq!(e("0 mon * * *"), "hour field: \"mon\" is not a number");
}

#[test]
fn what_the_check_passes_croner_accepts() {
    // So every error names its field in our words: none falls through to croner's.
    let mut rng = fastrand::Rng::with_seed(7);
    let atoms = [
        "0", "1", "5", "7", "12", "31", "59", "60", "*", ",", "-", "/", "?", "L", "W", "#", "+",
        "sun", "Jan", "mon",
    ];
    for _ in 0..50_000 {
        let mut fields = vec!["*".to_string(); 6];
        let n = rng.usize(1..6);
        fields[rng.usize(..6)] = (0..n).map(|_| atoms[rng.usize(..atoms.len())]).collect();
        let expr = fields.join(" ");
        if let Err(e) = Cron::parse(&expr) {
            assert!(!e.to_string().starts_with("croner"), "{expr:?}: {e}");
        }
    }
}

#[test]
fn quartz_extensions_are_rejected() {
    let e = |s: &str| Cron::parse(s).unwrap_err().to_string();
    for (expr, field, part) in [
        ("0 0 L * *", "day-of-month", "L"),
        ("0 0 15W * *", "day-of-month", "15W"),
        ("0 0 * * 5#2", "day-of-week", "5#2"),
        ("0 0 * * 5L", "day-of-week", "5L"),
    ] {
        assert_eq!(
            e(expr),
            format!(
                "{field} field: {part:?} uses L, W or #, Quartz extensions that standard \
                 cron does not have"
            )
        );
    }
    assert_eq!(
        e("0 0 1 * +mon"),
        "day-of-week field: \"+mon\" is neither a number nor a name in sun-sat"
    );
    assert_eq!(
        e("0 0 1 * +5"),
        "day-of-week field: \"+5\" is neither a number nor a name in sun-sat"
    );
    assert_eq!(e("0 0 ? * * *"), "hour field: \"?\" is not a number");
    assert_eq!(
        e("0 1,* * * *"),
        "hour field: \"*\" stands for every value, so it cannot be one item of a list"
    );
    assert_eq!(
        e("0 0 * * 1-0"),
        "day-of-week field: range \"1-0\" runs backwards"
    );
    assert_eq!(
        e("*/+5 * * * *"),
        "minute field: step \"+5\" must be a positive number"
    );
    assert_eq!(
        e("1,,2 * * * *"),
        "minute field: a value is missing (around `,`, `-` or `/`)"
    );
    assert_eq!(
        e("/5 * * * *"),
        "minute field: a value is missing (around `,`, `-` or `/`)"
    );
}
