package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	ferryv1alpha1 "ferry.test/grpc-go/gen/ferry/v1alpha1"
	psdbv1alpha1 "ferry.test/grpc-go/gen/psdb/v1alpha1"
	querypb "ferry.test/grpc-go/gen/vitess/query"
)

// callTimeout bounds every call but the deadline check's (gRPC and Connect send it as
// grpc-timeout / Connect-Timeout-Ms; the gateway's own unary limit is 30 s).
const callTimeout = 20 * time.Second

type env struct {
	v     string // variant name
	db    db
	bad   db // wrong password
	w     *wireStats
	h3    bool
	gzip  bool
	grpc  bool // grpc-go (stats handler) rather than connect-go (HTTP recorder)
	user  string
	table string
}

func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func runVariant(cfg config, v variant) {
	name := v.String()
	fmt.Printf("---- %s https://%s\n", name, cfg.addr)
	w := newWireStats()
	dial := dialConnect
	if v.client == "grpc-go" {
		dial = dialGRPC
	}
	good, bad, closeFn, err := dial(cfg, v, w)
	if err != nil {
		fail(name, "dial", "%v", err)
		return
	}
	defer closeFn()
	e := &env{v: name, db: good, bad: bad, w: w, h3: v.transport == "h3", gzip: v.gzip,
		grpc: v.client == "grpc-go", user: cfg.user,
		table: fmt.Sprintf("grpcgo_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)}

	sess, ok := e.checkCreateSession()
	if !ok {
		fail(name, "(remaining checks not run)", "every call is refused, see CreateSession above")
		return
	}
	e.checkExecute()
	e.checkSQLError()
	e.checkBadPassword()
	e.checkBindVariables(sess)
	e.checkBindTuple(sess)
	if _, err := e.execute(nil, "CREATE TABLE "+e.table+" (id INT PRIMARY KEY, name VARCHAR(32))"); err != nil {
		fail(name, "CREATE TABLE", "%v", err)
	} else {
		e.checkPrepare(sess)
		sess = e.checkTransaction(sess)
		e.checkBatch()
		e.checkCloseSession(sess)
		e.checkCloseEndsTransaction()
		e.execute(nil, "DROP TABLE IF EXISTS "+e.table)
	}
	e.checkStream()
	e.checkDeadline()
	e.checkWire()
}

// ---- helpers ----

// execute runs one statement; a transport error or an SQL error is an error.
func (e *env) execute(sess *psdbv1alpha1.Session, q string) (*psdbv1alpha1.ExecuteResponse, error) {
	return e.executeReq(&psdbv1alpha1.ExecuteRequest{Session: sess, Query: q})
}

func (e *env) executeReq(req *psdbv1alpha1.ExecuteRequest) (*psdbv1alpha1.ExecuteResponse, error) {
	ctx, cancel := call()
	defer cancel()
	resp, err := e.db.Execute(ctx, req)
	if err != nil {
		return nil, errors.New(describe(err))
	}
	if resp.GetError() != nil {
		return resp, fmt.Errorf("SQL error %s: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
	}
	return resp, nil
}

// cells splits a vitess Row (one length per column, -1 = NULL, values concatenated)
// into strings; NULL is "NULL" (no test value is the text NULL).
func cells(r *querypb.Row) ([]string, error) {
	out := make([]string, 0, len(r.GetLengths()))
	rest := r.GetValues()
	for i, n := range r.GetLengths() {
		switch {
		case n < 0:
			out = append(out, "NULL")
		case n > int64(len(rest)):
			return nil, fmt.Errorf("column %d: length %d overruns the %d value bytes left", i, n, len(rest))
		default:
			out = append(out, string(rest[:n]))
			rest = rest[n:]
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d value bytes left over after %d columns", len(rest), len(out))
	}
	return out, nil
}

// table renders a result as [[a b] [c d]] for comparisons and messages.
func table(rows []*querypb.Row) (string, error) {
	var parts []string
	for i, r := range rows {
		c, err := cells(r)
		if err != nil {
			return "", fmt.Errorf("row %d: %w", i, err)
		}
		parts = append(parts, fmt.Sprintf("%q", c))
	}
	return "[" + strings.Join(parts, " ") + "]", nil
}

func fieldList(fs []*querypb.Field) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.GetName() + " " + f.GetType().String()
	}
	return strings.Join(parts, ", ")
}

// expectRows checks a result's rows (rendered by table) and, when given, its field names.
func (e *env) expectRows(name string, resp *psdbv1alpha1.ExecuteResponse, err error, want string, names ...string) {
	if err != nil {
		fail(e.v, name, "%v", err)
		return
	}
	got, terr := table(resp.GetResult().GetRows())
	if terr != nil {
		fail(e.v, name, "%v", terr)
		return
	}
	var gotNames []string
	for _, f := range resp.GetResult().GetFields() {
		gotNames = append(gotNames, f.GetName())
	}
	switch {
	case got != want:
		fail(e.v, name, "rows %s, want %s", got, want)
	case len(names) > 0 && !slices.Equal(gotNames, names):
		fail(e.v, name, "fields %v, want %v", gotNames, names)
	default:
		pass(e.v, name, "rows %s, fields %s", got, fieldList(resp.GetResult().GetFields()))
	}
}

// ---- checks ----

func (e *env) checkCreateSession() (*psdbv1alpha1.Session, bool) {
	ctx, cancel := call()
	defer cancel()
	resp, err := e.db.CreateSession(ctx, &psdbv1alpha1.CreateSessionRequest{})
	switch {
	case err != nil:
		fail(e.v, "CreateSession", "%s", describe(err))
		// Go on only if plain calls work; when every call fails the same way the
		// other checks would just repeat it.
		_, err2 := e.execute(nil, "SELECT 1")
		return nil, err2 == nil
	case resp.GetSession() == nil:
		fail(e.v, "CreateSession", "no session in the answer")
	case resp.GetUser().GetUsername() != "" && resp.GetUser().GetUsername() != e.user:
		fail(e.v, "CreateSession", "user.username=%q, want %q", resp.GetUser().GetUsername(), e.user)
	default:
		pass(e.v, "CreateSession", "session returned (user %q, branch %q)", resp.GetUser().GetUsername(), resp.GetBranch())
	}
	return resp.GetSession(), true
}

func (e *env) checkExecute() {
	resp, err := e.execute(nil, "SELECT 1 AS one, CONCAT('fer', 'ry ✓') AS s, NULL AS z")
	e.expectRows("Execute", resp, err, `[["1" "ferry ✓" "NULL"]]`, "one", "s", "z")
}

// An SQL error is ExecuteResponse.error with the MySQL message, not an RPC error.
func (e *env) checkSQLError() {
	ctx, cancel := call()
	defer cancel()
	resp, err := e.db.Execute(ctx, &psdbv1alpha1.ExecuteRequest{Query: "SELECT * FROM no_such_table_grpcgo"})
	switch {
	case err != nil:
		fail(e.v, "Execute SQL error", "an RPC error instead of ExecuteResponse.error: %s", describe(err))
	case resp.GetError() == nil:
		fail(e.v, "Execute SQL error", "no error for a missing table")
	case !strings.Contains(resp.GetError().GetMessage(), "doesn't exist"):
		fail(e.v, "Execute SQL error", "message %q lacks the MySQL text", resp.GetError().GetMessage())
	default:
		pass(e.v, "Execute SQL error", "code=%s message=%q", resp.GetError().GetCode(), resp.GetError().GetMessage())
	}
}

func (e *env) checkBadPassword() {
	ctx, cancel := call()
	defer cancel()
	_, err := e.bad.Execute(ctx, &psdbv1alpha1.ExecuteRequest{Query: "SELECT 1"})
	if codeOf(err) == "unauthenticated" {
		pass(e.v, "Execute bad password", "%s", describe(err))
	} else {
		fail(e.v, "Execute bad password", "want unauthenticated, got %s", describe(err))
	}
}

// Typed bind variables: INT64 arithmetic and a VARCHAR that would break naive
// interpolation (quotes, backslash, an injection attempt) come back as sent.
func (e *env) checkBindVariables(sess *psdbv1alpha1.Session) {
	const s = `it's a "quote" \ x' OR '1'='1 ✓`
	resp, err := e.executeReq(&psdbv1alpha1.ExecuteRequest{
		Session: sess,
		Query:   "SELECT :a + :b AS sum, :s AS s",
		BindVariables: map[string]*querypb.BindVariable{
			"a": {Type: querypb.Type_INT64, Value: []byte("40")},
			"b": {Type: querypb.Type_INT64, Value: []byte("2")},
			"s": {Type: querypb.Type_VARCHAR, Value: []byte(s)},
		},
	})
	e.expectRows("Execute bind variables", resp, err, fmt.Sprintf("[%q]", []string{"42", s}), "sum", "s")
}

// A TUPLE bind variable expands a list: IN ::list.
func (e *env) checkBindTuple(sess *psdbv1alpha1.Session) {
	v := func(n string) *querypb.Value { return &querypb.Value{Type: querypb.Type_INT64, Value: []byte(n)} }
	resp, err := e.executeReq(&psdbv1alpha1.ExecuteRequest{
		Session: sess,
		Query: "SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
			"UNION ALL SELECT 5) AS t WHERE n IN ::list ORDER BY n",
		BindVariables: map[string]*querypb.BindVariable{
			"list": {Type: querypb.Type_TUPLE, Values: []*querypb.Value{v("2"), v("4"), v("9")}},
		},
	})
	e.expectRows("Execute bind TUPLE (IN ::list)", resp, err, `[["2"] ["4"]]`, "n")
}

// Prepare returns the statement's result fields and its number of parameters.
func (e *env) checkPrepare(sess *psdbv1alpha1.Session) {
	const name = "Prepare"
	ctx, cancel := call()
	defer cancel()
	resp, err := e.db.Prepare(ctx, &psdbv1alpha1.PrepareRequest{
		Session: sess, Query: "SELECT id, name FROM " + e.table + " WHERE id = ?"})
	switch {
	case err != nil:
		fail(e.v, name, "%s", describe(err))
	case resp.GetError() != nil:
		fail(e.v, name, "error %s: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
	case fieldList(resp.GetFields()) != "id INT32, name VARCHAR" || resp.GetParamsCount() != 1:
		fail(e.v, name, "fields [%s] params_count=%d, want [id INT32, name VARCHAR] and 1",
			fieldList(resp.GetFields()), resp.GetParamsCount())
	default:
		pass(e.v, name, "fields [%s] params_count=%d", fieldList(resp.GetFields()), resp.GetParamsCount())
	}
}

const streamRows = 5000

// streamQuery yields n = 1..5000 in order and s = 'row-<n>' (a digit cross join).
const streamQuery = `WITH d(n) AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3
  UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)
SELECT n, CONCAT('row-', n) AS s FROM (SELECT a.n + 10*b.n + 100*c.n + 1000*d.n + 1 AS n FROM d a, d b, d c, d d) AS seq
WHERE n <= 5000 ORDER BY n`

// StreamExecute: every row, in order, over several messages.
func (e *env) checkStream() {
	const name = "StreamExecute 5,000 rows"
	ctx, cancel := call()
	defer cancel()
	var fields []*querypb.Field
	msgs, rows, bad := 0, 0, ""
	var sqlErr string
	start := time.Now()
	err := e.db.StreamExecute(ctx, &psdbv1alpha1.ExecuteRequest{Query: streamQuery}, func(m *psdbv1alpha1.ExecuteResponse) {
		msgs++
		if m.GetError() != nil && sqlErr == "" {
			sqlErr = m.GetError().GetMessage()
		}
		if fields == nil && len(m.GetResult().GetFields()) > 0 {
			fields = m.GetResult().GetFields()
		}
		for _, r := range m.GetResult().GetRows() {
			rows++
			c, err := cells(r)
			want := []string{strconv.Itoa(rows), "row-" + strconv.Itoa(rows)}
			if bad == "" && (err != nil || !slices.Equal(c, want)) {
				bad = fmt.Sprintf("row %d = %q (%v), want %q", rows, c, err, want)
			}
		}
	})
	switch {
	case err != nil:
		fail(e.v, name, "after %d rows in %d messages: %s", rows, msgs, describe(err))
	case sqlErr != "":
		fail(e.v, name, "SQL error: %s", sqlErr)
	case bad != "":
		fail(e.v, name, "%s", bad)
	case rows != streamRows:
		fail(e.v, name, "%d rows, want %d", rows, streamRows)
	case fieldList(fields) != "n INT64, s VARCHAR":
		fail(e.v, name, "fields [%s], want [n INT64, s VARCHAR]", fieldList(fields))
	case msgs < 2:
		fail(e.v, name, "all %d rows in %d message(s): not streamed in chunks", rows, msgs)
	default:
		pass(e.v, name, "%d rows in order in %d messages, %.2fs", rows, msgs, time.Since(start).Seconds())
	}
}

// A transaction carried by the session from CreateSession: BEGIN, INSERT, seen inside
// and not outside, ROLLBACK. Returns the latest session.
func (e *env) checkTransaction(sess *psdbv1alpha1.Session) *psdbv1alpha1.Session {
	count := func(s *psdbv1alpha1.Session) (string, *psdbv1alpha1.Session, error) {
		r, err := e.execute(s, "SELECT COUNT(*) FROM "+e.table)
		if err != nil {
			return "", s, err
		}
		if len(r.GetResult().GetRows()) != 1 {
			return "", s, fmt.Errorf("%d rows", len(r.GetResult().GetRows()))
		}
		c, err := cells(r.GetResult().GetRows()[0])
		if err != nil || len(c) != 1 {
			return "", s, fmt.Errorf("bad COUNT row %q: %v", c, err)
		}
		return c[0], r.GetSession(), nil
	}
	r, err := e.execute(sess, "BEGIN")
	if err != nil {
		fail(e.v, "transaction BEGIN", "%v", err)
		return sess
	}
	sess = r.GetSession()
	if !sess.GetVitessSession().GetInTransaction() {
		fail(e.v, "transaction BEGIN", "in_transaction=false in the session BEGIN returned")
		return sess
	}
	pass(e.v, "transaction BEGIN", "in_transaction=true")
	if r, err = e.execute(sess, "INSERT INTO "+e.table+" VALUES (1, 'in txn')"); err != nil {
		fail(e.v, "transaction INSERT", "%v", err)
		return sess
	}
	sess = r.GetSession()
	pass(e.v, "transaction INSERT", "rows_affected=%d", r.GetResult().GetRowsAffected())

	inside, s2, err := count(sess)
	outside, _, err2 := count(nil)
	if err != nil || err2 != nil || inside != "1" || outside != "0" {
		fail(e.v, "transaction isolation", "inside=%q (%v) outside=%q (%v), want 1 and 0", inside, err, outside, err2)
	} else {
		pass(e.v, "transaction isolation", "the transaction sees its row, autocommit reads do not")
	}
	sess = s2
	if r, err = e.execute(sess, "ROLLBACK"); err != nil {
		fail(e.v, "transaction ROLLBACK", "%v", err)
		return sess
	}
	sess = r.GetSession()
	after, s3, err := count(sess)
	switch {
	case sess.GetVitessSession().GetInTransaction():
		fail(e.v, "transaction ROLLBACK", "still in_transaction after ROLLBACK")
	case err != nil || after != "0":
		fail(e.v, "transaction ROLLBACK", "count after rollback = %q (%v), want 0", after, err)
	default:
		pass(e.v, "transaction ROLLBACK", "in_transaction=false, the row is gone")
		sess = s3
	}
	return sess
}

// checkBatch: Ferry's ExecuteBatch through the generated client of ferry.v1alpha1: a
// TRANSACTION batch whose second statement fails leaves nothing; a good one commits
// both rows in one request.
func (e *env) checkBatch() {
	ctx, cancel := call()
	defer cancel()
	stmt := func(q string) *ferryv1alpha1.BatchStatement { return &ferryv1alpha1.BatchStatement{Query: q} }
	ins := "INSERT INTO " + e.table + " VALUES "
	resp, err := e.db.ExecuteBatch(ctx, &ferryv1alpha1.ExecuteBatchRequest{
		Statements: []*ferryv1alpha1.BatchStatement{stmt(ins + "(100, 'batch')"), stmt(ins + "(100, 'dup')")},
	})
	switch {
	case err != nil:
		fail(e.v, "ExecuteBatch", "%v", err)
		return
	case resp.GetError() == nil || resp.FailedStatement == nil || *resp.FailedStatement != 1:
		fail(e.v, "ExecuteBatch", "want the duplicate key at statement 1, got %v", resp)
		return
	}
	resp, err = e.db.ExecuteBatch(ctx, &ferryv1alpha1.ExecuteBatchRequest{
		Statements: []*ferryv1alpha1.BatchStatement{stmt(ins + "(100, 'batch')"), stmt(ins + "(101, 'batch')"),
			stmt("SELECT COUNT(*) FROM " + e.table + " WHERE name = 'batch'")},
	})
	if err != nil || resp.GetError() != nil || len(resp.Results) != 3 {
		fail(e.v, "ExecuteBatch", "%v %v", err, resp)
		return
	}
	got, err := table(resp.Results[2].GetResult().GetRows())
	if err != nil || got != `[["2"]]` {
		fail(e.v, "ExecuteBatch", "count after the rolled-back batch and the good one: %q %v", got, err)
		return
	}
	pass(e.v, "ExecuteBatch", "a failing transaction batch applied nothing (statement 1 named); a good one committed 2 rows")
}

func (e *env) closeSession(sess *psdbv1alpha1.Session) error {
	ctx, cancel := call()
	defer cancel()
	resp, err := e.db.CloseSession(ctx, &psdbv1alpha1.CloseSessionRequest{Session: sess})
	if err != nil {
		return errors.New(describe(err))
	}
	if resp.GetError() != nil {
		return fmt.Errorf("error %s: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
	}
	return nil
}

func (e *env) checkCloseSession(sess *psdbv1alpha1.Session) {
	if err := e.closeSession(sess); err != nil {
		fail(e.v, "CloseSession", "%v", err)
	} else {
		pass(e.v, "CloseSession", "closed the session CreateSession returned")
	}
}

// CloseSession ends an open transaction: the row lock it held is released at once.
func (e *env) checkCloseEndsTransaction() {
	const name = "CloseSession ends a transaction"
	r, err := e.execute(nil, "BEGIN")
	if err == nil {
		r, err = e.execute(r.GetSession(), "INSERT INTO "+e.table+" VALUES (2, 'closed')")
	}
	if err != nil {
		fail(e.v, name, "BEGIN/INSERT: %v", err)
		return
	}
	if err := e.closeSession(r.GetSession()); err != nil {
		fail(e.v, name, "CloseSession: %v", err)
		// Release the row lock for what follows, if the session still holds it.
		e.execute(r.GetSession(), "ROLLBACK")
		return
	}
	// Had the transaction survived, this would wait for its row lock.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := e.db.Execute(ctx, &psdbv1alpha1.ExecuteRequest{Query: "INSERT INTO " + e.table + " VALUES (2, 'after')"})
	switch {
	case err != nil:
		fail(e.v, name, "autocommit INSERT of the same key after CloseSession: %s (%.1fs)", describe(err), time.Since(start).Seconds())
	case resp.GetError() != nil:
		fail(e.v, name, "autocommit INSERT of the same key after CloseSession: %s", resp.GetError().GetMessage())
	default:
		pass(e.v, name, "its row lock was released: the same key inserted in %.0f ms", float64(time.Since(start).Microseconds())/1000)
	}
}

// A client deadline: 500 ms on SELECT SLEEP(5) ends in deadline_exceeded within ~1 s,
// and the statement is stopped in MySQL (the gateway turns grpc-timeout /
// Connect-Timeout-Ms into a server deadline and KILL QUERY).
func (e *env) checkDeadline() {
	const name = "deadline 500 ms on SLEEP(5)"
	marker := fmt.Sprintf("grpcgo-deadline-%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.db.Execute(ctx, &psdbv1alpha1.ExecuteRequest{Query: "SELECT SLEEP(5) AS slept /* " + marker + " */"})
	elapsed := time.Since(start)
	switch {
	case codeOf(err) != "deadline_exceeded":
		fail(e.v, name, "want deadline_exceeded, got %s after %.2fs", describe(err), elapsed.Seconds())
	case elapsed > 1200*time.Millisecond:
		fail(e.v, name, "deadline_exceeded only after %.2fs", elapsed.Seconds())
	default:
		pass(e.v, name, "%s after %.2fs", codeOf(err), elapsed.Seconds())
	}
	// Watch MySQL's process list until the statement is gone (it would run 5 s).
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%" + marker + "%' AND ID <> CONNECTION_ID()"
	for {
		r, err := e.execute(nil, q)
		if err != nil {
			fail(e.v, "deadline stops the statement", "process list: %v", err)
			return
		}
		var c []string
		if rows := r.GetResult().GetRows(); len(rows) == 1 {
			c, _ = cells(rows[0])
		}
		since := time.Since(start)
		if len(c) == 1 && c[0] == "0" {
			pass(e.v, "deadline stops the statement", "gone from MySQL's process list %.2fs after the call began", since.Seconds())
			return
		}
		if since > 3*time.Second {
			fail(e.v, "deadline stops the statement", "SLEEP(5) still running in MySQL %.2fs after the call began: the deadline was not enforced server-side", since.Seconds())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// What went over the wire: the HTTP version, and compression in both directions.
func (e *env) checkWire() {
	w := e.w
	w.mu.Lock()
	defer w.mu.Unlock()
	proto := "HTTP/2.0"
	if e.h3 {
		proto = "HTTP/3.0"
	}
	summary := fmt.Sprintf("%d calls; %s; requests %s; answers %s", w.calls, show(w.proto), show(w.reqEnc), show(w.respEnc))
	if e.grpc {
		summary += fmt.Sprintf("; %d of %d messages received compressed", w.msgsInGzip, w.msgsIn)
		if !e.gzip {
			summary += " (grpc-go advertises gzip whatever the call options)"
		}
	} else {
		summary += "; content types " + show(w.contentType)
	}
	if len(w.proto) != 1 || w.proto[proto] == 0 {
		fail(e.v, "wire: HTTP version", "want every answer over %s: %s", proto, summary)
	} else {
		pass(e.v, "wire: HTTP version", "every answer over %s", proto)
	}
	var problems []string
	if e.gzip {
		if len(w.reqEnc) != 1 || w.reqEnc["gzip"] == 0 {
			problems = append(problems, "not every request was sent gzip")
		}
		if w.respEnc["gzip"] == 0 {
			problems = append(problems, "no answer came gzip")
		}
		if e.grpc && w.msgsInGzip == 0 {
			problems = append(problems, "no message came compressed")
		}
	} else {
		if len(w.reqEnc) != 1 || w.reqEnc["identity"] == 0 {
			problems = append(problems, "a request was sent compressed")
		}
		// grpc-go always accepts gzip (see dialGRPC): its answers may be compressed.
		if !e.grpc && (len(w.respEnc) != 1 || w.respEnc["identity"] == 0) {
			problems = append(problems, "an answer came compressed though none was accepted")
		}
	}
	if len(problems) > 0 {
		fail(e.v, "wire: compression", "%s: %s", strings.Join(problems, "; "), summary)
	} else {
		pass(e.v, "wire: compression", "%s", summary)
	}
}
