//! Drawing the board: a header (the agent, where the figures come from, pairs per state), a
//! line when the figures are stale, one row per pair (state, last outcome, TTFT and its
//! sparkline over the last runs, decode speed, when it last ran), the latest failures of the
//! pairs that are degraded or down, and the keys.

use jiff::Timestamp;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, RenderDirection, Sparkline};
use ratatui::Frame;

use super::board::{Board, Row};
use crate::daemon::status::State;

/// At most this many failures are listed under the rows.
const FAILURES_SHOWN: usize = 6;

pub(super) const KEYS: &str = "q / Esc / Ctrl-C quit · ↑ ↓ PgUp PgDn scroll";

fn state_style(s: State) -> Style {
    let c = match s {
        State::Up => Color::Green,
        State::Degraded => Color::Yellow,
        State::Down => Color::Red,
        State::Maintenance => Color::Blue,
        State::Pending => Color::DarkGray,
    };
    Style::new().fg(c).add_modifier(Modifier::BOLD)
}

fn ms(v: f32) -> String {
    if v < 100.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}

/// `12s ago`, `3m ago`, `2h ago`, `4d ago`.
fn ago(then: Timestamp, now: Timestamp) -> String {
    let s = now.duration_since(then).as_secs().max(0);
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}

/// The columns of a row, and of the line that names them.
fn columns(rows: &[Row]) -> [Constraint; 8] {
    let widest = |f: fn(&Row) -> usize, title: usize| {
        rows.iter().map(f).max().unwrap_or(0).clamp(title, 28) as u16
    };
    [
        Constraint::Length(widest(|r| r.target.chars().count(), 6)),
        Constraint::Length(widest(|r| r.probe.chars().count(), 5)),
        Constraint::Length(11),
        Constraint::Length(18),
        Constraint::Length(9),
        Constraint::Min(8),
        Constraint::Length(11),
        Constraint::Length(8),
    ]
}

pub(super) fn render(frame: &mut Frame, board: &Board, now: Timestamp, scroll: &mut usize) {
    let failing: Vec<&Row> = board.rows.iter().filter(|r| r.failure.is_some()).collect();
    let failures_height = match failing.len() {
        0 => 0,
        n => n.min(FAILURES_SHOWN) as u16 + 1,
    };
    let [head, problem, titles, body, failures, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(u16::from(board.problem.is_some())),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(failures_height),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    render_head(frame, board, head);
    if let Some(p) = &board.problem {
        frame.render_widget(Paragraph::new(p.as_str()).fg(Color::Red).bold(), problem);
    }

    let cols = columns(&board.rows);
    let split = |area: Rect| Layout::horizontal(cols).spacing(1).split(area);
    let names = [
        "TARGET",
        "PROBE",
        "STATE",
        "LAST OUTCOME",
        "TTFT",
        "TTFT, LAST RUNS",
        "DECODE",
        "LAST RUN",
    ];
    for (name, cell) in names.iter().zip(split(titles).iter()) {
        frame.render_widget(Paragraph::new(*name).add_modifier(Modifier::DIM), *cell);
    }

    let shown = body.height as usize;
    *scroll = (*scroll).min(board.rows.len().saturating_sub(shown));
    for (i, row) in board.rows.iter().skip(*scroll).take(shown).enumerate() {
        let line = Rect {
            y: body.y + i as u16,
            height: 1,
            ..body
        };
        render_row(frame, row, now, &split(line));
    }
    if board.rows.is_empty() {
        frame.render_widget(Paragraph::new("no pairs yet").dark_gray(), body);
    }

    if !failing.is_empty() {
        let mut lines = vec![Line::from("Latest failures").bold()];
        for r in failing.iter().take(FAILURES_SHOWN) {
            let (outcome, sentence) = r.failure.as_ref().expect("filtered on failure");
            lines.push(Line::from(vec![
                Span::raw(format!("{}/{}  ", r.target, r.probe)),
                Span::styled(outcome.clone(), state_style(r.state)),
                Span::raw(format!("  {sentence}")),
            ]));
        }
        frame.render_widget(Paragraph::new(lines), failures);
    }

    let more = match board.rows.len().saturating_sub(*scroll + shown) {
        0 => String::new(),
        n => format!(" · {n} more below"),
    };
    frame.render_widget(
        Paragraph::new(format!("{KEYS}{more}")).add_modifier(Modifier::DIM),
        foot,
    );
}

fn render_head(frame: &mut Frame, board: &Board, area: Rect) {
    let agent = match board.agent.as_str() {
        "" => String::new(),
        a => format!("agent {a} · "),
    };
    let pairs = match board.rows.len() {
        1 => "1 pair: ".to_string(),
        n => format!("{n} pairs: "),
    };
    let mut counts = vec![Span::raw(pairs)];
    for (i, (state, n)) in board.counts().into_iter().enumerate() {
        if i > 0 {
            counts.push(Span::raw(" · "));
        }
        let style = match n {
            0 => Style::new(),
            _ => state_style(state),
        };
        counts.push(Span::styled(format!("{n} {}", state.as_str()), style));
    }
    if let Some(t) = board.generated_at {
        let t = t.round(jiff::Unit::Second).unwrap_or(t);
        counts.push(Span::raw(format!(" · as of {t}")));
    }
    let lines = vec![
        Line::from(vec![
            Span::raw("llm-canary watch").bold(),
            Span::raw(format!(" · {agent}{}", board.source)),
        ]),
        Line::from(counts),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

fn render_row(frame: &mut Frame, row: &Row, now: Timestamp, cells: &[Rect]) {
    let text = |frame: &mut Frame, i: usize, s: String, style: Style| {
        frame.render_widget(Paragraph::new(s).style(style), cells[i]);
    };
    text(frame, 0, row.target.clone(), Style::new());
    text(frame, 1, row.probe.clone(), Style::new());
    text(frame, 2, row.state.as_str().into(), state_style(row.state));
    let outcome_style = match row.last_outcome.as_deref() {
        Some("ok") | None => Style::new(),
        Some(_) => Style::new().fg(Color::Red),
    };
    let outcome = row.last_outcome.clone().unwrap_or_else(|| "–".into());
    text(frame, 3, outcome, outcome_style);
    let last_ttft = row.ttft_ms.last().copied().flatten();
    text(frame, 4, last_ttft.map_or("–".into(), ms), Style::new());
    // Newest at the right edge, however many runs there are yet.
    let width = cells[5].width as usize;
    let bars: Vec<Option<u64>> = row
        .ttft_ms
        .iter()
        .rev()
        .take(width)
        .map(|v| v.map(|ms| ms.round().max(1.0) as u64))
        .collect();
    frame.render_widget(
        Sparkline::default()
            .data(bars)
            .direction(RenderDirection::RightToLeft)
            .absent_value_symbol("·")
            .absent_value_style(Style::new().fg(Color::Red))
            .style(Style::new().fg(Color::Cyan)),
        cells[5],
    );
    let tps = row
        .tokens_per_second
        .map_or("–".into(), |v| format!("{v:.1} tok/s"));
    text(frame, 6, tps, Style::new());
    let last = row.last_run.map_or("never".into(), |t| ago(t, now));
    text(frame, 7, last, Style::new());
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn row(target: &str, probe: &str, state: State) -> Row {
        Row {
            target: target.into(),
            probe: probe.into(),
            state,
            last_outcome: None,
            last_run: None,
            ttft_ms: vec![],
            tokens_per_second: None,
            failure: None,
        }
    }

    fn now() -> Timestamp {
        "2025-03-10T12:00:00Z".parse().unwrap()
    }

    /// A board of every kind of pair: healthy, a content failure, a transport failure, one
    /// not run yet.
    fn board() -> Board {
        let at = |s: i64| Some(now() - jiff::SignedDuration::from_secs(s));
        let mut healthy = row("chat-7b", "capital", State::Up);
        healthy.last_outcome = Some("ok".into());
        healthy.last_run = at(12);
        healthy.ttft_ms = vec![Some(100.0), Some(200.0), None, Some(400.0), Some(800.0)];
        healthy.tokens_per_second = Some(48.25);
        let mut looping = row("chat-7b", "count-zh", State::Degraded);
        looping.last_outcome = Some("repetition".into());
        looping.last_run = at(125);
        looping.ttft_ms = vec![Some(300.0), Some(310.0)];
        looping.failure = Some((
            "repetition".into(),
            "the answer repeats: line 4 comes back 9 times".into(),
        ));
        let mut gone = row("edge-eu", "capital", State::Down);
        gone.last_outcome = Some("connect_error".into());
        gone.last_run = at(7200);
        gone.ttft_ms = vec![None, None];
        gone.failure = Some((
            "connect_error".into(),
            "connection refused (127.0.0.1:9)".into(),
        ));
        Board {
            agent: "canary-eu-1".into(),
            source: "probing itself (llm-canary.yaml)".into(),
            generated_at: Some(now()),
            rows: vec![
                healthy,
                looping,
                gone,
                row("slow", "capital", State::Pending),
            ],
            problem: None,
        }
    }

    fn draw(board: &Board, w: u16, h: u16) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut scroll = 0;
        term.draw(|f| render(f, board, now(), &mut scroll)).unwrap();
        let buf = term.backend().buffer();
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect()
    }

    fn line_with<'a>(lines: &'a [String], needle: &str) -> &'a str {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{}", lines.join("\n")))
    }

    #[test]
    fn every_pair_shows_its_state_outcome_figures_and_sparkline() {
        let lines = draw(&board(), 120, 16);
        let screen = lines.join("\n");
        assert!(lines[0].contains("agent canary-eu-1"), "{screen}");
        let counts = line_with(&lines, "4 pairs:");
        for c in ["1 up", "1 degraded", "1 down", "0 maintenance", "1 pending"] {
            assert!(counts.contains(c), "{c:?} missing: {counts}");
        }

        let up = line_with(&lines, "capital  ");
        assert!(up.starts_with("chat-7b"), "{screen}");
        assert!(up.contains(" up "), "{up}");
        assert!(up.contains("ok"), "{up}");
        assert!(up.contains("800 ms"), "the last run's TTFT: {up}");
        assert!(
            up.contains("48.2 tok/s") || up.contains("48.3 tok/s"),
            "{up}"
        );
        assert!(up.contains("12s ago"), "{up}");
        // Oldest to newest, left to right, scaled to the largest: 100, 200, (none), 400, 800.
        assert!(up.contains("▁▂·▄█"), "sparkline: {up}");

        let looping = line_with(&lines, "count-zh");
        assert!(looping.contains("degraded") && looping.contains("repetition"));
        assert!(looping.contains("2m ago"), "{looping}");
        let gone = line_with(&lines, "edge-eu");
        assert!(
            gone.contains("down") && gone.contains("connect_error"),
            "{gone}"
        );
        assert!(gone.contains("··"), "two failed runs: {gone}");
        assert!(gone.contains("2h ago"), "{gone}");
        let pending = line_with(&lines, "slow");
        assert!(pending.contains("pending") && pending.contains("never"));

        // The failures, with their sentences; the healthy pair has none.
        let title = lines.iter().position(|l| l.contains("Latest failures"));
        let title = title.unwrap_or_else(|| panic!("{screen}"));
        assert!(lines[title + 1].contains("chat-7b/count-zh  repetition  the answer repeats"));
        assert!(lines[title + 2].contains("edge-eu/capital  connect_error  connection refused"));
        // Only the two failing pairs are listed; the keys close the screen.
        assert_eq!(title + 3, 15, "{screen}");
        assert!(lines[15].contains("q / Esc / Ctrl-C quit"), "{screen}");
    }

    #[test]
    fn a_stale_board_says_why_and_rows_beyond_the_screen_are_counted() {
        let mut b = board();
        b.problem = Some("cannot read http://agent:9464/api/v1/status: connection refused".into());
        let lines = draw(&b, 100, 9);
        let screen = lines.join("\n");
        assert!(
            lines[2].contains("cannot read http://agent:9464"),
            "{screen}"
        );
        // 9 lines: head (2), problem, titles, one row, failures (title and 2), keys.
        assert!(lines[3].contains("TARGET"), "{screen}");
        assert!(lines[4].contains("chat-7b"), "{screen}");
        assert!(lines[8].contains("3 more below"), "{screen}");
    }
}
