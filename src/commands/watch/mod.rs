//! `watch`: a live terminal view of every (probe, target) pair, on ratatui. Either it runs the
//! probes itself on their schedules (the daemon's own scheduling, runs and status judging,
//! with none of its outputs: [`crate::daemon::Quiet`]), or, with `--from`, it follows a running
//! daemon's `/api/v1/status`, read every [`POLL`]. The terminal is restored on every way out:
//! a key, SIGTERM, an error (the guard's drop) and a panic (ratatui's hook).

mod board;
mod view;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use crate::cli::WatchArgs;
use crate::daemon::{status, Quiet};
use board::{Board, Document};

/// How often `--from` reads the daemon's `/api/v1/status`. Probes fire every minute or so, and
/// the view re-judges nothing, so a few seconds keeps it as fresh as the daemon at the cost of
/// one JSON document per poll to a daemon that may have a quarter of a core.
pub(crate) const POLL: Duration = Duration::from_secs(5);

/// Rows one PgUp / PgDn moves.
const PAGE: usize = 10;

pub(super) async fn watch(args: &WatchArgs) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "watch draws a live view and its output is not a terminal: run it in one (for figures in a pipe or a file, use `once --format json` or a daemon's /api/v1/status)"
        );
    }
    // Before the terminal is taken, so that a bad config or URL prints as any error does.
    let (mut source, mut board) = match &args.from {
        Some(url) => {
            let (url, shown) = status_url(url)?;
            let source = Source::Daemon(follow(url));
            (source, Board::new(format!("following {shown}")))
        }
        None => {
            let cfg = crate::config::load(&args.config)?;
            let shown = format!("probing itself with {}", cfg.path.display());
            (Source::Local(Quiet::start(cfg).await?), Board::new(shown))
        }
    };
    let mut screen = Screen::take()?;
    let mut keys = keys();
    let stop = crate::util::terminate_signal();
    tokio::pin!(stop);
    // The "last run" column ages, and a run that ends during a draw is caught here.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut scroll = 0usize;
    loop {
        if let Source::Local(quiet) = &source {
            board.update(local_status(quiet));
        }
        screen
            .0
            .draw(|f| view::render(f, &board, Timestamp::now(), &mut scroll))
            .context("cannot draw on the terminal")?;
        tokio::select! {
            key = keys.recv() => match key.map(action) {
                None | Some(Action::Quit) => break,
                Some(Action::Scroll(d)) => scroll = scroll.saturating_add_signed(d),
                Some(Action::Redraw) => {}
            },
            answer = next_answer(&mut source) => {
                if let Some(answer) = answer {
                    apply(&mut board, answer);
                }
            }
            _ = tick.tick() => {}
            _ = &mut stop => break,
        }
    }
    drop(screen);
    if let Source::Local(quiet) = source {
        quiet.stop();
    }
    Ok(ExitCode::SUCCESS)
}

enum Source {
    Local(Quiet),
    /// The daemon's answers, one per poll.
    Daemon(mpsc::Receiver<Result<Document, String>>),
}

/// The next thing worth a redraw: a run finished here, or the daemon answered.
async fn next_answer(source: &mut Source) -> Option<Result<Document, String>> {
    match source {
        Source::Local(quiet) => {
            quiet.run_finished().await;
            None
        }
        Source::Daemon(answers) => match answers.recv().await {
            Some(a) => Some(a),
            None => std::future::pending().await,
        },
    }
}

/// The status page's judgement of this process's own runs, as of now.
fn local_status(quiet: &Quiet) -> Document {
    let now = Timestamp::now();
    let agent = quiet.agent();
    Document {
        agent: status::head(agent, now).agent,
        generated_at: now,
        targets: status::targets(agent, now).collect(),
    }
}

fn apply(board: &mut Board, answer: Result<Document, String>) {
    match answer {
        Ok(doc) => board.update(doc),
        Err(why) => {
            let since = match board.generated_at {
                Some(t) => {
                    let t = t.round(jiff::Unit::Second).unwrap_or(t);
                    format!("; the figures are from {t}")
                }
                None => String::new(),
            };
            let every = crate::util::human_duration(POLL);
            board.problem = Some(format!("{why}{since}; trying again every {every}"));
        }
    }
}

/// `--from`'s base URL → its `/api/v1/status`, and the URL as the header may show it (without
/// a user name or password).
fn status_url(base: &str) -> anyhow::Result<(reqwest::Url, String)> {
    let url = reqwest::Url::parse(base)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .and_then(|u| u.join("/api/v1/status").ok())
        .with_context(|| format!("--from {base:?} is not a daemon's URL like http://agent:9464"))?;
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    Ok((url, shown.to_string()))
}

/// Reads the daemon's status every `POLL`, first at once; each answer (or why there was
/// none) goes to the view.
fn follow(url: reqwest::Url) -> mpsc::Receiver<Result<Document, String>> {
    let (tx, rx) = mpsc::channel(1);
    let http = crate::sinks::outbound::default_client();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let answer = read_status(&http, &url).await;
            if tx.send(answer).await.is_err() {
                return;
            }
        }
    });
    rx
}

async fn read_status(http: &reqwest::Client, url: &reqwest::Url) -> Result<Document, String> {
    let cannot = |why: String| format!("cannot read the daemon's status: {why}");
    let fail = |e: reqwest::Error| {
        cannot(match e.is_connect() {
            true => crate::util::connect_failure(&e),
            false => crate::util::error_chain(&e.without_url()),
        })
    };
    let resp = http
        .get(url.clone())
        .timeout(POLL)
        .send()
        .await
        .map_err(fail)?;
    if !resp.status().is_success() {
        return Err(cannot(format!("HTTP {}", resp.status())));
    }
    let body = resp.bytes().await.map_err(fail)?;
    serde_json::from_slice(&body).map_err(|e| cannot(format!("not its JSON ({e})")))
}

/// The terminal, in raw mode on the alternate screen while this lives.
struct Screen(ratatui::DefaultTerminal);

impl Screen {
    fn take() -> anyhow::Result<Screen> {
        // Also installs a panic hook that restores the terminal before the panic is printed.
        match ratatui::try_init() {
            Ok(t) => Ok(Screen(t)),
            Err(e) => {
                ratatui::restore();
                Err(anyhow::anyhow!("cannot take over the terminal: {e}"))
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

enum Action {
    Quit,
    Scroll(isize),
    Redraw,
}

fn action(ev: Event) -> Action {
    let Event::Key(k) = ev else {
        return Action::Redraw;
    };
    if k.kind != KeyEventKind::Press {
        return Action::Redraw;
    }
    match k.code {
        KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => Action::Quit,
        // Raw mode turns Ctrl-C into a key, not a signal.
        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => Action::Scroll(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Scroll(1),
        KeyCode::PageUp => Action::Scroll(-(PAGE as isize)),
        KeyCode::PageDown => Action::Scroll(PAGE as isize),
        KeyCode::Home => Action::Scroll(isize::MIN),
        KeyCode::End => Action::Scroll(isize::MAX),
        _ => Action::Redraw,
    }
}

/// The terminal's events, read on a thread of their own (crossterm's reads block); the thread
/// ends once the view is gone or the terminal cannot be read.
fn keys() -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || loop {
        match event::poll(Duration::from_millis(200)) {
            Ok(true) => {
                let Ok(ev) = event::read() else { return };
                if tx.send(ev).is_err() {
                    return;
                }
            }
            Ok(false) if !tx.is_closed() => {}
            _ => return,
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_url_has_no_credentials_and_bad_ones_are_refused() {
        let (url, shown) = status_url("http://ops:hunter2@agent:9464/").unwrap();
        assert_eq!(url.as_str(), "http://ops:hunter2@agent:9464/api/v1/status");
        assert_eq!(shown, "http://agent:9464/api/v1/status");
        for bad in ["agent:9464", "ftp://agent/", "not a url"] {
            let e = status_url(bad).unwrap_err().to_string();
            assert!(e.contains("is not a daemon's URL"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_failed_poll_keeps_the_figures_and_says_since_when() {
        let mut board = Board::new("following x".into());
        apply(
            &mut board,
            Err("cannot read the daemon's status: connection refused".into()),
        );
        let p = board.problem.clone().unwrap();
        assert!(
            p.starts_with(
                "cannot read the daemon's status: connection refused; trying again every 5s"
            ),
            "{p}"
        );
        board.generated_at = Some("2025-03-10T12:00:00Z".parse().unwrap());
        apply(
            &mut board,
            Err("cannot read the daemon's status: HTTP 503".into()),
        );
        let p = board.problem.clone().unwrap();
        assert!(
            p.contains("HTTP 503; the figures are from 2025-03-10T12:00:00Z"),
            "{p}"
        );
    }

    #[test]
    fn q_escape_and_ctrl_c_quit() {
        use ratatui::crossterm::event::KeyEvent;
        let key = |c, m| action(Event::Key(KeyEvent::new(c, m)));
        assert!(matches!(
            key(KeyCode::Char('q'), KeyModifiers::NONE),
            Action::Quit
        ));
        assert!(matches!(
            key(KeyCode::Esc, KeyModifiers::NONE),
            Action::Quit
        ));
        assert!(matches!(
            key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Action::Quit
        ));
        assert!(matches!(
            key(KeyCode::Char('c'), KeyModifiers::NONE),
            Action::Redraw
        ));
        assert!(matches!(
            key(KeyCode::Down, KeyModifiers::NONE),
            Action::Scroll(1)
        ));
    }
}
