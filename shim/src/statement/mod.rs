//! One statement, from its request to its answer: start (the session verified,
//! a connection from the pool or the session's pin), run (the statement, its
//! rows into a sink), stop (a deadline, a client gone), respond (the answer and
//! the session it leaves). Where rows go is the caller's choice (`Sink`:
//! rows/sink.rs): kept for one answer (Execute) or sent on in bounded chunks
//! (StreamExecute); everything else — pins, status flags, the answer's session
//! — is the same for both.
mod respond;
mod run;
mod session_out;
mod source;
mod start;
mod stop;

pub use run::run;
pub use session_out::{fresh_vitess, SessionOut};
pub use start::{start, start_opening, start_without_statement, Opening, Start};
pub use stop::Stop;
