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
	"golang.org/x/net/ipv4"
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

// UDPConn wraps QUIC's UDP socket and counts its bytes into C. It keeps every
// method quic-go looks for on a *net.UDPConn (OOBCapablePacketConn, plus
// ReadBatch), so the client runs as a real quic-go client does: datagrams read
// in batches (recvmmsg), GSO sends, ECN. Hiding the *net.UDPConn behind a plain
// net.PacketConn would read one datagram per system call.
type UDPConn struct {
	*net.UDPConn
	C     *Counter
	batch *ipv4.PacketConn
}

// NewUDPConn wraps c, counting into cnt.
func NewUDPConn(c *net.UDPConn, cnt *Counter) *UDPConn {
	return &UDPConn{UDPConn: c, C: cnt, batch: ipv4.NewPacketConn(c)}
}

func (u *UDPConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := u.UDPConn.ReadFrom(b)
	u.C.recv.Add(int64(n))
	return n, a, err
}

func (u *UDPConn) WriteTo(b []byte, a net.Addr) (int, error) {
	n, err := u.UDPConn.WriteTo(b, a)
	u.C.sent.Add(int64(n))
	return n, err
}

func (u *UDPConn) ReadMsgUDP(b, oob []byte) (int, int, int, *net.UDPAddr, error) {
	n, oobn, flags, a, err := u.UDPConn.ReadMsgUDP(b, oob)
	u.C.recv.Add(int64(n))
	return n, oobn, flags, a, err
}

// WriteMsgUDP counts every datagram of a GSO send: n is the whole buffer.
func (u *UDPConn) WriteMsgUDP(b, oob []byte, a *net.UDPAddr) (int, int, error) {
	n, oobn, err := u.UDPConn.WriteMsgUDP(b, oob, a)
	u.C.sent.Add(int64(n))
	return n, oobn, err
}

// ReadBatch is what quic-go reads with when the connection offers it.
func (u *UDPConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := u.batch.ReadBatch(ms, flags)
	for i := range n {
		u.C.recv.Add(int64(ms[i].N))
	}
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
