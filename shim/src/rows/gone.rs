//! The one way a sink fails.

/// The client went away (the response body was dropped): stop reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;
