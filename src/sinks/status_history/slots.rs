//! The fixed-size pieces a pair's history is made of: figures on a 16-bit log scale, run
//! counts, rings of consecutive slots and uniform samples.

use serde::{Deserialize, Serialize};

use super::run::Run;

/// A positive figure on a log scale in 16 bits (0 = none): 0.03% steps from `MIN` to `MAX`,
/// far finer than any figure is shown.
pub(super) struct LogScale;

impl LogScale {
    const MIN: f64 = 1e-3;
    const MAX: f64 = 1e7;

    pub(super) fn encode(v: Option<f64>) -> u16 {
        match v {
            Some(v) if v.is_finite() && v > 0.0 => {
                let v = v.clamp(Self::MIN, Self::MAX);
                let x = (v / Self::MIN).ln() / (Self::MAX / Self::MIN).ln();
                1 + (x * 65534.0).round() as u16
            }
            _ => 0,
        }
    }

    pub(super) fn decode(c: u16) -> Option<f64> {
        (c > 0).then(|| Self::MIN * (Self::MAX / Self::MIN).powf(f64::from(c - 1) / 65534.0))
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) runs: u16,
    pub(super) failed: u16,
    pub(super) maintenance: u16,
}

impl Counts {
    pub(super) fn add(&mut self, run: &Run) {
        if run.maintenance {
            self.maintenance = self.maintenance.saturating_add(1);
        } else {
            self.runs = self.runs.saturating_add(1);
            self.failed = self.failed.saturating_add(u16::from(!run.success));
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Fine {
    pub(super) counts: Counts,
    pub(super) ttft_p50: u16,
    pub(super) ttft_p95: u16,
    pub(super) tps: u16,
}

/// `N` slots of consecutive bucket numbers ending at `head`.
#[derive(Debug)]
pub(super) struct Ring<T, const N: usize> {
    pub(super) slots: [T; N],
    pub(super) head: Option<i64>,
}

impl<T: Copy + Default, const N: usize> Ring<T, N> {
    pub(super) fn new() -> Self {
        Ring {
            slots: [T::default(); N],
            head: None,
        }
    }

    pub(super) fn index(b: i64) -> usize {
        b.rem_euclid(N as i64) as usize
    }

    /// The slot of bucket `b`, moving the ring forward (and clearing what it passes) when `b`
    /// is newer than the head; `None` when `b` is older than the ring holds.
    pub(super) fn slot_mut(&mut self, b: i64) -> Option<&mut T> {
        match self.head {
            Some(h) if b < h - (N as i64 - 1) => return None,
            Some(h) if b > h => {
                for x in (h + 1).max(b - N as i64 + 1)..=b {
                    self.slots[Self::index(x)] = T::default();
                }
                self.head = Some(b);
            }
            Some(_) => {}
            None => {
                self.head = Some(b);
            }
        }
        Some(&mut self.slots[Self::index(b)])
    }

    /// Whether the ring holds bucket `b`.
    pub(super) fn holds(&self, b: i64) -> bool {
        self.head.is_some_and(|h| b <= h && b > h - N as i64)
    }

    /// The buckets the ring holds, oldest first, with their slots.
    pub(super) fn held(&self) -> impl Iterator<Item = (i64, T)> + '_ {
        let span = self.head.map(|h| h - N as i64 + 1..=h);
        span.into_iter().flatten().map(|b| (b, self.get(b)))
    }

    /// A ring whose head is `head`, holding `slots` (those it would not hold are left out).
    pub(super) fn restored(head: Option<i64>, slots: impl IntoIterator<Item = (i64, T)>) -> Self {
        let mut ring = Ring {
            slots: [T::default(); N],
            head,
        };
        for (b, slot) in slots {
            if ring.holds(b) {
                ring.slots[Self::index(b)] = slot;
            }
        }
        ring
    }

    /// Bucket `b`'s slot, empty when the ring does not hold it.
    pub(super) fn get(&self, b: i64) -> T {
        match self.head {
            Some(h) if b <= h && b > h - N as i64 => self.slots[Self::index(b)],
            _ => T::default(),
        }
    }
}

/// A uniform sample of at most `N` figures (all of them while there are no more than `N`), kept
/// on the log scale: it orders them as their values do, in half the bytes.
#[derive(Debug, Default)]
pub(super) struct Reservoir<const N: usize> {
    pub(super) seen: u32,
    pub(super) v: Vec<u16>,
}

impl<const N: usize> Reservoir<N> {
    pub(super) fn add(&mut self, x: f64) {
        let x = LogScale::encode(Some(x));
        self.seen += 1;
        if self.v.len() < N {
            self.v.push(x);
        } else {
            // Reservoir sampling keeps a uniform sample of every figure seen.
            let i = fastrand::usize(..self.seen as usize);
            if i < N {
                self.v[i] = x;
            }
        }
    }

    /// Nearest-rank quantiles of the sample, encoded.
    pub(super) fn quantiles<const K: usize>(&self, qs: [f64; K]) -> [u16; K] {
        let mut v = self.v.clone();
        v.sort_unstable();
        qs.map(|q| {
            let rank = ((q * v.len() as f64).ceil() as usize).max(1);
            v.get(rank - 1).copied().unwrap_or(0)
        })
    }
}

/// Runs, failures and maintenance runs over a span.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Tally {
    pub runs: u32,
    pub failed: u32,
    pub maintenance: u32,
}

impl From<Counts> for Tally {
    fn from(c: Counts) -> Tally {
        Tally {
            runs: u32::from(c.runs),
            failed: u32::from(c.failed),
            maintenance: u32::from(c.maintenance),
        }
    }
}

/// A decoded figure to a tenth (of a millisecond, of a token per second): finer than shown.
pub(super) fn tenth(c: u16) -> Option<f32> {
    LogScale::decode(c).map(|v| ((v * 10.0).round() / 10.0) as f32)
}
