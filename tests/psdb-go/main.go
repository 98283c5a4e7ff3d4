// PlanetScale's own Go client library (github.com/planetscale/psdb, package core/client,
// built on connect-go) against a Ferry gateway, with the library's DEFAULT settings:
// Connect protocol, binary proto, and every request compressed with S2 ("s2").
//
//	FERRY_URL=https://127.0.0.1:18443 FERRY_USER=ferry FERRY_PASSWORD=ferry \
//	FERRY_CA=.run/e2e/certs/ca.pem go run .
//
// HTTP/2 uses the library's own default transport, untouched; HTTP/3 passes an
// http.Client over quic-go's http3.Transport through client.WithHTTPClient, the
// library's documented injection point. FERRY_PSDB_TRANSPORTS=h2,h3 (default) picks them.
// One line per check; exits non-zero if any check fails.
//
// FERRY_PSDB_VITESS=1 (tests/vitess-clients.sh): the gateway is in front of Vitess's vtgate,
// database = the sharded keyspace. Tables get a primary vindex (hash(id)) and AUTO_INCREMENT
// a Vitess sequence in the unsharded keyspace (FERRY_VITESS_UNSHARDED_KEYSPACE, default
// ferry_unsharded); a missing table is vtgate's "table X not found"; the 50,000 streamed rows
// come from a sharded table (a scatter merge-sorted by vtgate) instead of a CTE cross join,
// which vtgate 24 cannot plan ("missing bind var a_n").
//
// DEBUG ONLY, never used by the test suite: FERRY_PSDB_IDENTITY=1 sends requests
// uncompressed (connect.WithSendCompression("identity")), to exercise everything
// else against a gateway that does not decode S2 yet.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/crc64"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/planetscale/psdb/auth"
	psdbclient "github.com/planetscale/psdb/core/client"
	psdbv1alpha1 "github.com/planetscale/psdb/types/psdb/v1alpha1"
	"github.com/planetscale/psdb/types/psdb/v1alpha1/psdbv1alpha1connect"
	querypb "github.com/planetscale/vitess-types/gen/vitess/query/v21"
	"github.com/quic-go/quic-go/http3"
)

type config struct {
	addr      string // host:port; the library always prepends https://
	user, pw  string
	tls       *tls.Config
	identity  bool
	transport string
	vitess    bool   // FERRY_PSDB_VITESS=1
	unsharded string // Vitess's unsharded keyspace (sequences)
}

var failures int

func pass(tr, name, format string, a ...any) {
	fmt.Printf("PASS %s %-34s %s\n", tr, name, fmt.Sprintf(format, a...))
}

func fail(tr, name, format string, a ...any) {
	failures++
	fmt.Printf("FAIL %s %-34s %s\n", tr, name, fmt.Sprintf(format, a...))
}

func main() {
	cfg, err := loadConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "psdb-go:", err)
		os.Exit(2)
	}
	// No deadline goes on the calls (the library sets none and psdbproxy sets none, so
	// no Connect-Timeout-Ms is sent); a watchdog ends a hung run instead.
	time.AfterFunc(10*time.Minute, func() {
		fmt.Println("FAIL watchdog: no result after 10 minutes")
		os.Exit(1)
	})
	if cfg.identity {
		fmt.Println("NOTE FERRY_PSDB_IDENTITY=1: requests are sent UNCOMPRESSED (debug only; not the library default, not the test)")
	}
	for _, tr := range strings.Split(envOr("FERRY_PSDB_TRANSPORTS", "h2,h3"), ",") {
		tr = strings.TrimSpace(tr)
		switch tr {
		case "h2", "h3":
			c := cfg
			c.transport = tr
			run(c)
		case "":
		default:
			fmt.Fprintf(os.Stderr, "psdb-go: unknown transport %q (h2, h3)\n", tr)
			os.Exit(2)
		}
	}
	if failures > 0 {
		fmt.Printf("psdb-go: %d check(s) FAILED\n", failures)
		os.Exit(1)
	}
	fmt.Println("psdb-go: all checks passed")
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func loadConfig() (config, error) {
	var c config
	raw := envOr("FERRY_URL", "https://127.0.0.1:8443")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return c, fmt.Errorf("FERRY_URL must be https://host:port, got %q", raw)
	}
	c.addr = u.Host
	c.user = envOr("FERRY_USER", "ferry")
	c.pw = envOr("FERRY_PASSWORD", "ferry")
	if ca := os.Getenv("FERRY_CA"); ca != "" {
		c.tls, err = psdbclient.TLSConfigWithRoot(ca)
		if err != nil {
			return c, fmt.Errorf("FERRY_CA %s: %w", ca, err)
		}
	} else {
		c.tls = psdbclient.DefaultTLSConfig()
	}
	c.identity = os.Getenv("FERRY_PSDB_IDENTITY") == "1"
	c.vitess = os.Getenv("FERRY_PSDB_VITESS") == "1"
	c.unsharded = envOr("FERRY_VITESS_UNSHARDED_KEYSPACE", "ferry_unsharded")
	return c, nil
}

// encodingRecorder notes the request encodings actually put on the wire (HTTP/3 only:
// over HTTP/2 the library's own transport is used as is).
type encodingRecorder struct {
	inner connect.HTTPClient
	mu    sync.Mutex
	seen  map[string]int
}

func (r *encodingRecorder) Do(req *http.Request) (*http.Response, error) {
	enc := req.Header.Get("Content-Encoding")
	if e := req.Header.Get("Connect-Content-Encoding"); e != "" {
		enc = e
	}
	if enc == "" {
		enc = "identity"
	}
	r.mu.Lock()
	r.seen[enc]++
	r.mu.Unlock()
	return r.inner.Do(req)
}

type env struct {
	cfg config
	db  psdbv1alpha1connect.DatabaseClient
	bad psdbv1alpha1connect.DatabaseClient // wrong password
	rec *encodingRecorder
	tr  string
}

func newClient(cfg config, user, pw string, hc connect.HTTPClient) psdbv1alpha1connect.DatabaseClient {
	opts := []psdbclient.Option{psdbclient.WithTLSConfig(cfg.tls)}
	if hc != nil {
		opts = append(opts, psdbclient.WithHTTPClient(hc))
	}
	if cfg.identity {
		opts = append(opts, psdbclient.WithExtraClientOptions(connect.WithSendCompression("identity")))
	}
	return psdbclient.New(cfg.addr, psdbv1alpha1connect.NewDatabaseClient, auth.NewBasicAuth(user, pw), opts...)
}

func run(cfg config) {
	e := &env{cfg: cfg, tr: cfg.transport}
	switch cfg.transport {
	case "h2":
		fmt.Printf("---- HTTP/2 (library default transport) https://%s\n", cfg.addr)
		e.db = newClient(cfg, cfg.user, cfg.pw, nil)
		e.bad = newClient(cfg, cfg.user, cfg.pw+"-wrong", nil)
	case "h3":
		fmt.Printf("---- HTTP/3 (quic-go http3.Transport via client.WithHTTPClient) https://%s\n", cfg.addr)
		h3 := &http3.Transport{TLSClientConfig: cfg.tls.Clone(), DisableCompression: true}
		defer h3.Close()
		e.rec = &encodingRecorder{inner: &http.Client{Transport: h3}, seen: map[string]int{}}
		e.db = newClient(cfg, cfg.user, cfg.pw, e.rec)
		e.bad = newClient(cfg, cfg.user, cfg.pw+"-wrong", e.rec)
	}
	ctx := context.Background()
	if !e.checkCreateSession(ctx) {
		fail(e.tr, "(remaining checks not run)", "every call is refused, see CreateSession above")
		return
	}
	e.checkTypes(ctx)
	e.checkSQLError(ctx)
	e.checkBadPassword(ctx)
	e.checkStreamSeq(ctx)
	e.checkLargeRows(ctx)
	e.checkStreamErrors(ctx)
	e.checkTransaction(ctx)
	if e.rec != nil {
		e.rec.mu.Lock()
		seen := fmt.Sprint(e.rec.seen)
		want := "s2"
		if cfg.identity {
			want = "identity"
		}
		ok := len(e.rec.seen) == 1 && e.rec.seen[want] > 0
		e.rec.mu.Unlock()
		if ok {
			pass(e.tr, "request encoding", "every request went out as %s %s", want, seen)
		} else {
			fail(e.tr, "request encoding", "want only %s, saw %s", want, seen)
		}
	}
}

// ---- helpers ----

func describe(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("connect error code=%s message=%q", ce.Code(), ce.Message())
	}
	return err.Error()
}

// execute runs one statement with Execute; a transport error or an SQL error is an error.
func (e *env) execute(ctx context.Context, sess *psdbv1alpha1.Session, q string) (*psdbv1alpha1.ExecuteResponse, error) {
	resp, err := e.db.Execute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{Session: sess, Query: q}))
	if err != nil {
		return nil, errors.New(describe(err))
	}
	if resp.Msg.GetError() != nil {
		return resp.Msg, fmt.Errorf("SQL error %s: %s", resp.Msg.Error.GetCode(), resp.Msg.Error.GetMessage())
	}
	return resp.Msg, nil
}

// streamed is everything a StreamExecute call returned.
type streamed struct {
	msgs      int
	fields    []*querypb.Field
	fieldsMsg int // index of the message that carried the fields (-1: none)
	rows      []*querypb.Row
	session   *psdbv1alpha1.Session
	sqlErr    *psdbv1alpha1.ExecuteResponse
	err       error // the end-of-stream error (connect error), if any
}

// stream consumes StreamExecute the way psdbproxy does: any message may carry a
// session, an error or a result; the first result's fields describe every chunk.
// onRow, when set, sees each row as it arrives and the rows are not kept.
func (e *env) stream(ctx context.Context, sess *psdbv1alpha1.Session, q string, onRow func(*querypb.Row)) streamed {
	out := streamed{fieldsMsg: -1}
	s, err := e.db.StreamExecute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{Session: sess, Query: q}))
	if err != nil {
		out.err = err
		return out
	}
	defer s.Close()
	for s.Receive() {
		m := s.Msg()
		if m.Session != nil {
			out.session = m.Session
			m.Session = nil // Msg() is reused by connect-go between calls to Receive
		}
		if m.Error != nil && out.sqlErr == nil {
			out.sqlErr = &psdbv1alpha1.ExecuteResponse{Error: m.Error}
		}
		if r := m.Result; r != nil {
			if out.fields == nil && len(r.Fields) > 0 {
				out.fields = r.Fields
				out.fieldsMsg = out.msgs
			}
			for _, row := range r.Rows {
				if onRow != nil {
					onRow(row)
				} else {
					out.rows = append(out.rows, row)
				}
			}
			m.Result = nil
		}
		m.Error = nil
		out.msgs++
	}
	out.err = s.Err()
	return out
}

// values splits a vitess Row into its column values; nil is SQL NULL.
func values(r *querypb.Row) ([][]byte, error) {
	out := make([][]byte, 0, len(r.Lengths))
	off := int64(0)
	for _, l := range r.Lengths {
		if l < 0 {
			out = append(out, nil)
			continue
		}
		if off+l > int64(len(r.Values)) {
			return nil, fmt.Errorf("row lengths %v overrun %d value bytes", r.Lengths, len(r.Values))
		}
		out = append(out, r.Values[off:off+l:off+l])
		off += l
	}
	if off != int64(len(r.Values)) {
		return nil, fmt.Errorf("row lengths %v leave %d of %d value bytes unused", r.Lengths, int64(len(r.Values))-off, len(r.Values))
	}
	return out, nil
}

func unique(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000_000)
}

func (e *env) drop(ctx context.Context, table string) {
	_, _ = e.execute(ctx, nil, "DROP TABLE IF EXISTS "+table)
}

// createTable: CREATE TABLE name (cols) suffix. On Vitess the table is sharded by hash(id),
// and with autoInc its id comes from a Vitess sequence (as on PlanetScale: each shard's
// own AUTO_INCREMENT would repeat ids).
func (e *env) createTable(ctx context.Context, name, cols, suffix string, autoInc bool) error {
	stmts := []string{"CREATE TABLE " + name + " (" + cols + ") " + suffix}
	if e.cfg.vitess {
		stmts = append(stmts, "ALTER VSCHEMA ON "+name+" ADD VINDEX hash(id)")
		if autoInc {
			seq := e.cfg.unsharded + "." + name + "_seq"
			stmts = append(stmts,
				"CREATE TABLE "+seq+" (id INT, next_id BIGINT, cache BIGINT, PRIMARY KEY (id)) COMMENT 'vitess_sequence'",
				"INSERT INTO "+seq+" (id, next_id, cache) VALUES (0, 1, 100)",
				"ALTER VSCHEMA ADD SEQUENCE "+seq,
				"ALTER VSCHEMA ON "+name+" ADD AUTO_INCREMENT id USING "+seq)
		}
	}
	for _, q := range stmts {
		if _, err := e.execute(ctx, nil, q); err != nil {
			return fmt.Errorf("%.60s...: %w", q, err)
		}
	}
	return nil
}

// missingTable: the text an error about the missing table `name` carries (MySQL's, or
// vtgate's own, which answers before any tablet does).
func (e *env) missingTable(name string) string {
	if e.cfg.vitess {
		return "table " + name + " not found"
	}
	return "doesn't exist"
}

// ---- checks ----

// CreateSession: what psdbproxy calls first to test its credentials. Its request is an
// empty message, which the library sends as Content-Encoding: s2 with an empty body.
func (e *env) checkCreateSession(ctx context.Context) bool {
	resp, err := e.db.CreateSession(ctx, connect.NewRequest(&psdbv1alpha1.CreateSessionRequest{}))
	if err != nil {
		fail(e.tr, "CreateSession", "%s", describe(err))
		// Go on only if plain calls work (then only CreateSession is broken); when every
		// call fails the same way (say, S2 refused) the other checks would just repeat it.
		_, err2 := e.execute(ctx, nil, "SELECT 1")
		return err2 == nil
	}
	if resp.Msg.GetSession() == nil {
		fail(e.tr, "CreateSession", "no session in the answer")
		return true
	}
	if u := resp.Msg.GetUser().GetUsername(); u != "" && u != e.cfg.user {
		fail(e.tr, "CreateSession", "user.username=%q, want %q", u, e.cfg.user)
		return true
	}
	pass(e.tr, "CreateSession", "session returned (user %q)", resp.Msg.GetUser().GetUsername())
	return true
}

type col struct {
	name string
	typ  querypb.Type
	vals []any // per inserted row: string (exact text), []byte, or nil for NULL
}

// Execute: a table of varied types, written and read back byte-exact.
func (e *env) checkTypes(ctx context.Context) {
	t := unique("psdbgo_types")
	const name = "Execute types round trip"
	err := e.createTable(ctx, t, `
		id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		ti TINYINT, si SMALLINT, bi BIGINT, u INT UNSIGNED, ubi BIGINT UNSIGNED,
		d DECIMAL(15,4), f DOUBLE,
		s VARCHAR(64) CHARACTER SET utf8mb4, c CHAR(3),
		b BLOB, vb VARBINARY(16),
		dt DATETIME, dt6 DATETIME(6), da DATE, tm TIME, y YEAR
	`, "DEFAULT CHARSET=utf8mb4", true)
	if err != nil {
		fail(e.tr, "Execute CREATE TABLE", "%v", err)
		return
	}
	defer e.drop(ctx, t)
	pass(e.tr, "Execute CREATE TABLE", "%s", t)

	bin := []byte{0x00, 0xff, 0x80, 0x7f, '\'', '\\', '"', 0x0a, 0x0d, 0x1a, 0xc3, 0x28, 0x00}
	uni := "héllo wörld ✓ 日本語 🚀"
	ins, err := e.execute(ctx, nil, "INSERT INTO "+t+` (ti, si, bi, u, ubi, d, f, s, c, b, vb, dt, dt6, da, tm, y) VALUES
		(-128, -32768, -9223372036854775808, 4294967295, 18446744073709551615, -12345678901.2345, -0.5,
		 '`+uni+`', 'abc', X'`+fmt.Sprintf("%X", bin)+`', X'00FF', '2024-02-29 23:59:58', '1999-12-31 23:59:59.123456',
		 '2024-02-29', '-838:59:59', 2155),
		(127, 32767, 9223372036854775807, 0, 0, 0.0001, 1e300, '', '', X'', X'', '1000-01-01 00:00:00',
		 '9999-12-31 23:59:59.999999', '1000-01-01', '00:00:00', 1901),
		(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`)
	if err != nil {
		fail(e.tr, "Execute INSERT", "%v", err)
		return
	}
	if ra, id := ins.GetResult().GetRowsAffected(), ins.GetResult().GetInsertId(); ra != 3 || id != 1 {
		fail(e.tr, "Execute INSERT", "rows_affected=%d insert_id=%d, want 3 and 1", ra, id)
	} else {
		pass(e.tr, "Execute INSERT", "rows_affected=3 insert_id=1")
	}

	cols := []col{
		{"id", querypb.Type_INT32, []any{"1", "2", "3"}},
		{"ti", querypb.Type_INT8, []any{"-128", "127", nil}},
		{"si", querypb.Type_INT16, []any{"-32768", "32767", nil}},
		{"bi", querypb.Type_INT64, []any{"-9223372036854775808", "9223372036854775807", nil}},
		{"u", querypb.Type_UINT32, []any{"4294967295", "0", nil}},
		{"ubi", querypb.Type_UINT64, []any{"18446744073709551615", "0", nil}},
		{"d", querypb.Type_DECIMAL, []any{"-12345678901.2345", "0.0001", nil}},
		{"f", querypb.Type_FLOAT64, []any{"-0.5", "1e300", nil}},
		{"s", querypb.Type_VARCHAR, []any{uni, "", nil}},
		{"c", querypb.Type_CHAR, []any{"abc", "", nil}},
		{"b", querypb.Type_BLOB, []any{bin, []byte{}, nil}},
		{"vb", querypb.Type_VARBINARY, []any{[]byte{0x00, 0xff}, []byte{}, nil}},
		{"dt", querypb.Type_DATETIME, []any{"2024-02-29 23:59:58", "1000-01-01 00:00:00", nil}},
		{"dt6", querypb.Type_DATETIME, []any{"1999-12-31 23:59:59.123456", "9999-12-31 23:59:59.999999", nil}},
		{"da", querypb.Type_DATE, []any{"2024-02-29", "1000-01-01", nil}},
		{"tm", querypb.Type_TIME, []any{"-838:59:59", "00:00:00", nil}},
		{"y", querypb.Type_YEAR, []any{"2155", "1901", nil}},
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	q := "SELECT " + strings.Join(names, ", ") + " FROM " + t + " ORDER BY id"
	sel, err := e.execute(ctx, nil, q)
	if err != nil {
		fail(e.tr, "Execute SELECT", "%v", err)
		return
	}
	compareResult(e.tr, "Execute SELECT", cols, sel.GetResult().GetFields(), sel.GetResult().GetRows())
	if sel.GetTiming() <= 0 {
		fail(e.tr, "Execute timing", "timing=%v, want > 0 seconds", sel.GetTiming())
	} else {
		pass(e.tr, "Execute timing", "%.6f s", sel.GetTiming())
	}

	// The same rows through StreamExecute.
	st := e.stream(ctx, nil, q, nil)
	if st.err != nil || st.sqlErr != nil {
		fail(e.tr, "StreamExecute SELECT types", "err=%v sqlErr=%v", errString(st.err), st.sqlErr.GetError())
		return
	}
	compareResult(e.tr, "StreamExecute SELECT types", cols, st.fields, st.rows)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return describe(err)
}

func compareResult(tr, name string, cols []col, fields []*querypb.Field, rows []*querypb.Row) {
	var problems []string
	if len(fields) != len(cols) {
		problems = append(problems, fmt.Sprintf("%d fields, want %d", len(fields), len(cols)))
	} else {
		for i, c := range cols {
			if fields[i].GetName() != c.name || fields[i].GetType() != c.typ {
				problems = append(problems, fmt.Sprintf("field %d = %s %s, want %s %s", i,
					fields[i].GetName(), fields[i].GetType(), c.name, c.typ))
			}
		}
	}
	nrows := len(cols[0].vals)
	if len(rows) != nrows {
		problems = append(problems, fmt.Sprintf("%d rows, want %d", len(rows), nrows))
	} else {
		for r := 0; r < nrows; r++ {
			vals, err := values(rows[r])
			if err != nil {
				problems = append(problems, fmt.Sprintf("row %d: %v", r, err))
				continue
			}
			if len(vals) != len(cols) {
				problems = append(problems, fmt.Sprintf("row %d has %d values, want %d", r, len(vals), len(cols)))
				continue
			}
			for i, c := range cols {
				got := vals[i]
				switch want := c.vals[r].(type) {
				case nil:
					if got != nil {
						problems = append(problems, fmt.Sprintf("row %d %s = %q, want NULL", r, c.name, got))
					}
				case string:
					if got == nil || string(got) != want {
						problems = append(problems, fmt.Sprintf("row %d %s = %s, want %q", r, c.name, show(got), want))
					}
				case []byte:
					if got == nil || !bytes.Equal(got, want) {
						problems = append(problems, fmt.Sprintf("row %d %s = %s, want %x", r, c.name, show(got), want))
					}
				}
			}
		}
	}
	if len(problems) > 0 {
		fail(tr, name, "%s", strings.Join(problems, "; "))
		return
	}
	pass(tr, name, "%d columns x %d rows byte-exact, field names and types match", len(cols), nrows)
}

func show(b []byte) string {
	if b == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", b)
}

// Execute: an SQL error is the MySQL message in ExecuteResponse.error, and the client goes on.
func (e *env) checkSQLError(ctx context.Context) {
	resp, err := e.db.Execute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{Query: "SELECT * FROM no_such_table_psdbgo"}))
	switch {
	case err != nil:
		fail(e.tr, "Execute SQL error", "a transport error instead of ExecuteResponse.error: %s", describe(err))
	case resp.Msg.GetError() == nil:
		fail(e.tr, "Execute SQL error", "no error for a missing table")
	case !strings.Contains(resp.Msg.Error.GetMessage(), e.missingTable("no_such_table_psdbgo")):
		fail(e.tr, "Execute SQL error", "message %q lacks the MySQL text", resp.Msg.Error.GetMessage())
	default:
		pass(e.tr, "Execute SQL error", "code=%s message=%q", resp.Msg.Error.GetCode(), resp.Msg.Error.GetMessage())
	}
	if r, err := e.execute(ctx, nil, "SELECT 2 AS two"); err != nil || len(r.GetResult().GetRows()) != 1 {
		fail(e.tr, "Execute after an SQL error", "%v", err)
	} else {
		pass(e.tr, "Execute after an SQL error", "next statement works")
	}
}

// A wrong password is refused as unauthenticated, by Execute and by StreamExecute.
func (e *env) checkBadPassword(ctx context.Context) {
	_, err := e.bad.Execute(ctx, connect.NewRequest(&psdbv1alpha1.ExecuteRequest{Query: "SELECT 1"}))
	if connect.CodeOf(err) == connect.CodeUnauthenticated {
		pass(e.tr, "Execute bad password", "%s", describe(err))
	} else {
		fail(e.tr, "Execute bad password", "want unauthenticated, got %s", errString(err))
	}
	st := (&env{db: e.bad}).stream(ctx, nil, "SELECT 1", nil)
	if connect.CodeOf(st.err) == connect.CodeUnauthenticated && len(st.rows) == 0 {
		pass(e.tr, "StreamExecute bad password", "%s", describe(st.err))
	} else {
		fail(e.tr, "StreamExecute bad password", "want unauthenticated and no rows, got %s (%d rows)", errString(st.err), len(st.rows))
	}
}

const seqRows = 50_000

// seqQuery yields n = 1..50000 in order and s = 'row-<n>' (digit cross join; portable, no recursion limit).
const seqQuery = `WITH d(n) AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
  UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9),
seq(n) AS (SELECT a.n + 10*b.n + 100*c.n + 1000*e.n + 10000*f.n + 1 FROM d a, d b, d c, d e, d f)
SELECT n, CONCAT('row-', n) AS s FROM seq WHERE n <= 50000 ORDER BY n`

// seqTable (Vitess): a table of the sharded keyspace holding n = 1..50000 (hash(n), so
// about half on each shard), written 10,000 rows a statement.
func (e *env) seqTable(ctx context.Context) (string, error) {
	t := unique("psdbgo_seq")
	if _, err := e.execute(ctx, nil, "CREATE TABLE "+t+" (n BIGINT NOT NULL PRIMARY KEY)"); err != nil {
		return "", fmt.Errorf("CREATE TABLE: %w", err)
	}
	if _, err := e.execute(ctx, nil, "ALTER VSCHEMA ON "+t+" ADD VINDEX hash(n)"); err != nil {
		return "", fmt.Errorf("ALTER VSCHEMA: %w", err)
	}
	var b strings.Builder
	for n := 1; n <= seqRows; n++ {
		if b.Len() == 0 {
			b.WriteString("INSERT INTO " + t + " (n) VALUES ")
		} else {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d)", n)
		if n%10_000 == 0 {
			if _, err := e.execute(ctx, nil, b.String()); err != nil {
				return "", fmt.Errorf("INSERT rows up to %d: %w", n, err)
			}
			b.Reset()
		}
	}
	return t, nil
}

// StreamExecute: 50,000 rows, complete, in order, checksummed.
func (e *env) checkStreamSeq(ctx context.Context) {
	const name = "StreamExecute 50,000 rows"
	tab := crc64.MakeTable(crc64.ECMA)
	var got, want uint64
	count, outOfOrder, bad := 0, 0, ""
	q := seqQuery
	if e.cfg.vitess {
		t, err := e.seqTable(ctx)
		if err != nil {
			fail(e.tr, name, "%v", err)
			return
		}
		defer e.drop(ctx, t)
		q = "SELECT n, CONCAT('row-', n) AS s FROM " + t + " ORDER BY n"
	}
	start := time.Now()
	st := e.stream(ctx, nil, q, func(r *querypb.Row) {
		count++
		vals, err := values(r)
		if err != nil || len(vals) != 2 {
			if bad == "" {
				bad = fmt.Sprintf("row %d: %v (%d values)", count, err, len(vals))
			}
			return
		}
		if string(vals[0]) != strconv.Itoa(count) {
			outOfOrder++
		}
		got = crc64.Update(got, tab, vals[0])
		got = crc64.Update(got, tab, []byte{0})
		got = crc64.Update(got, tab, vals[1])
		got = crc64.Update(got, tab, []byte{1})
	})
	for n := 1; n <= seqRows; n++ {
		s := strconv.Itoa(n)
		want = crc64.Update(want, tab, []byte(s))
		want = crc64.Update(want, tab, []byte{0})
		want = crc64.Update(want, tab, []byte("row-"+s))
		want = crc64.Update(want, tab, []byte{1})
	}
	elapsed := time.Since(start)
	switch {
	case st.err != nil:
		fail(e.tr, name, "stream error after %d rows: %s", count, describe(st.err))
	case st.sqlErr != nil:
		fail(e.tr, name, "SQL error: %s", st.sqlErr.GetError().GetMessage())
	case bad != "":
		fail(e.tr, name, "%s", bad)
	case count != seqRows || outOfOrder != 0 || got != want:
		fail(e.tr, name, "%d rows (want %d), %d out of order, crc64 %016x (want %016x)", count, seqRows, outOfOrder, got, want)
	case len(st.fields) != 2 || st.fields[0].GetName() != "n" || st.fields[0].GetType() != querypb.Type_INT64 ||
		st.fields[1].GetName() != "s" || st.fields[1].GetType() != querypb.Type_VARCHAR:
		fail(e.tr, name, "fields %v, want n INT64, s VARCHAR", st.fields)
	default:
		pass(e.tr, name, "%d rows in order, crc64 %016x, %d messages (fields in message %d), %.2fs",
			count, got, st.msgs, st.fieldsMsg, elapsed.Seconds())
	}
}

// Large rows: each ~1.2 MB, so S2 spans several 1 MiB blocks both ways. The INSERTs are
// >1 MiB requests (multi-block S2 request bodies); the reads come back through Execute
// and StreamExecute and are compared byte for byte.
func (e *env) checkLargeRows(ctx context.Context) {
	t := unique("psdbgo_big")
	if err := e.createTable(ctx, t, "id INT PRIMARY KEY, body LONGTEXT CHARACTER SET ascii, bin LONGBLOB", "", false); err != nil {
		fail(e.tr, "large rows CREATE TABLE", "%v", err)
		return
	}
	defer e.drop(ctx, t)
	rng := rand.New(rand.NewPCG(42, uint64(os.Getpid())))
	const n, size = 3, 1_200_000
	bodies := make([][]byte, n)
	bins := make([][]byte, n)
	for i := range bodies {
		// Text that compresses somewhat (words from a small alphabet), and random binary
		// that does not compress at all (S2 stores it as uncompressed chunks).
		b := make([]byte, size)
		for j := range b {
			b[j] = "abcdefgh ijklmnop"[rng.IntN(17)]
		}
		bodies[i] = b
		bins[i] = make([]byte, size/4)
		for j := range bins[i] {
			bins[i][j] = byte(rng.Uint32())
		}
		q := fmt.Sprintf("INSERT INTO %s (id, body, bin) VALUES (%d, '%s', X'%X')", t, i+1, b, bins[i])
		if _, err := e.execute(ctx, nil, q); err != nil {
			fail(e.tr, "Execute INSERT ~1.8 MB statements", "row %d: %v", i+1, err)
			return
		}
	}
	pass(e.tr, "Execute INSERT ~1.8 MB statements", "%d statements, each >1 MiB (multi-block S2 request bodies)", n)

	check := func(name string, fields []*querypb.Field, rows []*querypb.Row) {
		if len(rows) != n {
			fail(e.tr, name, "%d rows, want %d", len(rows), n)
			return
		}
		for i, r := range rows {
			v, err := values(r)
			if err != nil || len(v) != 3 || string(v[0]) != strconv.Itoa(i+1) || !bytes.Equal(v[1], bodies[i]) || !bytes.Equal(v[2], bins[i]) {
				fail(e.tr, name, "row %d differs (err=%v, %d values)", i+1, err, len(v))
				return
			}
		}
		if len(fields) != 3 || fields[1].GetType() != querypb.Type_TEXT || fields[2].GetType() != querypb.Type_BLOB {
			fail(e.tr, name, "fields %v, want id, body TEXT, bin BLOB", fields)
			return
		}
		pass(e.tr, name, "%d rows of %d+%d bytes byte-exact", n, size, size/4)
	}
	q := "SELECT id, body, bin FROM " + t + " ORDER BY id"
	if r, err := e.execute(ctx, nil, q); err != nil {
		fail(e.tr, "Execute SELECT large rows", "%v", err)
	} else {
		check("Execute SELECT large rows", r.GetResult().GetFields(), r.GetResult().GetRows())
	}
	st := e.stream(ctx, nil, q, nil)
	if st.err != nil || st.sqlErr != nil {
		fail(e.tr, "StreamExecute large rows", "err=%s sqlErr=%v", errString(st.err), st.sqlErr.GetError())
		return
	}
	check("StreamExecute large rows", st.fields, st.rows)
}

// StreamExecute errors: an SQL error reaches the client with the MySQL message, in
// ExecuteResponse.error or as the end-of-stream error, and no rows.
func (e *env) checkStreamErrors(ctx context.Context) {
	st := e.stream(ctx, nil, "SELECT * FROM no_such_table_psdbgo", nil)
	msg := ""
	switch {
	case st.sqlErr != nil:
		msg = st.sqlErr.GetError().GetMessage()
	case st.err != nil:
		var ce *connect.Error
		if errors.As(st.err, &ce) {
			msg = ce.Message()
		}
	}
	if strings.Contains(msg, e.missingTable("no_such_table_psdbgo")) && len(st.rows) == 0 {
		where := "ExecuteResponse.error"
		if st.sqlErr == nil {
			where = "end-of-stream error " + connect.CodeOf(st.err).String()
		}
		pass(e.tr, "StreamExecute SQL error", "%s: %q", where, msg)
	} else {
		fail(e.tr, "StreamExecute SQL error", "sqlErr=%v err=%s rows=%d", st.sqlErr.GetError(), errString(st.err), len(st.rows))
	}
}

// A transaction carried across calls by the session the answers return.
func (e *env) checkTransaction(ctx context.Context) {
	t := unique("psdbgo_txn")
	if err := e.createTable(ctx, t, "id INT PRIMARY KEY, v VARCHAR(10)", "", false); err != nil {
		fail(e.tr, "transaction CREATE TABLE", "%v", err)
		return
	}
	defer e.drop(ctx, t)
	count := func(sess *psdbv1alpha1.Session) (string, *psdbv1alpha1.Session, error) {
		r, err := e.execute(ctx, sess, "SELECT COUNT(*) FROM "+t)
		if err != nil {
			return "", nil, err
		}
		v, err := values(r.GetResult().GetRows()[0])
		if err != nil {
			return "", nil, err
		}
		return string(v[0]), r.GetSession(), nil
	}

	r, err := e.execute(ctx, nil, "BEGIN")
	if err != nil {
		fail(e.tr, "session BEGIN", "%v", err)
		return
	}
	sess := r.GetSession()
	if !sess.GetVitessSession().GetInTransaction() {
		fail(e.tr, "session BEGIN", "the session after BEGIN has in_transaction=false (session %v)", sess)
		return
	}
	pass(e.tr, "session BEGIN", "in_transaction=true")
	// psdbproxy reads Session.vitess_session.options.workload on every statement and
	// dereferences options unchecked: a vitess_session without options panics it.
	if sess.GetVitessSession().GetOptions() == nil {
		fail(e.tr, "session has vitess options", "vitess_session.options (field 6) is absent; psdbproxy's IsOLAP() would nil-deref")
	} else {
		pass(e.tr, "session has vitess options", "workload=%s", sess.GetVitessSession().GetOptions().GetWorkload())
	}
	if r, err = e.execute(ctx, sess, "INSERT INTO "+t+" (id, v) VALUES (1, 'in txn')"); err != nil {
		fail(e.tr, "session INSERT", "%v", err)
		return
	}
	sess = r.GetSession()
	pass(e.tr, "session INSERT", "rows_affected=%d", r.GetResult().GetRowsAffected())

	inside, s2, err := count(sess)
	outside, _, err2 := count(nil)
	if err != nil || err2 != nil || inside != "1" || outside != "0" {
		fail(e.tr, "session isolation", "inside=%q (%v) outside=%q (%v), want 1 and 0", inside, err, outside, err2)
		return
	}
	sess = s2
	pass(e.tr, "session isolation", "the transaction sees its row, autocommit reads do not")

	// StreamExecute inside the same transaction.
	st := e.stream(ctx, sess, "SELECT id, v FROM "+t, nil)
	if st.err != nil || st.sqlErr != nil || len(st.rows) != 1 {
		fail(e.tr, "StreamExecute in the session", "err=%s sqlErr=%v rows=%d", errString(st.err), st.sqlErr.GetError(), len(st.rows))
	} else {
		pass(e.tr, "StreamExecute in the session", "sees the uncommitted row; session returned in stream: %v", st.session != nil)
		if st.session != nil {
			sess = st.session
		}
	}

	if r, err = e.execute(ctx, sess, "ROLLBACK"); err != nil {
		fail(e.tr, "session ROLLBACK", "%v", err)
		return
	}
	if r.GetSession().GetVitessSession().GetInTransaction() {
		fail(e.tr, "session ROLLBACK", "still in_transaction after ROLLBACK")
	}
	if after, _, err := count(r.GetSession()); err != nil || after != "0" {
		fail(e.tr, "session ROLLBACK", "count after rollback = %q (%v), want 0", after, err)
	} else {
		pass(e.tr, "session ROLLBACK", "in_transaction=false, the row is gone")
	}
}
