//! A busy server's waiting room (`slots=N`): at most N requests of a scenario are served at
//! once, and the others wait in vLLM's priority order (`--scheduling-policy priority`): the
//! lowest `priority` value first (none is 0), first come first served within a value. So a test
//! can show that probes sent at `priority: lowest` wait behind user traffic, and user traffic
//! never waits behind them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// One scenario's slots and who waits for one.
#[derive(Default)]
struct Room {
    busy: usize,
    /// Waiting requests by (priority, arrival): the first is served next.
    waiting: BTreeMap<(i64, u64), oneshot::Sender<()>>,
    arrivals: u64,
}

/// Every scenario's waiting room, by its spec.
#[derive(Default)]
pub(super) struct Queues(Mutex<HashMap<String, Arc<Mutex<Room>>>>);

/// A slot held: dropping it hands the slot to the next in line.
pub(super) struct Slot {
    room: Arc<Mutex<Room>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut room = self.room.lock().expect("sim queue lock");
        // The first waiter still there takes the slot; one that went away is skipped.
        while let Some((_, next)) = room.waiting.pop_first() {
            if next.send(()).is_ok() {
                return;
            }
        }
        room.busy -= 1;
    }
}

impl Queues {
    /// Waits for one of `slots` slots of `spec` at `priority`.
    pub(super) async fn enter(&self, spec: &str, slots: usize, priority: i64) -> Slot {
        let room = self
            .0
            .lock()
            .expect("sim queue lock")
            .entry(spec.to_string())
            .or_default()
            .clone();
        let wait = {
            let mut r = room.lock().expect("sim queue lock");
            if r.busy < slots && r.waiting.is_empty() {
                r.busy += 1;
                None
            } else {
                let (tx, rx) = oneshot::channel();
                r.arrivals += 1;
                let n = r.arrivals;
                r.waiting.insert((priority, n), tx);
                Some(rx)
            }
        };
        if let Some(rx) = wait {
            // The sender is only dropped with the room, which this slot's owner keeps alive.
            let _ = rx.await;
        }
        Slot { room }
    }

    /// How many requests of `spec` wait for a slot.
    pub(super) fn waiting(&self, spec: &str) -> usize {
        let rooms = self.0.lock().expect("sim queue lock");
        rooms
            .get(spec)
            .map_or(0, |r| r.lock().expect("sim queue lock").waiting.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn lower_values_first_then_first_come_first_served() {
        let q = Arc::new(Queues::default());
        let held = q.enter("s", 1, 0).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, prio) in [
            ("probe-a", 100),
            ("user-a", 0),
            ("probe-b", 100),
            ("user-b", 0),
            ("urgent", -5),
        ] {
            let (q2, order) = (q.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = q2.enter("s", 1, prio).await;
                order.lock().unwrap().push(name);
            }));
            // Each is waiting before the next arrives.
            while q.waiting("s") < tasks.len() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(
            *order.lock().unwrap(),
            ["urgent", "user-a", "user-b", "probe-a", "probe-b"]
        );
    }

    #[tokio::test]
    async fn a_waiter_that_went_away_hands_its_turn_on() {
        let q = Queues::default();
        let held = q.enter("s", 1, 0).await;
        let gone = tokio::time::timeout(Duration::from_millis(5), q.enter("s", 1, 0)).await;
        assert!(gone.is_err());
        drop(held);
        // The slot is free again, not promised to the one that left.
        let again = tokio::time::timeout(Duration::from_secs(5), q.enter("s", 1, 0)).await;
        assert!(again.is_ok());
        assert_eq!(q.waiting("s"), 0);
    }
}
