//! Every error vocabulary of the shim in one place: MySQL's own (named error
//! constants as vitess's `sqlerror` names them, the errno → code table:
//! mysql.rs; vtgate's, vitess.rs) and the errors an answer carries (answers.rs). Connect errors
//! (HTTP status + code, before or instead of an answer) are
//! connect/error.rs's type.
pub mod answers;
pub mod mysql;
pub mod vitess;
