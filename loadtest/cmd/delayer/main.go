// Command delayer adds one-way latency (and optional random loss) to the packets
// an iptables NFQUEUE rule hands it, because this kernel has no netem. It holds
// each packet for -delay, then accepts it, in arrival order (one FIFO, so the
// delay never reorders a TCP stream). Run one per network namespace, for a rule
// on that namespace's INPUT chain (the receiving side: on OUTPUT, TCP's own
// pacing sees the queue as a slow local device and throughput collapses).
//
// Per-packet cost is what limits it (a netlink message in, a verdict out), so it
// does as little per packet as it can: metadata only (no payload copy), GSO
// super-packets queued whole when there is no loss to apply (the kernel would
// otherwise cut a 64 KiB TCP or UDP-GSO send into ~45 packets first), and one
// batch verdict for every packet that is due when the releaser wakes up.
// docs/benchmarks/http3.md "The delayer's ceiling" has its measured ceiling.
//
//	iptables -A INPUT -i veth0 -j NFQUEUE --queue-num 7
//	delayer -queue 7 -delay 20ms -loss 0.5
package main

import (
	"context"
	"flag"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	nfqueue "github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

type held struct {
	id  uint32
	due time.Time
}

func main() {
	queue := flag.Uint("queue", 7, "NFQUEUE number")
	delay := flag.Duration("delay", 20*time.Millisecond, "one-way delay added to every packet")
	loss := flag.Float64("loss", 0, "percentage of packets dropped at random")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("delayer: ")

	// Loss is per packet, so with loss the kernel must segment GSO packets first
	// (dropping a whole 64 KiB super-packet would be a burst of ~45 losses).
	var flags uint32
	if *loss == 0 {
		flags = nfqueue.NfQaCfgFlagGSO
	}
	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      uint16(*queue),
		MaxQueueLen:  1 << 16,
		Copymode:     nfqueue.NfQnlCopyMeta, // the verdict needs only the id
		Flags:        flags,
		WriteTimeout: time.Second,
	})
	if err != nil {
		log.Fatalf("open queue %d: %v", *queue, err)
	}
	defer nf.Close()
	if err := nf.SetOption(netlink.NoENOBUFS, true); err != nil {
		log.Fatal(err)
	}
	// A burst of packets must wait in the socket, not be dropped by the kernel
	// because the netlink buffer (rmem_default) is full: force a larger one (root).
	if rc, err := nf.Con.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		})
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fifo := make(chan held, 1<<16)
	go release(ctx, nf, fifo)

	err = nf.RegisterWithErrorFunc(ctx, func(a nfqueue.Attribute) int {
		if a.PacketID == nil {
			return 0
		}
		if *loss > 0 && rand.Float64()*100 < *loss {
			_ = nf.SetVerdict(*a.PacketID, nfqueue.NfDrop)
			return 0
		}
		fifo <- held{id: *a.PacketID, due: time.Now().Add(*delay)}
		return 0
	}, func(e error) int {
		if ctx.Err() == nil {
			log.Printf("receive: %v", e)
		}
		return 0
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("queue %d: delay %v, loss %.2f%%", *queue, *delay, *loss)
	<-ctx.Done()
}

// release accepts each held packet when its time has come. The delay is the
// same for all, so arrival order is due order and one FIFO suffices. Packet ids
// rise in arrival order, so one batch verdict for the last due id accepts every
// packet before it too (the dropped ones have had their verdict already).
func release(ctx context.Context, nf *nfqueue.Nfqueue, fifo <-chan held) {
	var next *held
	for {
		if next == nil {
			select {
			case <-ctx.Done():
				return
			case p := <-fifo:
				next = &p
			}
		}
		if d := time.Until(next.due); d > 0 {
			// nanosleep, not time.Sleep: Go's timers wake up to ~1 ms late,
			// which would double the near shape's 0.5 ms one-way delay.
			ts := unix.NsecToTimespec(d.Nanoseconds())
			_ = unix.Nanosleep(&ts, nil)
		}
		last := next.id
		next = nil
		now := time.Now()
	more: // everything else that is due by now goes in the same verdict
		for {
			select {
			case p := <-fifo:
				if p.due.After(now) {
					next = &p
					break more
				}
				last = p.id
			default:
				break more
			}
		}
		if err := nf.SetVerdictBatch(last, nfqueue.NfAccept); err != nil && ctx.Err() == nil {
			log.Printf("verdict: %v", err)
		}
	}
}
