use super::*;

fn row(cells: [&str; 5]) -> [String; 5] {
    cells.map(str::to_owned)
}

#[test]
fn literals_are_hex() {
    assert_eq!(literal("ferry"), "_utf8mb4 X'6665727279'");
    assert_eq!(literal("a'b\\"), "_utf8mb4 X'6127625c'");
    assert_eq!(literal(""), "_utf8mb4 X''");
}

#[test]
fn lookup_sql_has_one_branch_per_table() {
    let one = lookup_sql(&[("d", "t")], false);
    assert_eq!(
        one,
        "SELECT 'c', TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = _utf8mb4 X'64' AND TABLE_NAME = _utf8mb4 X'74'"
    );
    let two = lookup_sql(&[("d", "t"), ("d", "u")], true);
    assert_eq!(two.matches(" UNION ALL ").count(), 3);
    assert_eq!(two.matches("CHECK_CONSTRAINTS").count(), 2);
}

#[test]
fn mariadb_json_is_a_longtext_with_its_check() {
    let asked = [("ferry", "t")];
    let rows = vec![
        row(["c", "ferry", "t", "j", "longtext"]),
        row(["c", "ferry", "t", "lt", "longtext"]),
        row(["c", "ferry", "t", "v", "varchar(10)"]),
        row(["c", "ferry", "t", "odd`name", "longtext"]),
        row(["c", "ferry", "t", "e", "enum('a','b')"]),
        row(["k", "ferry", "t", "j", "json_valid(`j`)"]),
        // A check on another column, one named otherwise, one not json_valid.
        row(["k", "ferry", "t", "lt", "json_valid(`j`)"]),
        row(["k", "ferry", "t", "v", "json_valid(`v`)"]),
        row(["k", "ferry", "t", "odd`name", "json_valid(`odd``name`)"]),
        row(["k", "ferry", "t", "e", "`e` <> 'b'"]),
        // Another table that matched case-insensitively.
        row(["c", "ferry", "T", "j", "int(11)"]),
    ];
    let got = describe_rows(rows.into_iter(), &asked);
    assert_eq!(got.len(), 1);
    let t = &got[&table_key("ferry", "t")];
    let d = |n: &str| (t[n].column_type.as_str(), t[n].json);
    assert_eq!(d("j"), ("json", true));
    assert_eq!(d("lt"), ("longtext", false));
    assert_eq!(
        d("v"),
        ("varchar(10)", false),
        "only a LONGTEXT is MariaDB's JSON"
    );
    assert_eq!(d("odd`name"), ("json", true));
    assert_eq!(d("e"), ("enum('a','b')", false));
}

#[test]
fn keys_name_one_table() {
    assert_ne!(table_key("db", "t"), table_key("d", "bt"));
}

#[test]
fn cache_expires_refreshes_and_stays_bounded() {
    let c = ColumnTypes::new(ColumnTypeSettings {
        cache: 2,
        ttl: Duration::from_secs(30),
    });
    let now = Instant::now();
    let cols = |names: &[&str]| -> Columns {
        Arc::new(
            names
                .iter()
                .map(|n| {
                    (
                        n.to_string(),
                        Described {
                            column_type: "int".into(),
                            json: false,
                        },
                    )
                })
                .collect(),
        )
    };
    c.store(table_key("d", "a"), cols(&["x"]), now, 0);
    assert!(c.cached(&table_key("d", "a"), &["x"], now).is_some());
    // A column the entry lacks: served while young, looked up again after.
    assert!(c.cached(&table_key("d", "a"), &["y"], now).is_some());
    let later = now + MISSING_COLUMN_REFRESH;
    assert!(c.cached(&table_key("d", "a"), &["y"], later).is_none());
    assert!(c.cached(&table_key("d", "a"), &["x"], later).is_some());
    // A table information_schema does not know (temporary): only the TTL.
    c.store(table_key("d", "tmp"), cols(&[]), now, 0);
    assert!(c.cached(&table_key("d", "tmp"), &["y"], later).is_some());
    let expired = now + Duration::from_secs(30);
    assert!(c.cached(&table_key("d", "a"), &["x"], expired).is_none());
    // Full: the least recently used goes.
    let last = later + Duration::from_millis(1);
    assert!(c.cached(&table_key("d", "a"), &["x"], last).is_some());
    c.store(table_key("d", "b"), cols(&["x"]), last, 0);
    assert_eq!(c.len(), 2);
    assert!(c.cached(&table_key("d", "tmp"), &[], last).is_none());
    assert!(c.cached(&table_key("d", "a"), &["x"], last).is_some());
    assert!(c.cached(&table_key("d", "b"), &["x"], last).is_some());
}

#[test]
fn statements_that_change_tables_empty_the_cache() {
    let c = ColumnTypes::new(ColumnTypeSettings {
        cache: 8,
        ttl: Duration::from_secs(30),
    });
    let fill = || {
        let generation = c.generation();
        c.store(
            table_key("d", "a"),
            Arc::new(HashMap::new()),
            Instant::now(),
            generation,
        );
    };
    for sql in [
        "SELECT 1",
        "INSERT INTO a VALUES (1)",
        "CREATE TEMPORARY TABLE t (a INT)",
    ] {
        fill();
        c.statement_ran(sql);
        assert_eq!(c.len(), 1, "{sql}");
    }
    for sql in [
        "ALTER TABLE a ADD COLUMN b INT",
        "create table b (x int)",
        "DROP TABLE a",
        "RENAME TABLE a TO b",
        "/* x */ ALTER TABLE a DROP COLUMN b",
    ] {
        fill();
        c.statement_ran(sql);
        assert!(c.is_empty(), "{sql}");
    }
    // A lookup that began before the cache was emptied is not kept.
    let before = c.generation();
    c.statement_ran("DROP TABLE a");
    c.store(
        table_key("d", "a"),
        Arc::new(HashMap::new()),
        Instant::now(),
        before,
    );
    assert!(c.is_empty());
}
