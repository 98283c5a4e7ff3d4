//! The `column_type` of a result's fields, and MariaDB's JSON columns.
//!
//! MySQL's column definition packet carries a type code, a length, a
//! character set, decimals and flags, but not the column's type as it was
//! declared (`enum('a','b')`, `point`), and MariaDB sends its JSON columns as
//! LONGTEXT (their `format=json` is in MariaDB's extended metadata, which
//! mysql_async neither asks for nor parses). `information_schema.COLUMNS` has
//! both: this module looks a result's tables up there, as vitess's vstreamer
//! does for the fields of its VStream events (`select column_name,
//! column_type from information_schema.columns where table_schema=... and
//! table_name=...`). vttablet's query results carry no column_type at all
//! (PlanetScale's answers have none): Ferry's is an addition, which clients
//! of the psdb API ignore or may use. In front of Vitess's vtgate there is
//! none, as in vtgate's own answers (tests/vitess-equivalence).
//!
//! - A column of a table (the field names one: `org_table`, and a database)
//!   gets `COLUMN_TYPE` as the server writes it (MariaDB: `int(11)`; MySQL 8:
//!   `int`). Where information_schema has no answer (a temporary table, a
//!   lookup that could not run) it gets the type derived from its definition
//!   (types/type_map.rs), which is the same text except for ENUM/SET values, spatial
//!   subtypes and MariaDB's JSON.
//! - An expression has none, as in vitess.
//! - MariaDB: a LONGTEXT column that has the CHECK (json_valid(`col`)) that
//!   MariaDB's `JSON` type gives it (information_schema.CHECK_CONSTRAINTS, a
//!   column-level constraint named after the column) is typed JSON, with
//!   column_type `json`. That is the only mark MariaDB 10.11 leaves in
//!   information_schema: COLUMNS and SHOW CREATE TABLE both say `longtext`. A
//!   LONGTEXT declared with that CHECK by hand reads the same, and is JSON too.
//!
//! Cost: a table's columns are looked up once and cached (bounded, least
//! recently used out first) for `FERRY_COLUMN_TYPE_TTL_SECS`; a statement
//! that may change a table (ALTER, CREATE, DROP, RENAME) through this shim
//! empties the cache, and a cached table missing a column that a result
//! names is looked up again (at most once a second). A lookup runs on
//! another connection of the same credential (so it sees what that user may
//! see, and leaves the statement's own session untouched), waiting at most
//! `LOOKUP_WAIT` for one; without one the answer uses derived types.
//! `FERRY_COLUMN_TYPE_CACHE=0` turns lookups off.
use crate::credentials::Credentials;
use crate::mysql::pool::Pools;
use crate::rows::result::field;
use crate::settings::{Setting, Vars};
use crate::types::type_map::{derived_column_type, ColumnDef};
use ferry_proto::vitess::query::{Field, Type};
use ferry_wire::statement::{classify, first_keyword, Verdict};
use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, Row, Value};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How long a lookup waits for a connection of the pool (all may be busy).
const LOOKUP_WAIT: Duration = Duration::from_millis(250);
/// Lookups running at once, shim-wide.
const LOOKUPS_AT_ONCE: usize = 4;
/// A cached table that lacks a column a result names is looked up again no
/// sooner than this after it was fetched (a column added behind the cache's
/// back, or one another user could not see).
const MISSING_COLUMN_REFRESH: Duration = Duration::from_secs(1);
/// Tables in one lookup query (one UNION ALL branch each).
const TABLES_PER_LOOKUP: usize = 16;

/// What information_schema says about one column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub column_type: String,
    /// MariaDB's JSON (a LONGTEXT with its json_valid CHECK).
    pub json: bool,
}

type Columns = Arc<HashMap<String, Described>>;

struct Entry {
    columns: Columns,
    fetched: Instant,
    used: Instant,
}

/// The shim-wide cache of tables' column types: `database\0table` → columns.
pub struct ColumnTypes {
    capacity: usize,
    ttl: Duration,
    tables: Mutex<Tables>,
    lookups: Semaphore,
}

#[derive(Default)]
struct Tables {
    entries: HashMap<String, Entry>,
    /// Counts the times the cache was emptied: a lookup that began before
    /// (and may have read a table as it was before an ALTER) is not kept.
    generation: u64,
}

fn table_key(database: &str, table: &str) -> String {
    let mut k = String::with_capacity(database.len() + table.len() + 1);
    k.push_str(database);
    k.push('\0');
    k.push_str(table);
    k
}

impl ColumnTypes {
    /// `capacity` tables (0: never look up), each kept for `ttl`.
    pub fn new(cfg: ColumnTypeSettings) -> Self {
        ColumnTypes {
            capacity: cfg.cache,
            ttl: cfg.ttl,
            tables: Mutex::new(Tables::default()),
            lookups: Semaphore::new(LOOKUPS_AT_ONCE),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// A table's cached columns, if fresh enough to answer for `names`.
    fn cached(&self, key: &str, names: &[&str], now: Instant) -> Option<Columns> {
        let mut tables = self.lock();
        let entry = tables.entries.get_mut(key)?;
        let age = now.saturating_duration_since(entry.fetched);
        if age >= self.ttl {
            return None;
        }
        let missing =
            !entry.columns.is_empty() && names.iter().any(|n| !entry.columns.contains_key(*n));
        if missing && age >= MISSING_COLUMN_REFRESH {
            return None;
        }
        entry.used = now;
        Some(entry.columns.clone())
    }

    /// Keeps a lookup's answer, unless the cache was emptied since it began
    /// (`generation`).
    fn store(&self, key: String, columns: Columns, now: Instant, generation: u64) {
        let mut guard = self.lock();
        let tables = &mut *guard;
        if tables.generation != generation {
            return;
        }
        let entries = &mut tables.entries;
        if !entries.contains_key(&key) && entries.len() >= self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            key,
            Entry {
                columns,
                fetched: now,
                used: now,
            },
        );
    }

    /// After a statement ran: one that may have changed a table's columns
    /// empties the cache (temporary tables are never in it).
    pub fn statement_ran(&self, sql: &str) {
        if self.capacity == 0 {
            return;
        }
        let changes_tables = matches!(
            first_keyword(sql).as_str(),
            "ALTER" | "CREATE" | "DROP" | "RENAME"
        ) && classify(sql) != Verdict::Refuse("CREATE TEMPORARY TABLE");
        if changes_tables {
            let mut tables = self.lock();
            tables.entries.clear();
            tables.generation += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a statement needs to describe its columns: the cache, and where a
/// lookup gets its connection (the statement's credential's pool).
pub struct Describer<'a> {
    pub cache: &'a ColumnTypes,
    pub pools: &'a Pools,
    pub creds: &'a Credentials,
}

/// One table of a result, and the columns of it the result names.
struct Wanted<'f> {
    key: String,
    database: &'f str,
    table: &'f str,
    names: Vec<&'f str>,
    columns: Option<Columns>,
}

impl Describer<'_> {
    /// The vitess fields of a result's columns. `server_version` is the
    /// connection's (MariaDB is 10 and up).
    pub async fn fields(&self, columns: &[Column], server_version: (u16, u16, u16)) -> Vec<Field> {
        let vitess = self.pools.is_vitess();
        let mut fields: Vec<Field> = columns.iter().map(|c| field(c, vitess)).collect();
        if vitess {
            // vtgate's own answers (its gRPC Execute, PlanetScale's) carry no
            // column_type: none is added in front of it (rows/result.rs), and nothing
            // is looked up.
            return fields;
        }
        let mariadb = server_version.0 >= 10;
        let mut wanted: Vec<Wanted<'_>> = Vec::new();
        for f in &fields {
            if f.org_table.is_empty() || f.database.is_empty() {
                continue;
            }
            match wanted
                .iter_mut()
                .find(|w| w.table == f.org_table && w.database == f.database)
            {
                Some(w) => w.names.push(&f.org_name),
                None => wanted.push(Wanted {
                    key: table_key(&f.database, &f.org_table),
                    database: &f.database,
                    table: &f.org_table,
                    names: vec![&f.org_name],
                    columns: None,
                }),
            }
        }
        if wanted.is_empty() {
            return fields;
        }
        if self.cache.capacity > 0 {
            self.look_up(&mut wanted, mariadb).await;
        }
        let found: Vec<(String, String, Option<Columns>)> = wanted
            .into_iter()
            .map(|w| (w.database.to_owned(), w.table.to_owned(), w.columns))
            .collect();
        for (f, col) in fields.iter_mut().zip(columns) {
            if f.org_table.is_empty() || f.database.is_empty() {
                continue;
            }
            let described = found
                .iter()
                .find(|(d, t, _)| *d == f.database && *t == f.org_table)
                .and_then(|(_, _, cols)| cols.as_ref())
                .and_then(|cols| cols.get(&f.org_name));
            match described {
                Some(d) => {
                    f.column_type = d.column_type.clone();
                    let text = f.r#type == Type::Text as i32 || f.r#type == Type::Blob as i32;
                    if d.json && text {
                        f.r#type = Type::Json as i32;
                    }
                }
                None => f.column_type = derived_column_type(&definition(col), mariadb),
            }
            // MariaDB's JSON by its extended metadata (rows/result.rs): a view's or a
            // temporary table's column, whatever information_schema says of it.
            if f.r#type == Type::Json as i32 {
                f.column_type = "json".into();
            }
        }
        fields
    }

    /// Fills `wanted` from the cache, looking up what it lacks.
    async fn look_up(&self, wanted: &mut [Wanted<'_>], mariadb: bool) {
        let fill = |wanted: &mut [Wanted<'_>]| {
            let now = Instant::now();
            for w in wanted.iter_mut().filter(|w| w.columns.is_none()) {
                w.columns = self.cache.cached(&w.key, &w.names, now);
            }
            wanted.iter().any(|w| w.columns.is_none())
        };
        if !fill(wanted) {
            return;
        }
        // Bounded lookups; whoever waited finds what the one before fetched.
        let Ok(Ok(_permit)) = tokio::time::timeout(LOOKUP_WAIT, self.cache.lookups.acquire()).await
        else {
            return;
        };
        if !fill(wanted) {
            return;
        }
        let tables: Vec<(&str, &str)> = wanted
            .iter()
            .filter(|w| w.columns.is_none())
            .map(|w| (w.database, w.table))
            .collect();
        let generation = self.cache.generation();
        let Some(mut conn) = self.connection().await else {
            return;
        };
        let mut fetched: HashMap<String, HashMap<String, Described>> = HashMap::new();
        for chunk in tables.chunks(TABLES_PER_LOOKUP) {
            let rows: Vec<Row> = match conn.query(lookup_sql(chunk, mariadb)).await {
                Ok(rows) => rows,
                Err(e) => {
                    crate::log!(
                        crate::telemetry::log::Level::Warn,
                        "column type lookup failed",
                        user = self.creds.user,
                        error = e
                    );
                    return;
                }
            };
            for (key, cols) in describe_rows(rows.iter().map(row_texts), chunk) {
                fetched.insert(key, cols);
            }
        }
        // Nothing was left behind on the lookup's connection.
        conn.reset_connection(false);
        drop(conn);
        let now = Instant::now();
        for w in wanted.iter_mut().filter(|w| w.columns.is_none()) {
            let cols: Columns = Arc::new(fetched.remove(&w.key).unwrap_or_default());
            self.cache
                .store(w.key.clone(), cols.clone(), now, generation);
            w.columns = Some(cols);
        }
    }

    async fn connection(&self) -> Option<Conn> {
        match tokio::time::timeout(LOOKUP_WAIT, self.pools.conn(self.creds)).await {
            Ok(Ok(conn)) => Some(conn),
            Ok(Err(e)) => {
                crate::log!(
                    crate::telemetry::log::Level::Info,
                    "no connection for a column type lookup",
                    user = self.creds.user,
                    error = e.message
                );
                None
            }
            Err(_) => None,
        }
    }

    /// See [`ColumnTypes::statement_ran`].
    pub fn statement_ran(&self, sql: &str) {
        self.cache.statement_ran(sql);
    }
}

fn definition(col: &Column) -> ColumnDef {
    ColumnDef {
        mysql_type: col.column_type() as u8,
        flags: col.flags().bits(),
        column_length: col.column_length(),
        charset: col.character_set(),
        decimals: col.decimals(),
    }
}

/// A string constant that cannot break out of its quotes whatever the name
/// holds, nor depend on `sql_mode` (NO_BACKSLASH_ESCAPES): hex, introduced.
fn literal(s: &str) -> String {
    let mut out = String::with_capacity(12 + 2 * s.len());
    out.push_str("_utf8mb4 X'");
    for b in s.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out.push('\'');
    out
}

/// One query for a few tables: their columns (rows tagged `c`: schema, table,
/// column, COLUMN_TYPE) and, on MariaDB, their CHECK constraints (`k`:
/// schema, table, constraint, clause). One UNION ALL branch per table keeps
/// each branch's schema and table constant, which is what lets the server
/// open only that table instead of scanning every one.
fn lookup_sql(tables: &[(&str, &str)], mariadb: bool) -> String {
    let mut branches = Vec::with_capacity(tables.len() * 2);
    for (database, table) in tables {
        let (d, t) = (literal(database), literal(table));
        branches.push(format!(
            "SELECT 'c', TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t}"
        ));
        if mariadb {
            branches.push(format!(
                "SELECT 'k', CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE \
                 FROM information_schema.CHECK_CONSTRAINTS \
                 WHERE CONSTRAINT_SCHEMA = {d} AND TABLE_NAME = {t}"
            ));
        }
    }
    branches.join(" UNION ALL ")
}

/// A row's cells as text (lossy: never fails on bytes that are not UTF-8).
fn row_texts(row: &Row) -> [String; 5] {
    std::array::from_fn(|i| match row.as_ref(i) {
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    })
}

/// The check MariaDB's JSON type puts on its column: `json_valid(`col`)`.
fn is_json_check(column: &str, clause: &str) -> bool {
    clause
        .strip_prefix("json_valid(`")
        .and_then(|r| r.strip_suffix("`)"))
        .is_some_and(|quoted| quoted.replace("``", "`") == column)
}

/// The lookup's rows → columns per table key, for the tables asked about
/// (schema and table compared exactly: the server's comparison may ignore
/// case, and a name differing only in case is another table).
fn describe_rows(
    rows: impl Iterator<Item = [String; 5]>,
    asked: &[(&str, &str)],
) -> HashMap<String, HashMap<String, Described>> {
    let mut out: HashMap<String, HashMap<String, Described>> = HashMap::new();
    let mut json_checks: Vec<(String, String)> = Vec::new();
    for [kind, schema, table, name, text] in rows {
        if !asked.iter().any(|(d, t)| *d == schema && *t == table) {
            continue;
        }
        let key = table_key(&schema, &table);
        match kind.as_str() {
            "c" => {
                out.entry(key).or_default().insert(
                    name,
                    Described {
                        column_type: text,
                        json: false,
                    },
                );
            }
            "k" if is_json_check(&name, &text) => json_checks.push((key, name)),
            _ => {}
        }
    }
    for (key, name) in json_checks {
        if let Some(d) = out.get_mut(&key).and_then(|cols| cols.get_mut(&name)) {
            if d.column_type.eq_ignore_ascii_case("longtext") {
                d.json = true;
                d.column_type = "json".into();
            }
        }
    }
    out
}

/// How many tables' column types are kept, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnTypeSettings {
    pub cache: usize,
    pub ttl: Duration,
}

pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "FERRY_COLUMN_TYPE_CACHE",
        default: "1024",
        about: "tables whose column types (and MariaDB's JSON columns) are kept from information_schema; `0`: no lookups (`column_type` derived from the definition, MariaDB JSON stays TEXT/BLOB)",
    },
    Setting {
        name: "FERRY_COLUMN_TYPE_TTL_SECS",
        default: "30",
        about: "how long a table's column types are kept",
    },
];

impl ColumnTypeSettings {
    pub fn from_vars(vars: &Vars<'_>) -> Result<Self, String> {
        Ok(ColumnTypeSettings {
            cache: vars.size("FERRY_COLUMN_TYPE_CACHE")?,
            ttl: vars.secs("FERRY_COLUMN_TYPE_TTL_SECS")?,
        })
    }
}

#[cfg(test)]
mod tests;
