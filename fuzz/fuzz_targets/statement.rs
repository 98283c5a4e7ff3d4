//! The statement classifiers on client SQL (ferry-wire): `classify`,
//! `classify_user_variables_read`, `first_keyword`, `is_plain_rollback`, `replay_safe`
//! (0-RTT and Connect GET) and `session_state::assigned`. No panic, and:
//! - the two classifiers refuse the same statements with the same label, and
//!   `classify_user_variables_read` Reset implies `classify` Reset (reads of user
//!   variables only add Resets);
//! - a replay-safe statement is never refused, and is Clean unless the lexer is unsure
//!   of it (a backslash in a string: `classify` says Reset then, see
//!   docs/benchmarks/fuzzing.md); it assigns nothing;
//! - `first_keyword` is an upper-case word or empty; a plain rollback starts with
//!   ROLLBACK and is Clean;
//! - `assigned` names plain, lower-case user variables and known system variables, each
//!   once.
#![no_main]

use ferry_wire::lexer::Lexer;
use ferry_wire::replay::replay_safe;
use ferry_wire::session_state::{self, assigned, plain_name};
use ferry_wire::statement::{
    classify, classify_user_variables_read, first_keyword, is_plain_rollback, Verdict,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data);
    let sql = sql.as_ref();

    let verdict = classify(sql);
    let reads = classify_user_variables_read(sql);
    match (verdict, reads) {
        (Verdict::Refuse(a), Verdict::Refuse(b)) => assert_eq!(a, b),
        (Verdict::Refuse(_), _) | (_, Verdict::Refuse(_)) => {
            panic!("classify {verdict:?}, classify_user_variables_read {reads:?}")
        }
        (Verdict::Clean, Verdict::Reset) => panic!("user-variable reads made it Reset"),
        _ => {}
    }

    if replay_safe(sql) {
        assert!(
            !matches!(verdict, Verdict::Refuse(_)),
            "replay-safe but refused: {verdict:?}"
        );
        let mut lexer = Lexer::new(sql);
        lexer.by_ref().for_each(drop);
        if !lexer.is_unsure() {
            assert_eq!(verdict, Verdict::Clean, "replay-safe but {verdict:?}");
        }
        if let Some(a) = assigned(sql) {
            assert!(
                a.user.is_empty() && a.system.is_empty(),
                "replay-safe but assigns {a:?}"
            );
        }
    }

    let keyword = first_keyword(sql);
    assert!(keyword.bytes().all(|b| !b.is_ascii_lowercase()));
    if is_plain_rollback(sql) {
        assert_eq!(keyword, "ROLLBACK");
        assert_eq!(verdict, Verdict::Clean);
    }

    if let Some(a) = assigned(sql) {
        for (i, u) in a.user.iter().enumerate() {
            assert!(plain_name(u), "{u:?}");
            assert_eq!(*u, u.to_ascii_lowercase());
            assert!(!a.user[..i].contains(u), "{u} twice");
        }
        for (i, s) in a.system.iter().enumerate() {
            let known = session_state::system_variable(s).expect("a known system variable");
            assert_eq!(known.name, *s);
            assert!(!a.system[..i].contains(s), "{s} twice");
        }
    }
});
