// Package wire counts the bytes our clients put on the network, at the socket:
// TCP payload for net.Conn (TLS records included), UDP payload for QUIC.
// IP/TCP/UDP headers are not counted, for any client, so the figures compare.
package wire

import (
	"net"
	"sync/atomic"
	"time"

	"go.k6.io/k6/js/modules"
	"go.k6.io/k6/metrics"
)

// Counter accumulates bytes sent and received; safe for concurrent use.
type Counter struct{ sent, recv atomic.Int64 }

// Take returns the bytes counted since the last call and resets the counter.
func (c *Counter) Take() (sent, recv int64) { return c.sent.Swap(0), c.recv.Swap(0) }

// Conn wraps a stream connection and counts its bytes into C.
type Conn struct {
	net.Conn
	C *Counter
}

func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.C.recv.Add(int64(n))
	return n, err
}

func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.C.sent.Add(int64(n))
	return n, err
}

// PacketConn wraps a datagram socket (QUIC's) and counts its bytes into C.
// Wrapping hides the *net.UDPConn, so quic-go skips GSO/ECN: fine for a client.
type PacketConn struct {
	net.PacketConn
	C *Counter
}

func (p *PacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := p.PacketConn.ReadFrom(b)
	p.C.recv.Add(int64(n))
	return n, a, err
}

func (p *PacketConn) WriteTo(b []byte, a net.Addr) (int, error) {
	n, err := p.PacketConn.WriteTo(b, a)
	p.C.sent.Add(int64(n))
	return n, err
}

// Push reports the bytes counted since the last call as k6's data_sent/data_received
// for the VU and returns them, so scripts can leave warm-up calls out of their figures.
func Push(vu modules.VU, c *Counter) (sent, recv int64) {
	sent, recv = c.Take()
	st := vu.State()
	if st == nil {
		return sent, recv
	}
	ctm := st.Tags.GetCurrentValues()
	now := time.Now()
	metrics.PushIfNotDone(vu.Context(), st.Samples, metrics.Samples{
		{TimeSeries: metrics.TimeSeries{Metric: st.BuiltinMetrics.DataSent, Tags: ctm.Tags},
			Time: now, Metadata: ctm.Metadata, Value: float64(sent)},
		{TimeSeries: metrics.TimeSeries{Metric: st.BuiltinMetrics.DataReceived, Tags: ctm.Tags},
			Time: now, Metadata: ctm.Metadata, Value: float64(recv)},
	})
	return sent, recv
}
