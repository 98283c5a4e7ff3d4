//! The RPCs both sides serve: `psdb.v1alpha1.Database`'s, as PlanetScale defines them,
//! and Ferry's own `ferry.v1alpha1.Database` (ExecuteBatch). Their names, paths and kind.
//! The filter's table (codecs, early-data policy) and the shim's router both start
//! from this list, so neither can serve an RPC the other does not know.

/// psdb's path prefix.
pub const SERVICE: &str = "/psdb.v1alpha1.Database/";
/// Ferry's own service's path prefix.
pub const FERRY_SERVICE: &str = "/ferry.v1alpha1.Database/";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    CreateSession,
    Execute,
    StreamExecute,
    Prepare,
    CloseSession,
    /// Ferry's own (`ferry.v1alpha1.Database`): several statements in one request.
    ExecuteBatch,
}

/// Every method.
pub const ALL: [Method; 6] = [
    Method::CreateSession,
    Method::Execute,
    Method::StreamExecute,
    Method::Prepare,
    Method::CloseSession,
    Method::ExecuteBatch,
];

impl Method {
    /// The method name (also the filter's `x-ferry-rpc` header).
    pub const fn name(self) -> &'static str {
        match self {
            Method::CreateSession => "CreateSession",
            Method::Execute => "Execute",
            Method::StreamExecute => "StreamExecute",
            Method::Prepare => "Prepare",
            Method::CloseSession => "CloseSession",
            Method::ExecuteBatch => "ExecuteBatch",
        }
    }

    /// The `POST` path.
    pub const fn path(self) -> &'static str {
        match self {
            Method::CreateSession => "/psdb.v1alpha1.Database/CreateSession",
            Method::Execute => "/psdb.v1alpha1.Database/Execute",
            Method::StreamExecute => "/psdb.v1alpha1.Database/StreamExecute",
            Method::Prepare => "/psdb.v1alpha1.Database/Prepare",
            Method::CloseSession => "/psdb.v1alpha1.Database/CloseSession",
            Method::ExecuteBatch => "/ferry.v1alpha1.Database/ExecuteBatch",
        }
    }

    /// Server streaming (answered in Connect streaming envelopes); otherwise unary.
    pub const fn streaming(self) -> bool {
        matches!(self, Method::StreamExecute)
    }

    /// The method at `path` (exactly; no query string).
    pub fn from_path(path: &str) -> Option<Method> {
        ALL.into_iter().find(|m| m.path() == path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_the_service_and_the_name() {
        for m in ALL {
            let service = match m {
                Method::ExecuteBatch => FERRY_SERVICE,
                _ => SERVICE,
            };
            assert_eq!(m.path(), format!("{service}{}", m.name()));
            assert_eq!(Method::from_path(m.path()), Some(m));
        }
        assert_eq!(Method::from_path("/psdb.v1alpha1.Database/execute"), None);
        assert_eq!(Method::from_path("/psdb.v1alpha1.Database/"), None);
    }
}
