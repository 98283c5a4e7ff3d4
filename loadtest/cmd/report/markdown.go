package main

import (
	"fmt"
	"strings"
)

// markdown renders one table per workload; ratios are against MySQL+TLS on the same network.
// Compression runs add: ×identity (p50 ÷ the same client's identity row), the answers
// the gateway compressed, and CPU ms per call of Envoy, the shim and MySQL when measured.
func markdown(rows []*Row) string {
	var b strings.Builder
	b.WriteString("# Ferry benchmark results\n\n")
	b.WriteString("Latency in ms (client-side, per call). `×mysql` = p50 / p50 of the MySQL+TLS baseline " +
		"in the same run and network (< 1 is faster). Bytes are per call, at the socket (TLS records / " +
		"QUIC datagrams, no IP headers). Cold start: `RTTs` = round trips counted from the protocol, " +
		"`meas.` = p50 ÷ the shape's RTT. Compression: variant = rows,codec; `×identity` = p50 ÷ the " +
		"same client's identity row (`paired` rows: ÷ the p50 of their identity twin, each call made both ways); `CPU ms/call` = Envoy · shim · MySQL (utime+stime ÷ calls). " +
		"Runs repeated in rounds are merged: latencies are the median of the rounds' figures.\n")
	type flags struct{ enc, ident, cpu bool }
	group := map[string]*flags{}
	for _, r := range rows {
		f := group[r.Workload]
		if f == nil {
			f = &flags{}
			group[r.Workload] = f
		}
		f.enc = f.enc || r.Workload == "compress-select" || r.Encoded > 0 || r.P50VsIdentity > 0
		f.ident = f.ident || r.P50VsIdentity > 0
		f.cpu = f.cpu || len(r.CPU) > 0
	}
	last := ""
	for _, r := range rows {
		f := group[r.Workload]
		if r.Workload != last {
			last = r.Workload
			fmt.Fprintf(&b, "\n## %s\n\n", r.Workload)
			b.WriteString("| net | client | variant | VUs | calls | errors | p50 | p95 | p99 | max | ×mysql p50 | ×mysql p95 | calls/s | sent B | recv B |")
			cols := 15
			if f.ident {
				b.WriteString(" ×identity |")
				cols++
			}
			if f.enc {
				b.WriteString(" compressed answers |")
				cols++
			}
			if f.cpu {
				b.WriteString(" CPU ms/call env · shim · db |")
				cols++
			}
			if r.Workload == "cold-start" {
				b.WriteString(" RTTs | meas. | resumed | 0-RTT ok/rej/425 |")
				cols += 4
			}
			b.WriteString("\n|" + strings.Repeat("---|", cols) + "\n")
		}
		calls := fmt.Sprint(r.Calls)
		if r.Rounds > 1 {
			calls += fmt.Sprintf(" (%d rounds)", r.Rounds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |",
			r.Net, r.Client, dash(r.Variant), r.VUs, calls, r.Errors, ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max),
			ratio(r.P50Ratio), ratio(r.P95Ratio), r.QPS, size(r.Sent), size(r.Recv))
		if f.ident {
			fmt.Fprintf(&b, " %s |", ratio(r.P50VsIdentity))
		}
		if f.enc {
			switch {
			case r.Client == "mysql80" && r.Negotiated != "":
				fmt.Fprintf(&b, " %s |", r.Negotiated)
			case r.Client == "mysql" || r.Client == "mysql80": // the MySQL protocol compresses per connection: see the variant
				b.WriteString(" – |")
			default:
				fmt.Fprintf(&b, " %d/%d |", r.Encoded, r.Calls)
			}
		}
		if f.cpu {
			if len(r.CPU) == 0 {
				b.WriteString(" – |")
			} else {
				fmt.Fprintf(&b, " %s · %s · %s |", cpu(r.CPU, "envoy"), cpu(r.CPU, "shim"), cpu(r.CPU, "mysql"))
			}
		}
		if r.Workload == "cold-start" {
			meas := "–"
			if r.RTTsMeasured > 0 {
				meas = fmt.Sprintf("%.1f", r.RTTsMeasured)
			}
			early := "–"
			if r.Variant == "0rtt" {
				early = fmt.Sprintf("%d/%d/%d", r.Early, r.EarlyNo, r.Early425)
			}
			res := "–"
			if r.Client != "mysql" { // the MySQL driver does not expose its TLS state
				res = fmt.Sprintf("%d/%d", r.Resumed, r.Calls)
			}
			fmt.Fprintf(&b, " %.0f | %s | %s | %s |", r.RTTsModel, meas, res, early)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cpu(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "–"
	}
	return ms(v)
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func ratio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func size(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
