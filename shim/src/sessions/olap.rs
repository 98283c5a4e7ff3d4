//! Vitess's workload switch: `SET workload = 'olap'` (or `oltp`, `dba`).
//!
//! It is a vitess session setting, not a MySQL variable (MySQL would answer
//! "unknown system variable"), so the shim answers it itself: nothing runs in
//! MySQL, nothing is pinned, and the returned session's
//! `options.workload` says OLAP. Clients act on that: PlanetScale's psdbproxy
//! sends every later statement of an OLAP session through `StreamExecute`.
//!
//! Accepted as vitess accepts it: `SET [SESSION | LOCAL] workload`, `SET
//! @@workload`, `@@session.workload`, `@@local.workload`; `=` or `:=`; the
//! value quoted or bare, any case (`olap`, `'OLAP'`). A value vitess does not
//! know is `invalid workload: <value>`. A `SET` that also assigns something
//! else goes to MySQL as it is.
//!
//! How the statement is read: gateway_set.rs.
use super::gateway_set;
use ferry_proto::vitess::query::execute_options::Workload;

/// `Some(Ok(w))`: the statement sets the workload to `w`; `Some(Err(v))`: it
/// sets it to `v`, which is not a workload; `None`: it is another statement.
pub fn set_workload(sql: &str) -> Option<Result<Workload, String>> {
    let value = gateway_set::value_of(sql, "workload")?;
    Some(parse(&value).ok_or(value))
}

/// Vitess's names, any case.
fn parse(value: &str) -> Option<Workload> {
    Workload::from_str_name(&value.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_vitess_accepts() {
        for sql in [
            "SET workload = 'olap'",
            "set workload = olap",
            "SET workload='OLAP';",
            "SET workload := \"olap\" ; ",
            "SET @@workload = 'olap'",
            "SET @@session.workload = olap",
            "SET @@SESSION.WORKLOAD = 'olap'",
            "SET SESSION workload = 'olap'",
            "SET LOCAL workload = `olap`",
            "  /* psdbproxy */ SET workload = 'olap' -- switch\n",
        ] {
            assert_eq!(set_workload(sql), Some(Ok(Workload::Olap)), "{sql}");
        }
        assert_eq!(
            set_workload("SET workload = 'oltp'"),
            Some(Ok(Workload::Oltp))
        );
        assert_eq!(set_workload("set workload = dba"), Some(Ok(Workload::Dba)));
    }

    #[test]
    fn a_bad_value_is_an_error_and_other_statements_are_not_ours() {
        assert_eq!(
            set_workload("SET workload = 'fast'"),
            Some(Err("fast".into()))
        );
        assert_eq!(set_workload("SET workload = ''"), Some(Err(String::new())));
        for sql in [
            "SET autocommit = 0",
            "SET workload = 'olap', autocommit = 1",
            "SET GLOBAL workload = 'olap'",
            "SET @@global.workload = 'olap'",
            "SET @workload = 'olap'",
            "SET SESSION @@workload = 'olap'",
            "SET workload = 'olap'; SELECT 1",
            "SET workload",
            "SET workload = ",
            "SELECT 'SET workload = olap'",
            "SET workload = 'olap",
            "",
        ] {
            assert_eq!(set_workload(sql), None, "{sql}");
        }
    }

    // Where olap.rs's own tokenizer read the text otherwise than ferry-wire's lexer.

    #[test]
    fn executable_comments_are_sql() {
        // MySQL runs what is inside `/*! ... */`, versioned or not.
        for sql in [
            "/*!SET workload = 'olap' */",
            "/*!50100 SET workload = 'olap'*/",
            "/*M!100100 SET workload = 'olap' */",
            "SET /*!40101 workload */ = 'olap'",
            "SET workload = /*!'olap'*/ /* done */",
        ] {
            assert_eq!(set_workload(sql), Some(Ok(Workload::Olap)), "{sql}");
        }
        // ... so what they add is part of the statement.
        for sql in [
            "SET workload = 'olap' /*!, autocommit = 1 */",
            "/*!SET workload = 'olap'; SELECT 1 */",
        ] {
            assert_eq!(set_workload(sql), None, "{sql}");
        }
        // `/*M` without `!` is a plain comment.
        assert_eq!(
            set_workload("/*My client*/ SET workload = 'olap'"),
            Some(Ok(Workload::Olap))
        );
    }

    #[test]
    fn strings_as_mysql_reads_them() {
        // A doubled quote is one quote, in both readings.
        assert_eq!(
            set_workload("SET workload = 'ol''ap'"),
            Some(Err("ol'ap".into()))
        );
        assert_eq!(
            set_workload("SET workload = `ol``ap`"),
            Some(Err("ol`ap".into()))
        );
        // A backslash the two readings (default, NO_BACKSLASH_ESCAPES) read
        // differently: not ours, MySQL answers.
        for sql in [
            r"SET workload = 'olap\\'",
            r"SET workload = '\olap'",
            r"SET workload = 'ol\'ap'",
            r"SET workload = 'a\'; SET workload = olap; -- '",
        ] {
            assert_eq!(set_workload(sql), None, "{sql}");
        }
        // Read the same both ways: `\%` keeps its backslash; none in identifiers.
        assert_eq!(
            set_workload(r"SET workload = 'ol\%ap'"),
            Some(Err(r"ol\%ap".into()))
        );
        assert_eq!(
            set_workload(r"SET workload = `olap\`"),
            Some(Err(r"olap\".into()))
        );
    }

    #[test]
    fn tokens_as_mysql_reads_them() {
        // `:=` is one token.
        for sql in ["SET workload : = 'olap'", "SET workload :/**/= 'olap'"] {
            assert_eq!(set_workload(sql), None, "{sql}");
        }
        // A word goes on through non-ASCII letters.
        assert_eq!(
            set_workload("SET workload = olapé"),
            Some(Err("olapé".into()))
        );
        // `--` starts a comment only before a space or control character.
        assert_eq!(
            set_workload("SET workload = 'olap' --\tswitch"),
            Some(Ok(Workload::Olap))
        );
        assert_eq!(set_workload("SET workload = 'olap' --switch"), None);
        assert_eq!(
            set_workload("SET workload = 'olap' # switch"),
            Some(Ok(Workload::Olap))
        );
    }
}
