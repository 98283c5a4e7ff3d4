//! Bind-variable placeholders (`ferry_wire::placeholder::find`), the public half of
//! bind-variable decoding: the shim's own (shim/src/types/bind.rs) is in a private
//! module of the shim crate and cannot be reached from here. No panic, and every
//! placeholder found is a valid, in-order, non-overlapping span of the text that reads
//! as what it says: `?` numbered 1, 2, ... in order, `:name` or `::name` with a
//! vitess name.
#![no_main]

use ferry_wire::placeholder::{find, positional_name, Placeholder};
use libfuzzer_sys::fuzz_target;

fn vitess_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
}

fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data);
    let sql = sql.as_ref();
    let mut after = 0;
    let mut positional = 0;
    for f in find(sql) {
        assert!(
            f.start >= after && f.start < f.end && f.end <= sql.len(),
            "{f:?}"
        );
        after = f.end;
        let text = sql.get(f.start..f.end).expect("a span on char boundaries");
        match f.placeholder {
            Placeholder::Positional(n) => {
                positional += 1;
                assert_eq!(n, positional);
                assert_eq!(text, "?");
                assert_eq!(f.placeholder.name(), positional_name(n));
            }
            Placeholder::Value(name) => {
                assert!(vitess_name(name), "{name:?}");
                assert_eq!(text.strip_prefix(':'), Some(name));
                assert!(!name.starts_with(':'));
                // The whole name: the byte after it cannot go on a name.
                let next = sql.as_bytes().get(f.end).copied();
                assert!(!next.is_some_and(|b| b.is_ascii_alphanumeric() || b"_$.".contains(&b)));
            }
            Placeholder::List(name) => {
                assert!(vitess_name(name), "{name:?}");
                assert_eq!(text.strip_prefix("::"), Some(name));
                let next = sql.as_bytes().get(f.end).copied();
                assert!(!next.is_some_and(|b| b.is_ascii_alphanumeric() || b"_$.".contains(&b)));
            }
        }
    }
});
