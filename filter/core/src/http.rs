//! The HTTP pieces the filter's logic produces and the host layer applies: whole local
//! replies and header edits. Plain data, so the logic is testable without a host.

/// A header name and value. Names are lowercase (HTTP/2 and Envoy's header maps).
pub type Header = (&'static str, String);

/// A complete answer the filter sends itself (Envoy `sendLocalReply`), never forwarded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
}

impl Reply {
    /// The value of header `name`, for tests and logs.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Changes to a header map: `set` replaces (or adds), `remove` deletes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderEdits {
    pub set: Vec<Header>,
    pub remove: Vec<&'static str>,
}

impl HeaderEdits {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }

    /// The value `name` is set to, for tests and logs.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.set
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}
