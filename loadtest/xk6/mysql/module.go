// Package mysql is the k6 extension `k6/x/ferry/mysql`: the baseline client,
// the MySQL protocol over TLS 1.3 with go-sql-driver/mysql, driven at the
// driver level (one connection per client, no database/sql pool), so a cold
// start is exactly dial + handshake + TLS + auth + query + COM_QUIT.
//
//	import mysql from 'k6/x/ferry/mysql';
//	const db = mysql.client({ addr: '127.0.0.1:3306', user, password, database,
//	                          ca, fresh: false, resume: false, compress: false });
//	const r = db.query('SELECT 1');  // {ms, rows, affected, resumed, error}
//	const w = db.exec('INSERT ...'); // same shape
package mysql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.k6.io/k6/js/modules"

	"ferry/loadtest/xk6/wire"
)

func init() { modules.Register("k6/x/ferry/mysql", new(root)) }

type root struct{}

func (*root) NewModuleInstance(vu modules.VU) modules.Instance { return &instance{vu: vu} }

type instance struct{ vu modules.VU }

func (i *instance) Exports() modules.Exports { return modules.Exports{Default: i} }

// Client is one MySQL connection of one VU (re-dialled per call when fresh).
type Client struct {
	vu    modules.VU
	conn  driver.Conn
	fresh bool
	cnt   wire.Counter

	conn2 driver.Connector
}

// Client options: addr, user, password, database, ca (PEM path; empty = no TLS),
// serverName, fresh, resume (TLS session cache), compress (zlib protocol compression).
func (i *instance) Client(m map[string]any) (*Client, error) {
	str := func(k, def string) string {
		if v, ok := m[k].(string); ok && v != "" {
			return v
		}
		return def
	}
	flag := func(k string) bool { v, _ := m[k].(bool); return v }
	c := &Client{vu: i.vu, fresh: flag("fresh")}
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", str("addr", "127.0.0.1:3306")
	cfg.User, cfg.Passwd, cfg.DBName = str("user", "ferry"), str("password", "ferry"), str("database", "ferry")
	cfg.MaxAllowedPacket = 64 << 20 // known up front: no SELECT @@max_allowed_packet round trip
	if ca := str("ca", ""); ca != "" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		t := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: str("serverName", host)}
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", ca)
		}
		if flag("resume") {
			t.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		}
		cfg.TLS = t
	}
	if err := cfg.Apply(gomysql.EnableCompression(flag("compress"))); err != nil {
		return nil, err
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &wire.Conn{Conn: raw, C: &c.cnt}, nil
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	c.conn2 = conn
	return c, nil
}

// Query runs a statement that returns rows and reads them all.
func (c *Client) Query(sql string) map[string]any { return c.run(sql, true) }

// Exec runs a statement that returns no rows (INSERT, TRUNCATE...).
func (c *Client) Exec(sql string) map[string]any { return c.run(sql, false) }

func (c *Client) run(sql string, rows bool) map[string]any {
	ctx, cancel := context.WithTimeout(c.vu.Context(), 120*time.Second)
	defer cancel()
	out := map[string]any{"ms": 0.0, "rows": 0, "affected": 0, "error": ""}
	start := time.Now()
	n, affected, err := c.roundTrip(ctx, sql, rows)
	if c.fresh {
		c.Close() // COM_QUIT + close: part of the cold start
	}
	out["ms"] = float64(time.Since(start).Nanoseconds()) / 1e6
	out["rows"], out["affected"] = n, affected
	if err != nil {
		out["error"] = err.Error()
		c.Close()
	}
	out["sent"], out["recv"] = c.pushBytes()
	return out
}

func (c *Client) roundTrip(ctx context.Context, sql string, rows bool) (n, affected int64, err error) {
	if c.conn == nil {
		if c.conn, err = c.conn2.Connect(ctx); err != nil {
			return 0, 0, err
		}
	}
	if !rows {
		res, err := c.conn.(driver.ExecerContext).ExecContext(ctx, sql, nil)
		if err != nil {
			return 0, 0, err
		}
		affected, err = res.RowsAffected()
		return 0, affected, err
	}
	rs, err := c.conn.(driver.QueryerContext).QueryContext(ctx, sql, nil)
	if err != nil {
		return 0, 0, err
	}
	defer rs.Close()
	dest := make([]driver.Value, len(rs.Columns()))
	for {
		if err := rs.Next(dest); err != nil {
			if errors.Is(err, io.EOF) {
				return n, 0, nil
			}
			return n, 0, err
		}
		n++
	}
}

// Close ends the connection (COM_QUIT).
func (c *Client) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// Drop closes the connection and reports its last bytes (end of a VU's run).
func (c *Client) Drop() { c.Close(); c.pushBytes() }

// pushBytes reports the socket bytes since the last call (see wire.Push).
func (c *Client) pushBytes() (sent, recv int64) { return wire.Push(c.vu, &c.cnt) }
