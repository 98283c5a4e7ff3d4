//! A failure score that halves every half-life: each failure adds 1.
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub struct Score {
    value: f64,
    at: Instant,
}

impl Score {
    pub fn new(now: Instant) -> Score {
        Score {
            value: 0.0,
            at: now,
        }
    }

    /// The score now.
    pub fn at(&self, now: Instant, half_life: Duration) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.value * 0.5f64.powf(elapsed / half_life.as_secs_f64().max(0.001))
    }

    /// One more failure at `now`.
    pub fn add(&mut self, now: Instant, half_life: Duration) {
        self.value = self.at(now, half_life) + 1.0;
        self.at = now;
    }

    /// How long until the score is below `threshold` (zero if it is already).
    pub fn wait_below(&self, now: Instant, half_life: Duration, threshold: f64) -> Duration {
        let v = self.at(now, half_life);
        if v < threshold || threshold <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(half_life.as_secs_f64() * (v / threshold).log2())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_halves_every_half_life() {
        let t0 = Instant::now();
        let h = Duration::from_secs(10);
        let mut s = Score::new(t0);
        for _ in 0..8 {
            s.add(t0, h);
        }
        assert!((s.at(t0, h) - 8.0).abs() < 1e-9);
        assert!((s.at(t0 + h, h) - 4.0).abs() < 1e-9);
        assert!((s.at(t0 + 3 * h, h) - 1.0).abs() < 1e-9);
        // From 8 to below 4: one half-life (and a bit).
        let w = s.wait_below(t0, h, 4.0);
        assert!((w.as_secs_f64() - 10.0).abs() < 1e-6, "{w:?}");
        assert_eq!(s.wait_below(t0 + 2 * h, h, 4.0), Duration::ZERO);
        // A failure later adds to what is left.
        s.add(t0 + h, h);
        assert!((s.at(t0 + h, h) - 5.0).abs() < 1e-9);
    }
}
