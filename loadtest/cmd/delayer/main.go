// Command delayer adds one-way latency (and optional random loss) to the packets
// an iptables NFQUEUE rule hands it, because this kernel has no netem. It holds
// each packet for -delay, then accepts it, in arrival order (one FIFO, so the
// delay never reorders a TCP stream). Run one per network namespace, for a rule
// on that namespace's INPUT chain (the receiving side: on OUTPUT, TCP's own
// pacing sees the queue as a slow local device and throughput collapses).
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

	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      uint16(*queue),
		MaxPacketLen: 64, // the verdict needs only the id: copy as little as possible
		MaxQueueLen:  1 << 16,
		Copymode:     nfqueue.NfQnlCopyPacket,
		WriteTimeout: time.Second,
	})
	if err != nil {
		log.Fatalf("open queue %d: %v", *queue, err)
	}
	defer nf.Close()
	if err := nf.SetOption(netlink.NoENOBUFS, true); err != nil {
		log.Fatal(err)
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
// same for all, so arrival order is due order and one FIFO suffices.
func release(ctx context.Context, nf *nfqueue.Nfqueue, fifo <-chan held) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-fifo:
			if d := time.Until(p.due); d > 0 {
				// nanosleep, not time.Sleep: Go's timers wake up to ~1 ms late,
				// which would double the near shape's 0.5 ms one-way delay.
				ts := unix.NsecToTimespec(d.Nanoseconds())
				_ = unix.Nanosleep(&ts, nil)
			}
			if err := nf.SetVerdict(p.id, nfqueue.NfAccept); err != nil && ctx.Err() == nil {
				log.Printf("verdict: %v", err)
			}
		}
	}
}
