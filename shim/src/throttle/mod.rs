//! Password guessing, throttled before MySQL (docs/guides/password-guessing.md).
//!
//! Failed logins are counted per client address and per user name (both: a botnet on
//! one user, or one address across many users, is checked either way), as scores that
//! decay by half every `FERRY_AUTH_THROTTLE_HALF_LIFE_SECS` (score.rs). Past a
//! threshold, a login of a credential the shim has not admitted yet is answered
//! `resource_exhausted` (HTTP 429) with `Retry-After`, without asking MySQL; an attempt
//! refused so adds to the score, so hammering lengthens the wait, and it decays.
//!
//! - A credential already admitted (its pool is open: it logged in before) never meets
//!   the throttle: a user with the right password is not slowed by guesses at their name.
//! - While a user name is throttled, an address that logged in as that user before (in
//!   the last `FERRY_AUTH_TRUSTED_SECS`) still may; others wait. Behind one shared NAT
//!   address, a guesser throttles every new login from that address.
//! - A password that just failed for a user is answered `unauthenticated` again for
//!   `FERRY_AUTH_NEGATIVE_CACHE_SECS` without MySQL (never a success: a changed password
//!   works at once, unless it is the very one that failed within the window).
//!
//! The client's address is `x-ferry-client-addr`, which Envoy sets (replacing a
//! client's own value); without it only the per-user score applies. Everything is in
//! this process's memory, bounded (limiter.rs); each shim counts its own.
pub mod limiter;
mod score;
pub mod settings;
