// Package wire counts the bytes our clients put on the network, at the socket:
// TCP payload for net.Conn (TLS records included), UDP payload for QUIC.
// IP/TCP/UDP headers are not counted, for any client, so the figures compare.
package wire

import (
	"net"
	"sync/atomic"
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
