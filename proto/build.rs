// Compiles the .proto files with protox (pure Rust, no system protoc), then
// generates prost types and pbjson serde impls (protojson: camelCase, int64 as
// strings, enums as names, bytes as base64).
use std::{env, path::PathBuf};

const FILES: &[&str] = &[
    "ferry/v1alpha1/batch.proto",
    "psdb/v1alpha1/database.proto",
    "vitess/query.proto",
    "vitess/topodata.proto",
    "vitess/vtgate.proto",
    "vitess/vtrpc.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    for f in FILES {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let fds = protox::compile(FILES, [&root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptor_path = out.join("descriptors.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;

    let mut config = prost_build::Config::new();
    config.file_descriptor_set_path(&descriptor_path);
    config.skip_protoc_run();
    config.compile_fds(fds)?;

    let descriptors = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptors)?
        .ignore_unknown_fields()
        .build(&[".ferry", ".psdb", ".vitess"])?;
    Ok(())
}
