//! The scheduling loops, one per (probe, target) pair of the running config, each running its
//! pair's confirmation runs between scheduled ones ([`super::confirm`]): [`Schedules`] starts
//! a generation per config (a reload ends the old one's loops, whose runs in flight still
//! finish and are recorded), then drains (no new runs) and stops (the background loops end
//! too), through the phase every loop watches ([`super::phase`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::confirm;
use super::firing::{Occasion, Runs};
use super::phase::{Phase, Stop};
use crate::config::{Probe, Target};
use crate::runner::Pair;

/// The running generation of scheduling loops, and the stop signal.
pub(super) struct Schedules {
    phase: watch::Sender<Phase>,
    generation: u64,
}

impl Schedules {
    /// No loops yet: [`Schedules::start`] starts the first generation.
    pub(super) fn new() -> Schedules {
        Schedules {
            phase: watch::channel(Phase::Serving(0)).0,
            generation: 0,
        }
    }

    pub(super) fn stop_signal(&self) -> Stop {
        Stop::new(self.phase.subscribe())
    }

    /// Ends the running generation's loops and starts one for each of `pairs`.
    pub(super) fn start(&mut self, runs: &Arc<Runs>, pairs: Vec<Pair>) {
        self.generation += 1;
        self.phase.send_replace(Phase::Serving(self.generation));
        let metrics = runs.shared().metrics();
        for (probe, target) in pairs {
            metrics.init_pair(&probe, &target);
            let stop = self.phase.subscribe();
            tokio::spawn(pair_loop(
                runs.clone(),
                probe,
                target,
                stop,
                self.generation,
            ));
        }
    }

    /// No new runs from here on; the background loops go on.
    pub(super) fn drain(&self) {
        self.phase.send_replace(Phase::Draining);
    }

    /// Ends every loop.
    pub(super) fn stop(&self) {
        self.phase.send_replace(Phase::Stopped);
    }
}

/// Fires one pair on its schedule until its generation ends, and confirms its failed runs
/// between scheduled ones.
async fn pair_loop(
    runs: Arc<Runs>,
    probe: Arc<Probe>,
    target: Arc<Target>,
    mut phase: watch::Receiver<Phase>,
    gen: u64,
) {
    // Borrowed, not cloned: a parsed schedule holds about 5 KB, once per probe, not per pair.
    let Some(schedule) = probe.schedule.as_ref() else {
        return;
    };
    // The pair's stable share of the jitter: the same fire times after a restart.
    let offset = crate::schedule::pair_offset(probe.jitter, &probe.name, &target.name);
    let mut last_fire: Option<jiff::Timestamp> = None;
    let key = (probe.name.clone(), target.name.clone());
    let row = Arc::new(Mutex::new(confirm::Row::default()));
    // This loop's run in flight, which says when to confirm it, and when that is.
    let mut running: Option<tokio::task::JoinHandle<Option<Duration>>> = None;
    let mut confirm_at: Option<Instant> = None;
    loop {
        let now = jiff::Timestamp::now();
        // Never fire the same instant twice, even if the wall clock lags the timer a little.
        let from = last_fire
            .map_or(now, |l| l.max(now))
            .to_zoned(probe.timezone.clone());
        let Some(next) = schedule.next_after_offset(&from, offset) else {
            return;
        };
        let wait = Duration::try_from(next.timestamp().duration_since(now)).unwrap_or_default();
        let due = Instant::now() + wait;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(due) => break,
                _ = phase.wait_for(|p| *p != Phase::Serving(gen)) => return,
                ended = async { running.as_mut().expect("enabled only while running").await }, if running.is_some() => {
                    running = None;
                    // One that would come after the next scheduled run is left to it.
                    confirm_at = ended
                        .ok()
                        .flatten()
                        .map(|after| Instant::now() + after)
                        .filter(|at| *at < due);
                }
                _ = tokio::time::sleep_until(confirm_at.unwrap_or(due)), if confirm_at.is_some() => {
                    confirm_at = None;
                    // Not while `/probe` runs the pair: that run is the newer word.
                    if let Some(claim) = runs.shared().claim(&key) {
                        let occasion = Occasion::Confirmation(row.clone());
                        running = Some(tokio::spawn(runs.clone().fire(probe.clone(), target.clone(), claim, occasion)));
                    }
                }
            }
        }
        last_fire = Some(next.timestamp());
        confirm_at = None;
        let Some(claim) = runs.shared().claim(&key) else {
            tracing::warn!(probe = %probe.name, target = %target.name, "previous run still in flight: skipped");
            runs.shared().metrics().skipped(&probe.name, &target);
            continue;
        };
        let occasion = Occasion::Scheduled(row.clone());
        running = Some(tokio::spawn(runs.clone().fire(
            probe.clone(),
            target.clone(),
            claim,
            occasion,
        )));
    }
}
