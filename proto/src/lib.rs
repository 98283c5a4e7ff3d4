//! Wire types of the psdb HTTP API: `psdb.v1alpha1` and the vitess messages it
//! reuses. Generated with prost; serde impls follow protojson (pbjson), and
//! unknown JSON fields are ignored on input.

#![allow(clippy::all)]

pub mod ferry {
    pub mod v1alpha1 {
        include!(concat!(env!("OUT_DIR"), "/ferry.v1alpha1.rs"));
        include!(concat!(env!("OUT_DIR"), "/ferry.v1alpha1.serde.rs"));
    }
}

pub mod psdb {
    pub mod v1alpha1 {
        include!(concat!(env!("OUT_DIR"), "/psdb.v1alpha1.rs"));
        include!(concat!(env!("OUT_DIR"), "/psdb.v1alpha1.serde.rs"));
    }
}

pub mod vitess {
    pub mod query {
        include!(concat!(env!("OUT_DIR"), "/vitess.query.rs"));
        include!(concat!(env!("OUT_DIR"), "/vitess.query.serde.rs"));
    }
    pub mod topodata {
        include!(concat!(env!("OUT_DIR"), "/vitess.topodata.rs"));
        include!(concat!(env!("OUT_DIR"), "/vitess.topodata.serde.rs"));
    }
    pub mod vtgate {
        include!(concat!(env!("OUT_DIR"), "/vitess.vtgate.rs"));
        include!(concat!(env!("OUT_DIR"), "/vitess.vtgate.serde.rs"));
    }
    pub mod vtrpc {
        include!(concat!(env!("OUT_DIR"), "/vitess.vtrpc.rs"));
        include!(concat!(env!("OUT_DIR"), "/vitess.vtrpc.serde.rs"));
    }
}
