//! Pinned connections: a session with an open transaction or session state
//! keeps one MySQL connection until the transaction ends (and no state is
//! left), `CloseSession`, or it idles out.
//!
//! Requests of one session are serialized on its pin in arrival order (a FIFO
//! lock); at most `queue_max` may wait, then `resource_exhausted`. A pin that
//! idles out, whose connection dies, or that this process never held (the shim
//! restarted) is *lost*: its transaction was rolled back (the connection is
//! reset or closed), and the session's next request fails with `aborted`
//! "transaction lost, rolled back: <why>" — it never runs on a fresh connection
//! as if nothing happened. Lost pins are remembered (a tombstone) so the reason
//! can be given; a pin that ended normally is remembered too, so a session sent
//! back out of order (concurrent requests) is not mistaken for a lost one.
use crate::sessions::seal::SessionId;
use crate::settings::{Setting, Vars};
use mysql_async::Conn;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a pin holds while no request uses it.
pub struct PinState {
    /// `None` once lost or released.
    pub conn: Option<Conn>,
    /// Session state that only `CloseSession` ends (SET @v, USE, temporary tables...).
    pub sticky: bool,
    /// A transaction is open (from the server status flags).
    pub in_transaction: bool,
    pub lost: Option<String>,
}

impl PinState {
    /// Takes the connection out of the pin and lets it go (`retire`). `unresettable`:
    /// COM_RESET_CONNECTION would not clear what it may carry (Vitess: mysql/pool.rs
    /// `Pools::is_vitess`), so it is closed.
    pub fn release(&mut self, unresettable: bool) {
        if let Some(conn) = self.conn.take() {
            retire(conn, self.sticky || unresettable);
        }
    }
}

pub struct Pin {
    /// The pool this connection came from (the credential's), for the pin cap.
    pub pool_key: String,
    /// Shared so a request can hold it owned (a stream runs in its own task).
    pub state: Arc<tokio::sync::Mutex<PinState>>,
    waiting: AtomicUsize,
    last_used: Mutex<Instant>,
}

/// How a pin ended, remembered for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    Released,
    Lost(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum PinError {
    QueueFull(usize),
    TooManyPins(usize),
}

pub struct Pins {
    live: Mutex<HashMap<SessionId, Arc<Pin>>>,
    ended: Mutex<HashMap<SessionId, (Instant, Ended)>>,
    /// Idle limit of a pin with an open transaction.
    pub txn_idle: Duration,
    /// Idle limit of a pin with session state only.
    pub state_idle: Duration,
    queue_max: usize,
    /// Pins per credential pool, so pins cannot starve unpinned traffic.
    max_per_pool: usize,
}

/// How long an ended pin is remembered.
const REMEMBER: Duration = Duration::from_secs(3600);

impl Pins {
    pub fn new(cfg: &PinSettings) -> Pins {
        Pins {
            live: Mutex::new(HashMap::new()),
            ended: Mutex::new(HashMap::new()),
            txn_idle: cfg.txn_idle,
            state_idle: cfg.state_idle,
            queue_max: cfg.queue_max,
            max_per_pool: cfg.max_pinned,
        }
    }

    pub fn get(&self, id: &SessionId) -> Option<Arc<Pin>> {
        lock(&self.live).get(id).cloned()
    }

    /// How an absent pin ended, if this process remembers.
    pub fn ended(&self, id: &SessionId) -> Option<Ended> {
        lock(&self.ended).get(id).map(|(_, e)| e.clone())
    }

    /// May one more pin be made for this pool?
    pub fn admit(&self, pool_key: &str) -> Result<(), PinError> {
        let n = lock(&self.live)
            .values()
            .filter(|p| p.pool_key == pool_key)
            .count();
        if n >= self.max_per_pool {
            return Err(PinError::TooManyPins(self.max_per_pool));
        }
        Ok(())
    }

    pub fn insert(&self, id: SessionId, pool_key: String, state: PinState) -> Arc<Pin> {
        let pin = Arc::new(Pin {
            pool_key,
            state: Arc::new(tokio::sync::Mutex::new(state)),
            waiting: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        lock(&self.live).insert(id, pin.clone());
        pin
    }

    /// Takes the pin out of service, remembering how it ended.
    pub fn end(&self, id: &SessionId, how: Ended) {
        lock(&self.live).remove(id);
        lock(&self.ended).insert(*id, (Instant::now(), how));
    }

    /// Waits for the pin in arrival order, or refuses when too many wait.
    pub async fn enter(
        &self,
        pin: &Pin,
    ) -> Result<tokio::sync::OwnedMutexGuard<PinState>, PinError> {
        // Counted out on every way out, also when the wait is abandoned (a
        // deadline, a client that went away).
        let queued = Queued(&pin.waiting);
        if queued.0.fetch_add(1, Ordering::SeqCst) >= self.queue_max {
            return Err(PinError::QueueFull(self.queue_max));
        }
        let guard = pin.state.clone().lock_owned().await;
        drop(queued);
        *lock(&pin.last_used) = Instant::now();
        Ok(guard)
    }

    /// Ends pins idle past their limit (their connections go back to the pool
    /// armed for reset, which rolls the transaction back); call periodically.
    /// Ends the pins idle past their limit; `unresettable`: as for [`PinState::release`].
    pub fn sweep(&self, unresettable: bool) {
        let candidates: Vec<(SessionId, Arc<Pin>)> = lock(&self.live)
            .iter()
            .map(|(id, p)| (*id, p.clone()))
            .collect();
        for (id, pin) in candidates {
            let idle = lock(&pin.last_used).elapsed();
            // In use or queued for: not idle.
            let Ok(mut state) = pin.state.try_lock() else {
                continue;
            };
            let limit = if state.in_transaction {
                self.txn_idle
            } else {
                self.state_idle
            };
            if idle <= limit {
                continue;
            }
            let why = if state.in_transaction {
                format!(
                    "the transaction was idle for more than {}s (FERRY_TXN_IDLE_SECS)",
                    limit.as_secs()
                )
            } else {
                format!(
                    "the session state was idle for more than {}s (FERRY_SESSION_STATE_IDLE_SECS)",
                    limit.as_secs()
                )
            };
            state.release(unresettable);
            state.lost = Some(why.clone());
            drop(state);
            crate::log!(
                crate::telemetry::log::Level::Info,
                "pin lost",
                session = crate::sessions::seal::hex(&id),
                reason = why
            );
            self.end(&id, Ended::Lost(why));
        }
        lock(&self.ended).retain(|_, (at, _)| at.elapsed() < REMEMBER);
    }

    pub fn len(&self) -> usize {
        lock(&self.live).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One request waiting for a pin.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection leaving a pin or a statement. Unless `close`, it goes back to the
/// pool, armed for COM_RESET_CONNECTION (which rolls back a transaction). With
/// `close` (session state the reset does not undo: `USE` keeps its database on
/// MySQL, and on Vitess the reset keeps variables and settings) it is closed: a
/// pooled connection must come back as it left.
pub fn retire(mut conn: Conn, close: bool) {
    if close {
        tokio::spawn(async move {
            let _ = conn.disconnect().await;
        });
    } else {
        conn.reset_connection(true);
        drop(conn);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long pins live, and how many there may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinSettings {
    pub txn_idle: Duration,
    pub state_idle: Duration,
    pub queue_max: usize,
    pub max_pinned: usize,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_TXN_IDLE_SECS",
        default: "20",
        about: "an open transaction idle this long is rolled back, as PlanetScale does (its session then gets `aborted`)",
    },
    Setting {
        name: "FERRY_SESSION_STATE_IDLE_SECS",
        default: "60",
        about: "the same for a pin holding session state only",
    },
    Setting {
        name: "FERRY_SESSION_QUEUE_MAX",
        default: "64",
        about: "requests of one session that may wait for it (they run one at a time)",
    },
    Setting {
        name: "FERRY_POOL_MAX_PINNED",
        default: "",
        about: "sessions per user holding a connection (unset: 3/4 of `FERRY_POOL_MAX`, rounded down, so unpinned statements always have connections left; 0 refuses transactions)",
    },
];

impl PinSettings {
    /// `pool_max`: the pools' `FERRY_POOL_MAX`, which bounds the pins.
    pub fn from_vars(vars: &Vars<'_>, pool_max: usize) -> Result<Self, String> {
        let max_pinned = match vars.set("FERRY_POOL_MAX_PINNED") {
            None => pool_max * 3 / 4,
            Some(_) => vars.size("FERRY_POOL_MAX_PINNED")?,
        };
        Ok(PinSettings {
            txn_idle: vars.secs("FERRY_TXN_IDLE_SECS")?,
            state_idle: vars.secs("FERRY_SESSION_STATE_IDLE_SECS")?,
            queue_max: vars.size("FERRY_SESSION_QUEUE_MAX")?.max(1),
            max_pinned: max_pinned.min(pool_max),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> PinState {
        PinState {
            conn: None,
            sticky: false,
            in_transaction: true,
            lost: None,
        }
    }

    #[tokio::test]
    async fn pins_are_capped_per_pool() {
        let pins = Pins::new(&PinSettings {
            txn_idle: Duration::from_secs(20),
            state_idle: Duration::from_secs(300),
            queue_max: 4,
            max_pinned: 2,
        });
        pins.insert([1; 16], "a".into(), state());
        assert_eq!(pins.admit("a"), Ok(()));
        pins.insert([2; 16], "a".into(), state());
        assert_eq!(pins.admit("a"), Err(PinError::TooManyPins(2)));
        assert_eq!(pins.admit("b"), Ok(()));
        pins.end(&[1; 16], Ended::Released);
        assert_eq!(pins.admit("a"), Ok(()));
        assert_eq!(pins.ended(&[1; 16]), Some(Ended::Released));
        assert!(pins.get(&[1; 16]).is_none());
    }

    #[tokio::test]
    async fn requests_queue_in_order_up_to_the_bound() {
        let pins = Arc::new(Pins::new(&PinSettings {
            txn_idle: Duration::from_secs(20),
            state_idle: Duration::from_secs(300),
            queue_max: 2,
            max_pinned: 8,
        }));
        let pin = pins.insert([1; 16], "a".into(), state());
        let held = pins.enter(&pin).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..2 {
            let (pins, pin, order) = (pins.clone(), pin.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _g = pins.enter(&pin).await.unwrap();
                order.lock().unwrap().push(i);
            }));
            // Let task i queue before the next one.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            pins.enter(&pin).await.err(),
            Some(PinError::QueueFull(2)),
            "a third waiter is one too many"
        );
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1], "arrival order");
    }

    #[tokio::test]
    async fn an_abandoned_wait_leaves_the_queue() {
        let pins = Pins::new(&PinSettings {
            txn_idle: Duration::from_secs(20),
            state_idle: Duration::from_secs(300),
            queue_max: 1,
            max_pinned: 8,
        });
        let pin = pins.insert([1; 16], "a".into(), state());
        let held = pins.enter(&pin).await.unwrap();
        // A deadline gives up on the wait.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), pins.enter(&pin)).await;
        assert!(gave_up.is_err());
        drop(held);
        assert!(pins.enter(&pin).await.is_ok(), "the queue is empty again");
    }

    #[tokio::test]
    async fn idle_pins_are_lost_with_a_reason() {
        let pins = Pins::new(&PinSettings {
            txn_idle: Duration::from_millis(10),
            state_idle: Duration::from_secs(300),
            queue_max: 4,
            max_pinned: 8,
        });
        pins.insert([1; 16], "a".into(), state());
        let mut sticky = state();
        sticky.in_transaction = false;
        sticky.sticky = true;
        pins.insert([2; 16], "a".into(), sticky);
        tokio::time::sleep(Duration::from_millis(30)).await;
        pins.sweep(false);
        assert!(pins.get(&[1; 16]).is_none());
        assert!(
            matches!(pins.ended(&[1; 16]), Some(Ended::Lost(why)) if why.contains("idle for more than"))
        );
        assert!(
            pins.get(&[2; 16]).is_some(),
            "session state has its own, longer limit"
        );
    }
}
