//! The session a client carries: its seal, the connection pinned to it, its
//! GTID for read-your-writes, the workload and query timeout it asked for, its
//! variables and settings, and the connections kept with them on (the settings pool).
pub mod counters;
mod gateway_set;
pub mod gtid;
pub mod olap;
pub mod pins;
pub mod query_timeout;
pub mod seal;
pub mod settings_pool;
pub mod state;
