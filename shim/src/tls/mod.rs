//! TLS of the shim's own listener, and the PEM files it and MySQL's TLS read.
pub mod listen;
pub mod pem_files;
