package ferry

import (
	"crypto/tls"
	"time"
)

// tickets is the TLS session cache of a client that also tells when the server's
// session ticket has arrived. Go uses a TLS 1.3 ticket once and drops it, so each
// connection must receive a fresh ticket for the next cold start to resume. The
// server may send it after the response, so a fresh-connection client keeps the
// connection open until the ticket is in (bounded, and outside the timed part);
// otherwise closing right after the answer would measure lost tickets, not resumption.
type tickets struct {
	tls.ClientSessionCache
	got chan struct{}
}

func newTickets() *tickets {
	return &tickets{ClientSessionCache: tls.NewLRUClientSessionCache(4), got: make(chan struct{}, 1)}
}

func (t *tickets) Put(key string, cs *tls.ClientSessionState) {
	t.ClientSessionCache.Put(key, cs)
	if cs != nil {
		select {
		case t.got <- struct{}{}:
		default:
		}
	}
}

// reset forgets a ticket notice from an earlier connection.
func (t *tickets) reset() {
	select {
	case <-t.got:
	default:
	}
}

// wait returns true once a ticket arrived since reset, false after max.
func (t *tickets) wait(max time.Duration) bool {
	select {
	case <-t.got:
		return true
	case <-time.After(max):
		return false
	}
}
