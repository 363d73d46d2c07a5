// Package metrics keeps ffrun's counters and histograms and writes them,
// together with gauges read at scrape time, in the Prometheus text
// exposition format (version 0.0.4).
//
// It depends on the standard library only: ffrun exposes a few metric
// families, and the format is a page of text. Counters and histograms are
// safe for concurrent use and do not allocate once a series exists, so the
// HTTP middleware can count every request.
//
// Registration mistakes (an invalid or repeated name, too many labels, a
// wrong number of label values) are programming errors and panic.
package metrics

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the media type of Registry.Write's output.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// MaxLabels bounds the labels of one family.
const MaxLabels = 4

var (
	nameRE  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// labelValues is the key of one series: its label values in the family's
// label order. An array, so that looking a series up does not allocate.
type labelValues [MaxLabels]string

// family is a registered counter or histogram family.
type family interface {
	name() string
	write(b *bytes.Buffer)
}

// Registry holds metric families and the collectors that add gauges at
// scrape time. The zero value is not usable; call NewRegistry.
type Registry struct {
	mu         sync.Mutex
	families   map[string]family
	collectors []Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]family{}}
}

// Collector returns gauge families read when the registry is written (the
// state of Valkey, of the process). It reports its own failures in what it
// returns (an "up" gauge at 0, say): a scrape always answers.
type Collector func(ctx context.Context) []GaugeFamily

// GaugeFamily is a gauge and its samples, read at scrape time.
type GaugeFamily struct {
	Name    string
	Help    string
	Labels  []string // label names
	Samples []Sample
}

// Sample is one series of a gauge family.
type Sample struct {
	Values []string // label values, in the order of GaugeFamily.Labels
	Value  float64
}

// AddCollector adds c to the collectors run by every Write.
func (r *Registry) AddCollector(c Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
}

func (r *Registry) register(f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[f.name()]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", f.name()))
	}
	r.families[f.name()] = f
}

func checkNames(name string, labels []string) {
	if !nameRE.MatchString(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	if len(labels) > MaxLabels {
		panic(fmt.Sprintf("metrics: %s has %d labels, at most %d", name, len(labels), MaxLabels))
	}
	for _, l := range labels {
		if !labelRE.MatchString(l) || strings.HasPrefix(l, "__") || l == "le" {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		}
	}
}

// key builds the series key of values, which must match the labels.
func key(name string, labels, values []string) labelValues {
	if len(values) != len(labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", name, len(labels), len(values)))
	}
	var k labelValues
	copy(k[:], values)
	return k
}

// CounterVec is a counter family with labels.
type CounterVec struct {
	fname, help string
	labels      []string

	mu     sync.RWMutex
	series map[labelValues]*atomic.Uint64
}

// Counter registers a counter family. Its name should end in _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	checkNames(name, labels)
	c := &CounterVec{fname: name, help: help, labels: labels, series: map[labelValues]*atomic.Uint64{}}
	r.register(c)
	return c
}

func (c *CounterVec) name() string { return c.fname }

// Add adds n to the series of the label values.
func (c *CounterVec) Add(n uint64, values ...string) {
	k := key(c.fname, c.labels, values)
	c.mu.RLock()
	v := c.series[k]
	c.mu.RUnlock()
	if v == nil {
		c.mu.Lock()
		if v = c.series[k]; v == nil {
			v = new(atomic.Uint64)
			c.series[k] = v
		}
		c.mu.Unlock()
	}
	v.Add(n)
}

// Inc adds one to the series of the label values.
func (c *CounterVec) Inc(values ...string) { c.Add(1, values...) }

// Value returns the count of the series of the label values (0 when it
// has none).
func (c *CounterVec) Value(values ...string) uint64 {
	k := key(c.fname, c.labels, values)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v := c.series[k]; v != nil {
		return v.Load()
	}
	return 0
}

func (c *CounterVec) write(b *bytes.Buffer) {
	c.mu.RLock()
	keys := sortedKeys(c.series)
	vals := make([]uint64, len(keys))
	for i, k := range keys {
		vals[i] = c.series[k].Load()
	}
	c.mu.RUnlock()
	header(b, c.fname, c.help, "counter")
	for i, k := range keys {
		sample(b, c.fname, c.labels, k[:len(c.labels)], "", float64(vals[i]))
	}
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct {
	fname, help string
	labels      []string
	bounds      []float64 // upper bounds, increasing; +Inf is implied

	mu     sync.RWMutex
	series map[labelValues]*histogram
}

type histogram struct {
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // float64 bits
}

// Histogram registers a histogram family with the given bucket upper
// bounds (increasing, finite; +Inf is added).
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *HistogramVec {
	checkNames(name, labels)
	for i, v := range bounds {
		if math.IsInf(v, 0) || math.IsNaN(v) || i > 0 && v <= bounds[i-1] {
			panic(fmt.Sprintf("metrics: %s: bucket bounds must be finite and strictly increasing", name))
		}
	}
	if len(bounds) == 0 {
		panic(fmt.Sprintf("metrics: %s: no bucket bounds", name))
	}
	h := &HistogramVec{fname: name, help: help, labels: labels, bounds: slices.Clone(bounds), series: map[labelValues]*histogram{}}
	r.register(h)
	return h
}

func (h *HistogramVec) name() string { return h.fname }

// Observe records v in the series of the label values.
func (h *HistogramVec) Observe(v float64, values ...string) {
	k := key(h.fname, h.labels, values)
	h.mu.RLock()
	s := h.series[k]
	h.mu.RUnlock()
	if s == nil {
		h.mu.Lock()
		if s = h.series[k]; s == nil {
			s = &histogram{counts: make([]atomic.Uint64, len(h.bounds)+1)}
			h.series[k] = s
		}
		h.mu.Unlock()
	}
	// The first bucket whose bound is at least v (le: "less or equal").
	s.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Count returns how many values the series of the label values recorded.
func (h *HistogramVec) Count(values ...string) uint64 {
	k := key(h.fname, h.labels, values)
	h.mu.RLock()
	defer h.mu.RUnlock()
	s := h.series[k]
	if s == nil {
		return 0
	}
	var n uint64
	for i := range s.counts {
		n += s.counts[i].Load()
	}
	return n
}

func (h *HistogramVec) write(b *bytes.Buffer) {
	h.mu.RLock()
	keys := sortedKeys(h.series)
	series := make([]*histogram, len(keys))
	for i, k := range keys {
		series[i] = h.series[k]
	}
	h.mu.RUnlock()
	header(b, h.fname, h.help, "histogram")
	labels := append(slices.Clone(h.labels), "le")
	for i, k := range keys {
		s := series[i]
		values := append(slices.Clone(k[:len(h.labels)]), "")
		var n uint64
		for j := range s.counts {
			n += s.counts[j].Load()
			values[len(values)-1] = "+Inf"
			if j < len(h.bounds) {
				values[len(values)-1] = formatFloat(h.bounds[j])
			}
			sample(b, h.fname, labels, values, "_bucket", float64(n))
		}
		// _count is the +Inf bucket, so the two always agree even while
		// observations land during the write.
		sample(b, h.fname, h.labels, k[:len(h.labels)], "_sum", math.Float64frombits(s.sum.Load()))
		sample(b, h.fname, h.labels, k[:len(h.labels)], "_count", float64(n))
	}
}

func sortedKeys[V any](m map[labelValues]V) []labelValues {
	keys := make([]labelValues, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b labelValues) int {
		for i := range a {
			if c := cmp.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return keys
}

// Write writes every family, registered and collected, sorted by name. A
// collected family whose name is already taken, or that is malformed, is
// left out and reported in the error; the rest is written all the same.
func (r *Registry) Write(ctx context.Context, w io.Writer) error {
	r.mu.Lock()
	fams := make([]family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	collectors := slices.Clone(r.collectors)
	r.mu.Unlock()

	var errs []string
	taken := map[string]bool{}
	for _, f := range fams {
		taken[f.name()] = true
	}
	for _, c := range collectors {
		for _, g := range c(ctx) {
			if err := g.check(); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if taken[g.Name] {
				errs = append(errs, fmt.Sprintf("metrics: collected family %s is already registered", g.Name))
				continue
			}
			taken[g.Name] = true
			fams = append(fams, g)
		}
	}
	slices.SortFunc(fams, func(a, b family) int { return cmp.Compare(a.name(), b.name()) })
	var b bytes.Buffer
	for _, f := range fams {
		f.write(&b)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("metrics: write: %w", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (g GaugeFamily) name() string { return g.Name }

func (g GaugeFamily) check() error {
	if !nameRE.MatchString(g.Name) {
		return fmt.Errorf("metrics: invalid metric name %q", g.Name)
	}
	for _, l := range g.Labels {
		if !labelRE.MatchString(l) || strings.HasPrefix(l, "__") {
			return fmt.Errorf("metrics: %s: invalid label name %q", g.Name, l)
		}
	}
	for _, s := range g.Samples {
		if len(s.Values) != len(g.Labels) {
			return fmt.Errorf("metrics: %s: a sample has %d label values for %d labels", g.Name, len(s.Values), len(g.Labels))
		}
	}
	return nil
}

func (g GaugeFamily) write(b *bytes.Buffer) {
	header(b, g.Name, g.Help, "gauge")
	for _, s := range g.Samples {
		sample(b, g.Name, g.Labels, s.Values, "", s.Value)
	}
}

func header(b *bytes.Buffer, name, help, typ string) {
	b.WriteString("# HELP ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(escape(help, false))
	b.WriteString("\n# TYPE ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(typ)
	b.WriteByte('\n')
}

func sample(b *bytes.Buffer, name string, labels, values []string, suffix string, v float64) {
	b.WriteString(name)
	b.WriteString(suffix)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
			b.WriteString(`="`)
			b.WriteString(escape(values[i], true))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

// escape escapes a HELP text (backslash, newline) or a label value (also
// the double quote), as the format requires.
func escape(s string, quote bool) string {
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '"' && quote:
			sb.WriteString(`\"`)
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
