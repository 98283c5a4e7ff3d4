//! Statement timeouts PlanetScale's users already write, kept by the gateway like the
//! client's own deadline (connect/deadline.rs): the statement is stopped in MySQL when
//! it passes, and the answer is `deadline_exceeded`.
//! - `SET query_timeout = <ms>`: vitess's session setting; the shim answers it (nothing
//!   runs in MySQL) and keeps it in the session's `query_timeout`; 0 turns it off.
//! - the `/*vt+ QUERY_TIMEOUT_MS=<ms> */` comment directive, right after the statement's
//!   first keyword (as vitess reads directives), or before it: for that statement,
//!   over the session's.
//!
//! The earliest of the client's deadline and these wins.
use super::gateway_set;

/// `Some(Ok(ms))`: the statement sets the session's query timeout; `Some(Err(v))`: to
/// `v`, which is not a number of milliseconds; `None`: another statement.
pub fn set_query_timeout(sql: &str) -> Option<Result<u64, String>> {
    let value = gateway_set::value_of(sql, "query_timeout")?;
    Some(value.trim().parse::<u64>().map_err(|_| value))
}

/// The statement's `QUERY_TIMEOUT_MS` directive, if it has one (0 is none).
pub fn directive_ms(sql: &str) -> Option<u64> {
    let mut rest = sql.trim_start();
    let mut first_word = false;
    // Comments before the first keyword, then the keyword, then the comments after it.
    loop {
        if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/")?;
            let (body, next) = (&after[..end], &after[end + 2..]);
            if let Some(directives) = body.strip_prefix("vt+") {
                if let Some(ms) = query_timeout_in(directives) {
                    return Some(ms).filter(|ms| *ms > 0);
                }
            }
            rest = next.trim_start();
        } else if !first_word {
            first_word = true;
            let end = rest
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(rest.len());
            if end == 0 {
                return None;
            }
            rest = rest[end..].trim_start();
        } else {
            return None;
        }
    }
}

/// `QUERY_TIMEOUT_MS=n` among a directive comment's space-separated settings.
fn query_timeout_in(directives: &str) -> Option<u64> {
    directives.split_ascii_whitespace().find_map(|d| {
        let (k, v) = d.split_once('=')?;
        k.eq_ignore_ascii_case("QUERY_TIMEOUT_MS")
            .then(|| v.trim_matches(|c| c == '\'' || c == '"').parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directive_where_vitess_reads_it() {
        assert_eq!(
            directive_ms("SELECT /*vt+ QUERY_TIMEOUT_MS=500 */ SLEEP(3)"),
            Some(500)
        );
        assert_eq!(
            directive_ms("select /*vt+ PLANNER=gen4 query_timeout_ms=20 */ 1"),
            Some(20)
        );
        assert_eq!(
            directive_ms("/*vt+ QUERY_TIMEOUT_MS=7 */ UPDATE t SET a = 1"),
            Some(7)
        );
        assert_eq!(
            directive_ms("INSERT /* app */ /*vt+ QUERY_TIMEOUT_MS=9 */ INTO t VALUES (1)"),
            Some(9)
        );
        for sql in [
            "SELECT SLEEP(3)",
            "SELECT 1 /*vt+ QUERY_TIMEOUT_MS=5 */",
            "SELECT '/*vt+ QUERY_TIMEOUT_MS=5 */'",
            "SELECT /*vt+ QUERY_TIMEOUT_MS=0 */ 1",
            "SELECT /*vt+ QUERY_TIMEOUT_MS=x */ 1",
            "SELECT /* QUERY_TIMEOUT_MS=5 */ 1",
            "SELECT /*vt+ QUERY_TIMEOUT_MS=5",
        ] {
            assert_eq!(directive_ms(sql), None, "{sql}");
        }
    }

    #[test]
    fn the_session_setting() {
        assert_eq!(set_query_timeout("SET query_timeout = 250"), Some(Ok(250)));
        assert_eq!(set_query_timeout("SET @@query_timeout = '0'"), Some(Ok(0)));
        assert_eq!(
            set_query_timeout("SET query_timeout = 'soon'"),
            Some(Err("soon".into()))
        );
        assert_eq!(
            set_query_timeout("SET query_timeout = 1, autocommit = 0"),
            None
        );
    }
}
