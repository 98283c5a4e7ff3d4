package main

import (
	"fmt"
	"strings"
)

// markdown renders one table per workload; ratios are against MySQL+TLS on the same network.
func markdown(rows []*Row) string {
	var b strings.Builder
	b.WriteString("# Ferry benchmark results\n\n")
	b.WriteString("Latency in ms (client-side, per call). `×mysql` = p50 / p50 of the MySQL+TLS baseline " +
		"in the same run and network (< 1 is faster). Bytes are per call, at the socket (TLS records / " +
		"QUIC datagrams, no IP headers). Cold start: `RTTs` = round trips counted from the protocol, " +
		"`meas.` = p50 ÷ the shape's RTT.\n")
	last := ""
	for _, r := range rows {
		if r.Workload != last {
			last = r.Workload
			fmt.Fprintf(&b, "\n## %s\n\n", r.Workload)
			b.WriteString("| net | client | variant | VUs | calls | errors | p50 | p95 | p99 | max | ×mysql p50 | ×mysql p95 | calls/s | sent B | recv B |")
			if r.Workload == "compress-select" {
				b.WriteString(" compressed answers |")
			}
			if r.Workload == "cold-start" {
				b.WriteString(" RTTs | meas. | resumed | 0-RTT ok/rej/425 |")
			}
			b.WriteString("\n|" + strings.Repeat("---|", 15))
			if r.Workload == "compress-select" {
				b.WriteString("---|")
			}
			if r.Workload == "cold-start" {
				b.WriteString("---|---|---|---|")
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |",
			r.Net, r.Client, dash(r.Variant), r.VUs, r.Calls, r.Errors, ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max),
			ratio(r.P50Ratio), ratio(r.P95Ratio), r.QPS, size(r.Sent), size(r.Recv))
		if r.Workload == "compress-select" {
			if r.Client == "mysql" { // the MySQL protocol compresses per connection: see the variant
				b.WriteString(" – |")
			} else {
				fmt.Fprintf(&b, " %d/%d |", r.Encoded, r.Calls)
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
