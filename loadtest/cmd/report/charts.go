package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// charts draws, per workload, the latency distribution (percentile → ms, log
// scale: the networks differ by orders of magnitude) of every client × network;
// and for the concurrency sweep, throughput and p95 against VUs.
func charts(rows []*Row, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	by := map[string][]*Row{}
	for _, r := range rows {
		by[r.Workload] = append(by[r.Workload], r)
	}
	for w, rs := range by {
		if w == "point-select" {
			if err := sweepCharts(rs, dir); err != nil {
				return err
			}
			continue
		}
		if err := distribution(w, rs, filepath.Join(dir, w+".png")); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// distribution draws one panel per network (their scales differ by orders of
// magnitude), each with the latency percentile curve of every client × variant.
func distribution(w string, rs []*Row, file string) error {
	var nets []string
	byNet := map[string][]*Row{}
	for _, r := range rs {
		if _, ok := byNet[r.Net]; !ok {
			nets = append(nets, r.Net)
		}
		byNet[r.Net] = append(byNet[r.Net], r)
	}
	panels := make([][]*plot.Plot, len(nets))
	for i, n := range nets {
		p, err := panel(w+" on "+n+": latency distribution", byNet[n])
		if err != nil {
			return err
		}
		panels[i] = []*plot.Plot{p}
	}
	img := vgimg.New(9*vg.Inch, vg.Length(len(nets))*4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(nets), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(6), PadY: vg.Points(12)}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err
}

func panel(title string, rs []*Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "ms (log)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks125{}
	p.Legend.Top, p.Legend.Left = true, true
	dashes := map[string]int{}
	for _, r := range rs {
		pts := plotter.XYs{}
		for _, c := range r.Curve {
			if c[1] > 0 { // log scale: no zeros
				pts = append(pts, plotter.XY{X: c[0], Y: c[1]})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		if _, ok := dashes[r.Variant]; !ok {
			dashes[r.Variant] = len(dashes)
		}
		l.Color, l.Dashes, l.Width = plotutil.Color(order[r.Client]-1), plotutil.Dashes(dashes[r.Variant]), vg.Points(1.5)
		p.Add(l)
		name := r.Client
		if r.Variant != "" {
			name += " " + r.Variant
		}
		p.Legend.Add(name, l)
	}
	// Round the range out to 1-2-5 steps, then leave room above for the legend.
	p.Y.Min, p.Y.Max = step125(p.Y.Min, false), step125(p.Y.Max, true)
	p.Y.Max *= math.Max(1.5, math.Pow(p.Y.Max/p.Y.Min, 0.5))
	return p, nil
}

// sweepCharts: one line per client × net, x = VUs.
func sweepCharts(rs []*Row, dir string) error {
	for _, m := range []struct {
		name, label string
		y           func(*Row) float64
	}{{"sweep-concurrency-qps", "queries/s", func(r *Row) float64 { return r.QPS }},
		{"sweep-concurrency-p95", "p95 ms", func(r *Row) float64 { return r.P95 }}} {
		p := plot.New()
		p.Title.Text = "point select: " + m.label + " vs concurrency"
		p.X.Label.Text, p.Y.Label.Text = "VUs (log)", m.label
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, ticks125{}
		p.Legend.Top, p.Legend.Left = true, true
		lines := map[string]plotter.XYs{}
		colour := map[string]int{}
		var names []string
		for _, r := range rs {
			n := r.Client + " " + r.Net
			if _, ok := lines[n]; !ok {
				names = append(names, n)
				colour[n] = order[r.Client] - 1 // same colour per client as the other charts
			}
			if y := m.y(r); !math.IsNaN(y) && r.VUs > 0 {
				lines[n] = append(lines[n], plotter.XY{X: float64(r.VUs), Y: y})
			}
		}
		sort.Strings(names)
		for _, n := range names {
			l, s, err := plotter.NewLinePoints(lines[n])
			if err != nil {
				return err
			}
			l.Color, s.Color = plotutil.Color(colour[n]), plotutil.Color(colour[n])
			p.Add(l, s)
			p.Legend.Add(n, l, s)
		}
		p.Y.Min = 0
		p.Y.Max *= 1.25 // room for the legend
		if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, m.name+".png")); err != nil {
			return err
		}
	}
	return nil
}

// ticks125 labels a log axis at 1, 2, 5 × 10^k (gonum's LogTicks labels only powers of ten).
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return ts
}

// step125 rounds v down (or up) to the nearest 1, 2 or 5 × 10^k.
func step125(v float64, up bool) float64 {
	if v <= 0 {
		return v
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	steps := []float64{1, 2, 5, 10}
	if up {
		for _, m := range steps {
			if m*e >= v {
				return m * e
			}
		}
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i]*e <= v {
			return steps[i] * e
		}
	}
	return v
}
