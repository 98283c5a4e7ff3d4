// Command report turns one run's k6 summaries (DIR/runs/*.json, written by the
// workloads' handleSummary with bench.sh's labels) into DIR/results.json,
// DIR/results.md and DIR/charts/*.png. Every latency is also given as a ratio
// to the MySQL+TLS baseline measured in the same run, on the same network.
//
//	report DIR
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Row is one k6 run: one workload × client × variant × network (× concurrency).
type Row struct {
	Workload string  `json:"workload"`
	Client   string  `json:"client"`  // mysql | h2 | h3 | mysql80 (MySQL 8.0, libmysqlclient: bench.sh compression)
	Variant  string  `json:"variant"` // cold start: resume | noresume | 0rtt; sweeps: table, codec...
	Net      string  `json:"net"`     // loopback | near | far
	RTTms    float64 `json:"rtt_ms"`  // the shape's nominal round-trip time
	VUs      int     `json:"vus"`
	Calls    int     `json:"calls"`
	Errors   int     `json:"errors"`
	P50      float64 `json:"p50_ms"`
	P95      float64 `json:"p95_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	Avg      float64 `json:"avg_ms"`
	QPS      float64 `json:"throughput_per_s"`
	Sent     float64 `json:"bytes_sent_per_call"`
	Recv     float64 `json:"bytes_recv_per_call"`
	// Cold start: round trips counted from the protocol, and measured p50 ÷ RTT.
	RTTsModel    float64 `json:"round_trips_model,omitempty"`
	RTTsMeasured float64 `json:"round_trips_measured,omitempty"`
	// Cold start: calls whose TLS session resumed; HTTP/3 early data outcomes.
	Resumed  int `json:"tls_resumed,omitempty"`
	Early    int `json:"h3_0rtt_accepted,omitempty"`
	EarlyNo  int `json:"h3_0rtt_rejected,omitempty"`
	Early425 int `json:"h3_0rtt_425,omitempty"`
	// Ferry answers that came back compressed (content-encoding set).
	Encoded int `json:"answers_encoded,omitempty"`
	// p50 and p95 relative to the baseline row (client mysql, same workload/net/vus;
	// mysql80 rows: uncompressed mysql80).
	P50Ratio float64 `json:"p50_vs_mysql,omitempty"`
	P95Ratio float64 `json:"p95_vs_mysql,omitempty"`
	// Compression runs (variant "rows,codec"): p50 relative to the same client's
	// "rows,identity" row on the same network.
	P50VsIdentity float64 `json:"p50_vs_identity,omitempty"`
	// Paired runs (PAIR=1: every call also made with codec identity, alternating): the
	// identity twin's p50, and p50 ÷ it (which becomes P50VsIdentity).
	PairIdentityP50 float64 `json:"pair_identity_p50_ms,omitempty"`
	pairRatio       float64
	// CPU time per measured call (ms) of the stack's processes (envoy, shim, mysql),
	// from /proc/<pid>/stat before and after the run (bench.sh CPU_PIDS).
	CPU map[string]float64 `json:"cpu_ms_per_call,omitempty"`
	// What a mysql80 run's session negotiated (compression algorithm, level, TLS).
	Negotiated string `json:"negotiated,omitempty"`
	// Rounds: runs with the same labels (bench.sh compression repeats the loopback runs
	// in interleaved rounds) merged into this row; see mergeRounds.
	Rounds     int     `json:"rounds,omitempty"`
	durationMs float64 // the run's length, for calls/s of merged rounds
	// The percentile curve, for the charts: percentile -> ms.
	Curve [][2]float64 `json:"curve"`
}

type summary struct {
	Labels struct {
		Workload, Client, Variant, Net string
		RTTms                          float64 `json:"rtt_ms"`
		VUs                            int     `json:"vus"`
		Negotiated                     string  `json:"negotiated"`
	} `json:"labels"`
	CPU   map[string]float64 `json:"cpu_ms_per_call"`
	State struct {
		DurationMs float64 `json:"testRunDurationMs"`
	} `json:"state"`
	Metrics map[string]struct {
		Values map[string]float64 `json:"values"`
	} `json:"metrics"`
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	if len(os.Args) != 2 {
		log.Fatal("usage: report DIR")
	}
	dir := os.Args[1]
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*.json"))
	if len(files) == 0 {
		log.Fatalf("no runs in %s/runs", dir)
	}
	var rows []*Row
	for _, f := range files {
		r, err := load(f)
		if err != nil {
			log.Fatalf("%s: %v", f, err)
		}
		rows = append(rows, r)
	}
	rows = mergeRounds(rows)
	sort.SliceStable(rows, func(i, j int) bool { return key(rows[i]) < key(rows[j]) })
	ratios(rows)

	b, _ := json.MarshalIndent(map[string]any{"rows": rows}, "", "  ")
	check(os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644))
	check(os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(rows)), 0o644))
	check(charts(rows, filepath.Join(dir, "charts")))
	fmt.Printf("%s/results.md, results.json, charts/ (%d runs)\n", dir, len(rows))
	// Exit 3 when a run had errors or no measured call: bench.sh smoke fails on it.
	bad := 0
	for _, r := range rows {
		if r.Errors > 0 || r.Calls == 0 {
			log.Printf("FAILED: %s %s %s on %s: %d calls, %d errors", r.Workload, r.Client, r.Variant, r.Net, r.Calls, r.Errors)
			bad++
		}
	}
	if bad > 0 {
		os.Exit(3)
	}
}

// order of workloads, clients and networks in tables and charts.
var order = map[string]int{
	"cold-start": 1, "warm-select": 2, "medium-select": 3, "medium-insert": 4, "large-select": 5,
	"large-insert": 6, "transaction": 7, "point-select": 8, "compress-select": 9, "sessions": 10, "compress-smoke": 11,
	"mysql": 1, "h2": 2, "h3": 3, "mysql80": 4, "loopback": 1, "near": 2, "far": 3,
	"noresume": 1, "resume": 2, "0rtt": 3,
}

func key(r *Row) string {
	if p := strings.SplitN(r.Variant, ",", 3); len(p) > 1 { // compression: rows, client, format, codec
		format := ""
		if len(p) == 3 {
			format = p[2]
		}
		return fmt.Sprintf("%02d %02d %s %s %02d %s %02d %s", order[r.Workload], netOrder(r.Net), r.Net, p[0],
			order[r.Client], format, codecOrder[p[1]], p[1])
	}
	return fmt.Sprintf("%02d %02d %s %06d %02d %s %02d", order[r.Workload], netOrder(r.Net), r.Net, r.VUs, order[r.Variant], r.Variant, order[r.Client])
}

// codecOrder: MySQL's own (none, zlib, zstd levels), then the gateway's (identity,
// then its preference order reversed: gzip, zstd, snappy, s2), then Envoy's compressor.
var codecOrder = map[string]int{
	"none": 1, "zlib": 2, "zstd1": 3, "zstd3": 4, "zstd7": 5,
	"identity": 10, "gzip": 11, "zstd": 12, "snappy": 13, "s2": 14, "gzip-zstd": 15,
	"envoy-identity": 20, "envoy-gzip": 21, "envoy-zstd": 22,
	"paired": 30,
}

// netOrder sorts shaped variants (far-loss1%) after their base network.
func netOrder(n string) int {
	base, _, _ := strings.Cut(n, "-")
	return order[base]
}

func load(path string) (*Row, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	m := func(metric, v string) float64 { return s.Metrics[metric].Values[v] }
	l := s.Labels
	r := &Row{Workload: l.Workload, Client: l.Client, Variant: l.Variant, Net: l.Net, RTTms: l.RTTms, VUs: l.VUs,
		CPU: s.CPU, Negotiated: l.Negotiated,
		Calls: int(m("ferry_calls", "count")), Errors: int(m("ferry_errors", "count")),
		P50: m("ferry_ms", "p(50)"), P95: m("ferry_ms", "p(95)"), P99: m("ferry_ms", "p(99)"),
		Max: m("ferry_ms", "max"), Avg: m("ferry_ms", "avg")}
	r.durationMs = s.State.DurationMs
	if s.State.DurationMs > 0 {
		r.QPS = float64(r.Calls) / (s.State.DurationMs / 1000)
	}
	if r.Calls > 0 {
		if sent := m("wire_sent", "count"); sent > 0 { // our extensions: measured calls only
			r.Sent, r.Recv = sent/float64(r.Calls), m("wire_recv", "count")/float64(r.Calls)
		} else if it := m("iterations", "count"); it > 0 { // k6 http: includes the warm-up call
			r.Sent, r.Recv = m("data_sent", "count")/it, m("data_received", "count")/it
		}
	}
	for _, p := range []struct {
		pct float64
		k   string
	}{{0, "min"}, {1, "p(1)"}, {5, "p(5)"}, {10, "p(10)"}, {25, "p(25)"}, {50, "p(50)"}, {75, "p(75)"},
		{90, "p(90)"}, {95, "p(95)"}, {99, "p(99)"}, {99.9, "p(99.9)"}, {100, "max"}} {
		r.Curve = append(r.Curve, [2]float64{p.pct, m("ferry_ms", p.k)})
	}
	r.Encoded = int(m("answers_encoded", "count"))
	if p := m("pair_identity_ms", "p(50)"); p > 0 {
		r.PairIdentityP50, r.pairRatio = p, r.P50/p
	}
	r.Resumed, r.Early = int(m("tls_resumed", "count")), int(m("h3_0rtt_accepted", "count"))
	r.EarlyNo, r.Early425 = int(m("h3_0rtt_rejected", "count")), int(m("h3_0rtt_425", "count"))
	if r.Workload == "cold-start" {
		r.RTTsModel = model(r.Client, r.Variant)
		if r.RTTms >= 1 { // on loopback the RTT is noise next to CPU time
			r.RTTsMeasured = r.P50 / r.RTTms
		}
	}
	return r, nil
}

// mergeRounds folds runs with the same labels (workload, client, variant, net, VUs)
// into one row: calls, errors and compressed answers add up; bytes and CPU per call
// are weighted by calls; calls/s = all calls ÷ all run time; every latency figure (and
// the curve) but the maximum is the median of the rounds' figures (a summary keeps percentiles, not
// samples, so they cannot be pooled).
func mergeRounds(rows []*Row) []*Row {
	by := map[string][]*Row{}
	var keys []string
	for _, r := range rows {
		k := strings.Join([]string{r.Workload, r.Client, r.Variant, r.Net, fmt.Sprint(r.VUs)}, "|")
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	out := make([]*Row, 0, len(keys))
	for _, k := range keys {
		rs := by[k]
		if len(rs) == 1 {
			out = append(out, rs[0])
			continue
		}
		m := *rs[0]
		m.Rounds, m.Calls, m.Errors, m.Encoded, m.Sent, m.Recv, m.durationMs = len(rs), 0, 0, 0, 0, 0, 0
		m.CPU = map[string]float64{}
		med := func(f func(*Row) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			sort.Float64s(v)
			if len(v)%2 == 1 {
				return v[len(v)/2]
			}
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		for _, r := range rs {
			m.Calls += r.Calls
			m.Errors += r.Errors
			m.Encoded += r.Encoded
			m.durationMs += r.durationMs
			m.Sent += r.Sent * float64(r.Calls)
			m.Recv += r.Recv * float64(r.Calls)
			for p, v := range r.CPU {
				m.CPU[p] += v * float64(r.Calls)
			}
		}
		if m.Calls > 0 {
			m.Sent, m.Recv = m.Sent/float64(m.Calls), m.Recv/float64(m.Calls)
			for p := range m.CPU {
				m.CPU[p] /= float64(m.Calls)
			}
		}
		if len(m.CPU) == 0 {
			m.CPU = nil
		}
		if m.durationMs > 0 {
			m.QPS = float64(m.Calls) / (m.durationMs / 1000)
		}
		m.P50, m.P95 = med(func(r *Row) float64 { return r.P50 }), med(func(r *Row) float64 { return r.P95 })
		m.P99 = med(func(r *Row) float64 { return r.P99 })
		for _, r := range rs {
			m.Max = max(m.Max, r.Max)
		}
		m.Avg = med(func(r *Row) float64 { return r.Avg })
		m.PairIdentityP50 = med(func(r *Row) float64 { return r.PairIdentityP50 })
		m.pairRatio = med(func(r *Row) float64 { return r.pairRatio }) // the median of the rounds' ratios
		m.Curve = make([][2]float64, len(rs[0].Curve))
		for i := range m.Curve {
			m.Curve[i] = [2]float64{rs[0].Curve[i][0], med(func(r *Row) float64 {
				if i < len(r.Curve) {
					return r.Curve[i][1]
				}
				return 0
			})}
		}
		out = append(out, &m)
	}
	return out
}

// model counts the round trips of a cold start until the answer has arrived.
//
//	MySQL+TLS: TCP (1) + server greeting after the handshake (1) + TLS 1.3 (1) +
//	           auth (1) + query (1) = 5; resumption saves CPU, not round trips
//	           (MySQL has no early data).
//	HTTP/2:    TCP (1) + TLS 1.3 (1) + request (1) = 3, with or without resumption.
//	HTTP/3:    QUIC+TLS (1) + request (1) = 2; 0-RTT: the request rides the first flight = 1.
func model(client, variant string) float64 {
	switch {
	case client == "mysql":
		return 5
	case client == "h2":
		return 3
	case variant == "0rtt":
		return 1
	default:
		return 2
	}
}

// ratios fills p50/p95 relative to the mysql row with the same workload, net,
// vus and baseline variant (see baseVariant).
func ratios(rows []*Row) {
	bkey := func(r *Row, variant string) string {
		return strings.Join([]string{r.Workload, r.Net, fmt.Sprint(r.VUs), variant}, "|")
	}
	base := map[string]*Row{}
	same := map[string]*Row{} // every row by client too, for the ×identity ratio
	for _, r := range rows {
		if r.Client == "mysql" || r.Client == "mysql80" {
			base[r.Client+"|"+bkey(r, r.Variant)] = r
		}
		same[r.Client+"|"+bkey(r, r.Variant)] = r
	}
	for _, r := range rows {
		bc := "mysql"
		if r.Client == "mysql80" {
			bc = "mysql80" // MySQL 8.0 against itself; Ferry and MariaDB against MariaDB
		}
		if b := base[bc+"|"+bkey(r, baseVariant(r.Variant))]; b != nil && b.P50 > 0 && b.P95 > 0 {
			r.P50Ratio, r.P95Ratio = r.P50/b.P50, r.P95/b.P95
		}
		if r.pairRatio > 0 {
			r.P50VsIdentity = r.pairRatio // measured against its own identity twin
		} else if p := strings.SplitN(r.Variant, ",", 3); len(p) > 1 && r.Client != "mysql" && r.Client != "mysql80" {
			ident := p[0] + ",identity" // same rows, same format ("rows,codec[,proto]")
			if len(p) == 3 {
				ident += "," + p[2]
			}
			if b := same[r.Client+"|"+bkey(r, ident)]; b != nil && b.P50 > 0 {
				r.P50VsIdentity = r.P50 / b.P50
			}
		}
	}
}

// baseVariant: 0-RTT compares with MySQL with resumption (its best cold start);
// the compression runs ("table,codec[,proto]") with uncompressed MySQL on the same table;
// the cost runs (json, proto) with plain MySQL.
func baseVariant(v string) string {
	if v == "0rtt" {
		return "resume"
	}
	if v == "json" || v == "proto" { // the cost benchmark's Ferry formats: against plain MySQL
		return ""
	}
	if table, _, ok := strings.Cut(v, ","); ok {
		return table + ",none"
	}
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
