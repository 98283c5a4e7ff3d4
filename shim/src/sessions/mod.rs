//! The session a client carries: its seal, the connection pinned to it, its
//! GTID for read-your-writes, and the workload it asked for.
pub mod counters;
pub mod gtid;
pub mod olap;
pub mod pins;
pub mod seal;
pub mod state;
