// Equivalence as the oracle (issue 27): for every statement of a corpus, Ferry's psdb
// Execute answer (PlanetScale's Go client, github.com/planetscale/psdb/core/client, over
// Connect) must carry the same fields and rows as vtgate's own
// vtgateservice.Vitess/Execute over gRPC (vitess.io/vitess's vtgateconn +
// grpcvtgateconn) for the same statement, with included_fields=ALL.
//
//	FERRY_URL=https://127.0.0.1:48453 FERRY_CA=/tmp/vh-a/certs/ca.pem \
//	VTGATE_GRPC=127.0.0.1:43401 go run .
//
// Fields are compared attribute by attribute (name, type, table, org_table, database,
// org_name, column_length, charset, flags, decimals, column_type), rows byte-exact
// (NULL distinct from ”), then rows_affected and insert_id. When one side fails, both
// must fail with the same vtrpc code. One PASS/FAIL line per statement; exit 1 on any
// FAIL. See README.md.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/planetscale/psdb/auth"
	psdbclient "github.com/planetscale/psdb/core/client"
	psdbv1alpha1 "github.com/planetscale/psdb/types/psdb/v1alpha1"
	"github.com/planetscale/psdb/types/psdb/v1alpha1/psdbv1alpha1connect"
	psquery "github.com/planetscale/vitess-types/gen/vitess/query/v21"

	"vitess.io/vitess/go/sqltypes"
	querypb "vitess.io/vitess/go/vt/proto/query"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"
	"vitess.io/vitess/go/vt/vtgate/grpcvtgateconn"
	"vitess.io/vitess/go/vt/vtgate/vtgateconn"
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// answer is one side's reply to a statement, in a shape both sides share.
type answer struct {
	transport error // the call itself failed (not an SQL error)
	code      vtrpcpb.Code
	message   string
	failed    bool
	fields    []field
	rows      [][][]byte // nil cell = NULL
	affected  uint64
	insertID  uint64
	// Which of Ferry's shims answered (its ferry-target header): behind envoy/replicas.yaml
	// a read is served by the replica's shim, whose vtgate target is <keyspace>@replica.
	target string
}

type field struct {
	Name, Type, Table, OrgTable, Database, OrgName string
	ColumnLength, Charset, Flags, Decimals         uint32
	ColumnType                                     string
}

func fromVitess(f *querypb.Field) field {
	return field{f.Name, f.Type.String(), f.Table, f.OrgTable, f.Database, f.OrgName,
		f.ColumnLength, f.Charset, f.Flags, f.Decimals, f.ColumnType}
}

func fromPsdb(f *psquery.Field) field {
	return field{f.Name, f.Type.String(), f.Table, f.OrgTable, f.Database, f.OrgName,
		f.ColumnLength, f.Charset, f.Flags, f.Decimals, f.ColumnType}
}

// psdbRows decodes query.Row (lengths + concatenated values; -1 = NULL).
func psdbRows(rows []*psquery.Row) ([][][]byte, error) {
	out := make([][][]byte, 0, len(rows))
	for i, r := range rows {
		var cells [][]byte
		off := int64(0)
		for _, l := range r.Lengths {
			if l < 0 {
				cells = append(cells, nil)
				continue
			}
			if off+l > int64(len(r.Values)) {
				return nil, fmt.Errorf("row %d: lengths exceed values", i)
			}
			cells = append(cells, append([]byte{}, r.Values[off:off+l]...))
			off += l
		}
		if off != int64(len(r.Values)) {
			return nil, fmt.Errorf("row %d: %d bytes of values, lengths add up to %d", i, len(r.Values), off)
		}
		out = append(out, cells)
	}
	return out, nil
}

func vitessRows(rows [][]sqltypes.Value) [][][]byte {
	out := make([][][]byte, 0, len(rows))
	for _, r := range rows {
		cells := make([][]byte, 0, len(r))
		for _, v := range r {
			if v.IsNull() {
				cells = append(cells, nil)
			} else {
				cells = append(cells, append([]byte{}, v.Raw()...))
			}
		}
		out = append(out, cells)
	}
	return out
}

type sides struct {
	ferry    psdbv1alpha1connect.DatabaseClient
	vtgate   *vtgateconn.VTGateConn
	keyspace string
	timeout  time.Duration
}

func (s *sides) viaFerry(sql string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	resp, err := s.ferry.Execute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{Query: sql}))
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return answer{transport: fmt.Errorf("connect %s: %s", ce.Code(), ce.Message())}
		}
		return answer{transport: err}
	}
	m, target := resp.Msg, resp.Header().Get("ferry-target")
	if e := m.GetError(); e != nil {
		return answer{failed: true, code: vtrpcpb.Code(e.GetCode()), message: e.GetMessage(), target: target}
	}
	a := answer{target: target}
	r := m.GetResult()
	if r == nil {
		return a
	}
	for _, f := range r.Fields {
		a.fields = append(a.fields, fromPsdb(f))
	}
	a.rows, err = psdbRows(r.Rows)
	if err != nil {
		return answer{transport: err}
	}
	a.affected, a.insertID = r.RowsAffected, r.InsertId
	return a
}

// viaVtgate runs sql on vtgate's gRPC API with the target Ferry's answer came from:
// the keyspace's primary, or with "replica" its replica tablets (keyspace@replica).
func (s *sides) viaVtgate(sql, target string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	ks := s.keyspace
	if target == "replica" {
		ks += "@replica"
	}
	// A fresh session per statement, as Ferry's Execute without a session: autocommit.
	sess := s.vtgate.Session(ks, &querypb.ExecuteOptions{IncludedFields: querypb.ExecuteOptions_ALL})
	qr, err := sess.Execute(ctx, sql, nil, false)
	if err != nil {
		return answer{failed: true, code: vterrors.Code(err), message: err.Error()}
	}
	a := answer{affected: qr.RowsAffected, insertID: qr.InsertID}
	for _, f := range qr.Fields {
		a.fields = append(a.fields, fromVitess(f))
	}
	a.rows = vitessRows(qr.Rows)
	return a
}

// A statement of the corpus. known: a legitimate, explained difference (README.md);
// the statement is still run and printed, as KNOWN instead of FAIL, and only while
// the difference is exactly the one described.
type stmt struct {
	name  string
	sql   string
	known *known
}

type known struct {
	attr  string // the attribute that differs, e.g. "field flags"
	match string // ...and a substring of its detail, e.g. `(min(dt)): ferry="128" vtgate="0"`
	why   string
}

func show(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", b)
}

type difference struct {
	attr, detail string
	addition     bool // only Ferry's column_type addition (see columnTypeAddition)
}

// diff returns every difference (first the error or shape ones, which stop the
// comparison), as attribute + "ferry=… vtgate=…".
func diff(f, v answer) []difference {
	one := func(attr, format string, a ...any) []difference {
		return []difference{{attr: attr, detail: fmt.Sprintf(format, a...)}}
	}
	if f.transport != nil {
		return one("transport", "%v", f.transport)
	}
	if f.failed || v.failed {
		switch {
		case f.failed && !v.failed:
			return one("error", "ferry failed (%s: %s), vtgate succeeded", f.code, f.message)
		case !f.failed && v.failed:
			return one("error", "vtgate failed (%s: %s), ferry succeeded", v.code, v.message)
		case f.code != v.code:
			return one("error code", "ferry=%s (%s) vtgate=%s (%s)", f.code, f.message, v.code, v.message)
		}
		return nil
	}
	if len(f.fields) != len(v.fields) {
		return one("field count", "ferry=%d vtgate=%d", len(f.fields), len(v.fields))
	}
	var out []difference
	for i := range f.fields {
		a, b := f.fields[i], v.fields[i]
		for _, c := range []struct {
			n    string
			x, y any
		}{
			{"name", a.Name, b.Name}, {"type", a.Type, b.Type}, {"table", a.Table, b.Table},
			{"org_table", a.OrgTable, b.OrgTable}, {"database", a.Database, b.Database},
			{"org_name", a.OrgName, b.OrgName}, {"column_length", a.ColumnLength, b.ColumnLength},
			{"charset", a.Charset, b.Charset}, {"flags", a.Flags, b.Flags},
			{"decimals", a.Decimals, b.Decimals}, {"column_type", a.ColumnType, b.ColumnType},
		} {
			if c.x != c.y {
				out = append(out, difference{
					attr: "field " + c.n,
					detail: fmt.Sprintf("column %d (%s): ferry=%q vtgate=%q",
						i, b.Name, fmt.Sprint(c.x), fmt.Sprint(c.y)),
					addition: c.n == "column_type" && b.ColumnType == "",
				})
			}
		}
	}
	if len(f.rows) != len(v.rows) {
		return append(out, one("row count", "ferry=%d vtgate=%d", len(f.rows), len(v.rows))...)
	}
rows:
	for i := range f.rows {
		if len(f.rows[i]) != len(v.rows[i]) {
			out = append(out, one("row width", "row %d: ferry=%d vtgate=%d", i, len(f.rows[i]), len(v.rows[i]))...)
			break
		}
		for j := range f.rows[i] {
			x, y := f.rows[i][j], v.rows[i][j]
			if (x == nil) != (y == nil) || !bytes.Equal(x, y) {
				name := ""
				if j < len(v.fields) {
					name = v.fields[j].Name
				}
				out = append(out, one("row value", "row %d column %d (%s): ferry=%s vtgate=%s", i, j, name, show(x), show(y))...)
				break rows // the first differing cell is enough
			}
		}
	}
	if f.affected != v.affected {
		out = append(out, one("rows_affected", "ferry=%d vtgate=%d", f.affected, v.affected)...)
	}
	if f.insertID != v.insertID {
		out = append(out, one("insert_id", "ferry=%d vtgate=%d", f.insertID, v.insertID)...)
	}
	return out
}

func summary(a answer) string {
	on := ""
	if a.target == "replica" {
		on = ", replica tablets"
	}
	if a.failed {
		return "error " + a.code.String() + on
	}
	return fmt.Sprintf("%d fields, %d rows%s", len(a.fields), len(a.rows), on)
}

func main() {
	t0 := time.Now()
	raw := envOr("FERRY_URL", "https://127.0.0.1:8443")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		fatal("FERRY_URL must be https://host:port, got %q", raw)
	}
	tlsCfg := psdbclient.DefaultTLSConfig()
	if ca := os.Getenv("FERRY_CA"); ca != "" {
		if tlsCfg, err = psdbclient.TLSConfigWithRoot(ca); err != nil {
			fatal("FERRY_CA %s: %v", ca, err)
		}
	}
	s := &sides{
		ferry: psdbclient.New(u.Host, psdbv1alpha1connect.NewDatabaseClient,
			auth.NewBasicAuth(envOr("FERRY_USER", "ferry"), envOr("FERRY_PASSWORD", "ferry")),
			psdbclient.WithTLSConfig(tlsCfg)),
		keyspace: envOr("VTGATE_KEYSPACE", "ferry"),
		timeout:  30 * time.Second,
	}
	vtAddr := envOr("VTGATE_GRPC", "127.0.0.1:43391")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	// vtgate's gRPC port has no TLS and no auth in vttestserver's vtcombo.
	s.vtgate, err = vtgateconn.DialCustom(ctx, grpcvtgateconn.Dial(), vtAddr)
	cancel()
	if err != nil {
		fatal("vtgate gRPC %s: %v", vtAddr, err)
	}
	defer s.vtgate.Close()

	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	t, j := "eq_types_"+hex.EncodeToString(suffix), "eq_join_"+hex.EncodeToString(suffix)
	ut := envOr("VTGATE_UNSHARDED_KEYSPACE", "ferry_unsharded") + ".eq_u_" + hex.EncodeToString(suffix)
	fmt.Printf("ferry %s, vtgate gRPC %s (keyspace %s), tables %s, %s and %s\n", u.Host, vtAddr, s.keyspace, t, j, ut)
	if err := setup(s, t, j, ut); err != nil {
		teardown(s, t, j, ut)
		fatal("setup: %v", err)
	}
	defer teardown(s, t, j, ut)

	strict := os.Getenv("VITESS_EQ_STRICT_COLUMN_TYPE") == "1"
	verbose := os.Getenv("VITESS_EQ_VERBOSE") == "1"
	tries := 12
	if n, err := strconv.Atoi(os.Getenv("VITESS_EQ_TRIES")); err == nil && n > 0 {
		tries = n
	}
	failures, known, statements := 0, 0, corpus(t, j, ut)
	for _, st := range statements {
		var f, v answer
		var bad, notes []string
		additions, try := 0, 0
		// vtgate answers a scatter query with the fields of the first shard to answer,
		// and MySQL's flags differ between a shard with matching rows and one without
		// (PRI_KEY, UNIQUE_KEY, PART_KEY): the same statement may get either set of
		// flags from vtgate itself. So a difference is asked again, both sides, up to
		// VITESS_EQ_TRIES times: a systematic one stays, and the line says how many it took.
		for try = 1; try <= tries; try++ {
			f = s.viaFerry(st.sql)
			v = s.viaVtgate(st.sql, f.target)
			v.target = f.target
			bad, notes, additions = nil, nil, 0
			for _, d := range diff(f, v) {
				switch {
				case d.addition && !strict:
					additions++
				case st.known != nil && st.known.attr == d.attr && strings.Contains(d.detail, st.known.match):
					notes = append(notes, d.attr+": "+d.detail+" ("+st.known.why+")")
				default:
					bad = append(bad, d.attr+": "+d.detail)
				}
			}
			if len(bad) == 0 {
				break
			}
		}
		if try > 1 && len(bad) == 0 {
			notes = append(notes, fmt.Sprintf("agreed on try %d (vtgate's scatter fields vary by shard)", try))
		}
		switch {
		case len(bad) > 0:
			failures++
			fmt.Printf("FAIL %-36s %s\n", st.name, bad[0])
			for _, b := range bad[1:] {
				fmt.Printf("     %-36s %s\n", "", b)
			}
		case len(notes) > 0 || additions > 0:
			known++
			if additions > 0 {
				notes = append([]string{fmt.Sprintf("column_type added to %d column(s), vtgate has none", additions)}, notes...)
			}
			fmt.Printf("PASS %-36s %s; KNOWN: %s\n", st.name, summary(v), strings.Join(notes, "; "))
		default:
			fmt.Printf("PASS %-36s %s\n", st.name, summary(v))
		}
		if verbose && (f.failed || v.failed) {
			fmt.Printf("     ferry:  %s %s\n     vtgate: %s %s\n", f.code, f.message, v.code, v.message)
		}
	}
	fmt.Printf("%d statements, %d failed, %d passed with a known difference, %.1f s\n",
		len(statements), failures, known, time.Since(t0).Seconds())
	if failures > 0 {
		teardown(s, t, j, ut)
		os.Exit(1)
	}
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "vitess-equivalence: "+format+"\n", a...)
	os.Exit(2)
}

// setup creates the two tables, gives them their primary vindex and loads them; the
// rows spread over both shards. Through Ferry: vtgate lets only the users of
// --vschema-ddl-authorized-users change the vschema, and its gRPC port (no auth in
// vttestserver) calls everyone `unsecure_grpc_client`.
func setup(s *sides, t, j, ut string) error {
	stmts := []string{
		`CREATE TABLE ` + t + ` (
  id BIGINT NOT NULL PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  b1 TINYINT(1), iz INT(5) ZEROFILL,
  d DECIMAL(20,6), d0 DECIMAL(5,0), f FLOAT, db DOUBLE, f2 FLOAT(7,3),
  c CHAR(10), vc VARCHAR(64), tx TEXT, tt TINYTEXT, lt LONGTEXT,
  bl BLOB, mb MEDIUMBLOB, bn BINARY(4), vb VARBINARY(16),
  cl VARCHAR(20) CHARACTER SET latin1, cb VARCHAR(20) COLLATE utf8mb4_bin,
  e ENUM('a','b','c') NOT NULL DEFAULT 'a', st SET('x','y','z'),
  bt BIT(8), b64 BIT(64), b1b BIT(1),
  y YEAR, dt DATE, tm TIME, tm3 TIME(3), dtm DATETIME, dtm6 DATETIME(6),
  ts TIMESTAMP NULL DEFAULT NULL, ts6 TIMESTAMP(6) NULL DEFAULT NULL,
  j JSON, nn VARCHAR(10) NOT NULL DEFAULT '',
  UNIQUE KEY uvc (vc)
)`,
		`ALTER VSCHEMA ON ` + t + ` ADD VINDEX hash(id)`,
		`CREATE TABLE ` + j + ` (id BIGINT NOT NULL PRIMARY KEY, ref INT, note VARCHAR(32))`,
		`ALTER VSCHEMA ON ` + j + ` ADD VINDEX hash(id)`,
		`INSERT INTO ` + t + ` (id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, b1, iz, d, d0, f, db, f2,
  c, vc, tx, tt, lt, bl, mb, bn, vb, cl, cb, e, st, bt, b64, b1b, y, dt, tm, tm3, dtm, dtm6, ts, ts6, j, nn) VALUES
 (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0, 0, 1,
  -99999999999999.999999, -99999, -3.40282e38, -1.7976931348623157e308, -9999.999,
  '', '', '', '', '', '', '', x'00', x'', 'caf` + "\xc3\xa9" + `', 'A', 'a', '', b'0', 0, b'0',
  1901, '1000-01-01', '-838:59:59', '-838:59:59.000', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000000',
  '1970-01-01 00:00:01', '1970-01-01 00:00:01.000000', '{}', 'min'),
 (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615, 1, 99999,
  99999999999999.999999, 99999, 3.40282e38, 1.7976931348623157e308, 9999.999,
  'zzzzzzzzzz', 'max', 'text', 'tiny', 'long', x'00ff00', x'deadbeef', x'ffffffff', x'000102', 'na` + "\xc3\xaf" + `ve', 'b', 'c', 'x,y,z', b'11111111', 18446744073709551615, b'1',
  2155, '9999-12-31', '838:59:59', '838:59:59.000', '9999-12-31 23:59:59', '9999-12-31 23:59:59.999999',
  '2038-01-19 03:14:07', '2038-01-19 03:14:07.999999', '[1, 2.5, "x", null, true, {"k": [1]}]', 'max')`,
		`INSERT INTO ` + t + ` (id) VALUES (3)`,
		`INSERT INTO ` + t + ` (id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, b1, iz, d, d0, f, db, f2,
  c, vc, tx, tt, lt, bl, mb, bn, vb, cl, cb, e, st, bt, b64, b1b, y, dt, tm, tm3, dtm, dtm6, ts, ts6, j, nn) VALUES
 (4, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1, 7, 1234.5, 12, 1.5, 0.1, 3.25,
  'abc', 'hello', 'tx "quoted"', 'a\tb', 'multi\nline', x'0a0d', x'00', x'61', x'62', 'x', 'Mixed', 'b', 'y', b'101', 256, b'1',
  2024, '2024-02-29', '12:34:56', '00:00:00.5', '2024-02-29 12:34:56', '2024-02-29 12:34:56.123456',
  '2024-02-29 12:34:56', '2024-02-29 12:34:56.654321', '{"a": 1, "b": "two", "c": [3]}', 'four')`,
		`INSERT INTO ` + t + ` (id, i, vc, d, e, dt) VALUES (5, 50, 'five', 5.5, 'c', '2020-05-05'),
 (6, 60, 'six', 6.25, 'a', '2020-06-06'), (7, 70, 'seven', 7, 'b', '2020-07-07'), (8, NULL, 'eight', NULL, 'c', NULL)`,
		`INSERT INTO ` + j + ` (id, ref, note) VALUES (1, 7, 'one'), (2, 50, 'two'), (4, 60, 'four'),
 (5, 70, 'five'), (9, 7, 'nine'), (10, NULL, NULL)`,
		// The unsharded keyspace: no vindex, one tablet answers (a passthrough plan).
		`CREATE TABLE ` + ut + ` (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  code CHAR(3) NOT NULL, amount DECIMAL(8,2), at DATETIME(3), flag BIT(1), UNIQUE KEY ucode (code))`,
		`INSERT INTO ` + ut + ` (code, amount, at, flag) VALUES ('aaa', 1.25, '2024-01-01 00:00:00.123', b'1'),
 ('bbb', NULL, NULL, b'0'), ('ccc', -3.50, '1999-12-31 23:59:59.999', NULL)`,
	}
	for _, q := range stmts {
		a := s.viaFerry(q)
		if a.transport != nil {
			return fmt.Errorf("%s: %v", strings.SplitN(q, "\n", 2)[0], a.transport)
		}
		if a.failed {
			return fmt.Errorf("%s: %s: %s", strings.SplitN(q, "\n", 2)[0], a.code, a.message)
		}
	}
	return nil
}

func teardown(s *sides, t, j, ut string) {
	for _, q := range []string{"DROP TABLE IF EXISTS " + t, "DROP TABLE IF EXISTS " + j, "DROP TABLE IF EXISTS " + ut,
		"ALTER VSCHEMA DROP TABLE " + t, "ALTER VSCHEMA DROP TABLE " + j} {
		s.viaFerry(q)
	}
}

// flagsZero explains the one known difference (README.md): a field vtgate makes with
// flags 0 goes out over its MySQL protocol with its type's flags (vitess
// writeColumnDefinition: sqltypes.TypeToMySQL, BINARY for DATE/TIME/DATETIME), so no
// MySQL client of vtgate can tell it from a field with those flags.
const flagsZero = "vtgate's MySQL protocol writes flags 0 as the type's own flags"

// corpus: the statements, run on both sides. Only statements whose answer does not
// depend on which side ran first (or on the clock): reads, failing writes, and writes
// that change nothing.
func corpus(t, j, ut string) []stmt {
	return []stmt{
		// Every column type, one shard at a time and scattered.
		{name: "select * extremes min (1 shard)", sql: "SELECT * FROM " + t + " WHERE id = 1"},
		{name: "select * extremes max (1 shard)", sql: "SELECT * FROM " + t + " WHERE id = 2"},
		{name: "select * all NULL (1 shard)", sql: "SELECT * FROM " + t + " WHERE id = 3"},
		{name: "select * ordinary (1 shard)", sql: "SELECT * FROM " + t + " WHERE id = 4"},
		// vttestserver runs vtgate without schema tracking: both refuse it (VT09015).
		{name: "select * scatter ORDER BY", sql: "SELECT * FROM " + t + " ORDER BY id"},
		{name: "select * empty", sql: "SELECT * FROM " + t + " WHERE id = 424242"},
		{name: "select columns qualified aliased", sql: "SELECT " + t + ".id, " + t + ".vc AS alias, x.d FROM " + t + " JOIN " + t + " AS x ON x.id = " + t + ".id WHERE x.id IN (1, 2) ORDER BY x.id"},
		{name: "integers", sql: "SELECT ti, tiu, si, siu, mi, miu, i, iu, bi, biu, b1, iz FROM " + t + " ORDER BY id"},
		{name: "decimal float double", sql: "SELECT d, d0, f, db, f2 FROM " + t + " ORDER BY id"},
		{name: "strings and binaries", sql: "SELECT c, vc, tx, tt, lt, bl, mb, bn, vb, cl, cb FROM " + t + " ORDER BY id"},
		{name: "enum set bit", sql: "SELECT e, st, bt, b64, b1b FROM " + t + " ORDER BY id"},
		{name: "temporal", sql: "SELECT y, dt, tm, tm3, dtm, dtm6, ts, ts6 FROM " + t + " ORDER BY id"},
		{name: "json", sql: "SELECT j, j->'$.a', j->>'$.b', JSON_TYPE(j) FROM " + t + " ORDER BY id"},
		// Literals and expressions (vtgate normalizes literals into bind variables).
		{name: "literal integers", sql: "SELECT 1, -1, 0, 127, 255, 9223372036854775807, -9223372036854775808, 18446744073709551615"},
		{name: "literal strings", sql: "SELECT 'abc', '', _latin1'x', _binary'y', x'4142', 0x43, b'1000001', N'nat'"},
		{name: "literal numbers", sql: "SELECT 1.5, -0.001, 1e3, 12345678901234567890.5, 3.0"},
		{name: "literal NULL TRUE FALSE", sql: "SELECT NULL, TRUE, FALSE, NULL IS NULL"},
		{name: "literal temporal", sql: "SELECT DATE '2024-01-02', TIME '12:00:01', TIMESTAMP '2024-01-02 03:04:05.678'"},
		{name: "casts", sql: "SELECT CAST(1 AS UNSIGNED), CAST('2024-01-02' AS DATE), CAST(2.5 AS DECIMAL(10,3)), CAST('x' AS BINARY), CONVERT('y' USING latin1), CAST(1 AS CHAR), CAST('1.5' AS DOUBLE), CAST('{}' AS JSON)"},
		{name: "functions", sql: "SELECT CONCAT(vc, '!'), LENGTH(tx), UPPER(c), HEX(bl), i + 1, i * 2.5, d / 3, DATE_ADD(dt, INTERVAL 1 DAY), COALESCE(i, -1) FROM " + t + " ORDER BY id"},
		{name: "select from dual", sql: "SELECT 42 AS answer FROM dual"},
		{name: "database()", sql: "SELECT DATABASE()"},
		// Aggregates across both shards (vtgate merges them).
		{name: "scatter COUNT(*)", sql: "SELECT COUNT(*) FROM " + t},
		{name: "scatter COUNT SUM MIN MAX", sql: "SELECT COUNT(i), SUM(i), MIN(bi), MAX(biu), MAX(id), MIN(dt), SUM(d) FROM " + t,
			known: &known{"field flags", `(min(dt)): ferry="128" vtgate="0"`, flagsZero}},
		{name: "scatter AVG", sql: "SELECT AVG(i), AVG(d) FROM " + t},
		{name: "scatter GROUP BY", sql: "SELECT e, COUNT(*), SUM(i), MAX(id) FROM " + t + " GROUP BY e ORDER BY e"},
		{name: "scatter COUNT DISTINCT", sql: "SELECT COUNT(DISTINCT e) FROM " + t},
		{name: "scatter DISTINCT", sql: "SELECT DISTINCT e FROM " + t + " ORDER BY e"},
		{name: "aggregate empty", sql: "SELECT COUNT(*), SUM(i), MAX(d) FROM " + t + " WHERE id > 1000"},
		// ORDER BY / LIMIT across shards.
		{name: "order by desc limit", sql: "SELECT id, vc FROM " + t + " ORDER BY id DESC LIMIT 3"},
		{name: "limit offset", sql: "SELECT id FROM " + t + " ORDER BY id LIMIT 2 OFFSET 3"},
		{name: "order by text column", sql: "SELECT id, vc FROM " + t + " WHERE vc IS NOT NULL ORDER BY vc"},
		{name: "order by two keys", sql: "SELECT e, id FROM " + t + " ORDER BY e DESC, id"},
		// Joins.
		{name: "join on vindex (pushed down)", sql: "SELECT a.id, a.vc, b.note FROM " + t + " a JOIN " + j + " b ON a.id = b.id ORDER BY a.id"},
		{name: "join across shards", sql: "SELECT a.id, a.i, b.id, b.note FROM " + t + " a JOIN " + j + " b ON a.i = b.ref ORDER BY a.id, b.id"},
		{name: "left join", sql: "SELECT a.id, b.note FROM " + t + " a LEFT JOIN " + j + " b ON a.id = b.id ORDER BY a.id"},
		{name: "subquery IN", sql: "SELECT id FROM " + t + " WHERE id IN (SELECT id FROM " + j + ") ORDER BY id"},
		// The unsharded keyspace.
		{name: "unsharded select *", sql: "SELECT * FROM " + ut + " ORDER BY id"},
		{name: "unsharded aggregates", sql: "SELECT COUNT(*), SUM(amount), MAX(at), MIN(code) FROM " + ut,
			known: &known{"field flags", `(max(at)): ferry="128" vtgate="0"`, flagsZero}},
		{name: "unsharded join sharded", sql: "SELECT u.code, a.vc FROM " + ut + " u JOIN " + t + " a ON a.id = u.id ORDER BY u.id"},
		// Writes that change nothing.
		{name: "update matching no row", sql: "UPDATE " + t + " SET vc = 'x' WHERE id = 424242"},
		{name: "update to same value", sql: "UPDATE " + j + " SET note = note WHERE id IN (1, 2)"},
		{name: "delete no row", sql: "DELETE FROM " + j + " WHERE id = 424242"},
		// Errors: both must fail with the same vtrpc code.
		{name: "error: syntax", sql: "selec 1"},
		{name: "error: unknown table", sql: "SELECT * FROM no_such_table_eq"},
		{name: "error: unknown keyspace", sql: "SELECT * FROM no_such_keyspace_eq.t"},
		{name: "error: unknown table unsharded", sql: "SELECT * FROM " + strings.SplitN(ut, ".", 2)[0] + ".no_such_table_eq"},
		{name: "error: unknown column scatter", sql: "SELECT a.no_such_column FROM " + t + " a JOIN " + j + " b ON a.i = b.ref"},
		{name: "error: unknown column planner", sql: "SELECT " + t + ".id FROM " + t + " AS x WHERE x.id = 1"},
		{name: "error: unknown column", sql: "SELECT no_such_column FROM " + t + " WHERE id = 1"},
		{name: "error: duplicate key", sql: "INSERT INTO " + t + " (id, vc) VALUES (1, 'dup')"},
		{name: "error: duplicate unique key", sql: "INSERT INTO " + ut + " (code) VALUES ('aaa')"},
		{name: "error: data too long", sql: "INSERT INTO " + t + " (id, c) VALUES (1002, 'this is too long for ten')"},
		{name: "error: out of range", sql: "INSERT INTO " + t + " (id, ti) VALUES (1003, 1000)"},
		{name: "error: NOT NULL", sql: "INSERT INTO " + t + " (id, nn) VALUES (1004, NULL)"},
		{name: "error: bad JSON", sql: "INSERT INTO " + t + " (id, j) VALUES (1005, '{bad')"},
		{name: "error: unknown function", sql: "SELECT no_such_function_eq(1)"},
	}
}
