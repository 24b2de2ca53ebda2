package signal

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/headroom-bench/headroom/internal/stats"
)

// Sample is one reading of every target, mapped to common names, with series
// summed across targets, labels and ranks (except kv_cache_usage, a fraction,
// which keeps the fullest series).
//
// Parts keeps the raw counter and histogram values of each series group that
// went into the sums (one engine copy or rank of one target, keyed by target
// and labels), so Windows can see a restart of one copy that another copy's
// growth hides in the sum, and can skip a copy that missed one scrape. Samples
// without Parts (built by hand, or written before parts were kept) count their
// sums as a single part.
type Sample struct {
	At      time.Duration              `json:"at"` // modelled time since run start
	Hist    map[string]stats.Histogram `json:"hist"`
	Counter map[string]float64         `json:"counter"`
	Gauge   map[string]float64         `json:"gauge"`
	Parts   map[string]Part            `json:"parts,omitempty"`
	Errors  []string                   `json:"errors,omitempty"` // targets that failed this scrape
}

// Part is the raw values of one series group in a sample.
type Part struct {
	Counter map[string]float64  `json:"counter,omitempty"`
	Hist    map[string]PartHist `json:"hist,omitempty"`
}

// PartHist is one part's histogram without its bucket bounds, which are those
// of the sample's summed histogram of the same name.
type PartHist struct {
	Cumulative []float64    `json:"cumulative"`
	Count      float64      `json:"count"`
	Sum        stats.Number `json:"sum"`
}

// NewSample returns an empty sample taken at modelled time at.
func NewSample(at time.Duration) Sample {
	return Sample{At: at, Hist: map[string]stats.Histogram{}, Counter: map[string]float64{}, Gauge: map[string]float64{}}
}

func (s *Sample) init() {
	if s.Hist == nil {
		s.Hist = map[string]stats.Histogram{}
	}
	if s.Counter == nil {
		s.Counter = map[string]float64{}
	}
	if s.Gauge == nil {
		s.Gauge = map[string]float64{}
	}
}

func (s *Sample) part(key string) Part {
	if s.Parts == nil {
		s.Parts = map[string]Part{}
	}
	p, ok := s.Parts[key]
	if !ok {
		p = Part{Counter: map[string]float64{}, Hist: map[string]PartHist{}}
		s.Parts[key] = p
	}
	return p
}

// addCounter adds one series of a counter to the sum and to its part.
func (s *Sample) addCounter(part, name string, v float64) {
	s.Counter[name] += v
	s.part(part).Counter[name] += v
}

// addHist adds one series of a histogram to the sum and to its part. A
// series whose buckets differ from the sum's is left out of both.
func (s *Sample) addHist(part, name string, h stats.Histogram) error {
	sum, err := s.Hist[name].Add(h)
	if err != nil {
		return err
	}
	s.Hist[name] = sum
	p := s.part(part)
	ph := p.Hist[name]
	if ph.Cumulative == nil {
		ph.Cumulative = make([]float64, len(h.Cumulative))
	}
	if len(ph.Cumulative) != len(h.Cumulative) {
		return fmt.Errorf("part %s has %d buckets before and %d now", part, len(ph.Cumulative), len(h.Cumulative))
	}
	for i, c := range h.Cumulative {
		ph.Cumulative[i] += c
	}
	ph.Count += h.Count
	ph.Sum += stats.Number(h.Sum)
	p.Hist[name] = ph
	return nil
}

// addGauge combines one more series of a gauge: fractions (KV cache usage)
// take the fullest copy, since one full copy is what stalls requests; counts
// of requests are summed.
func (s *Sample) addGauge(name string, v float64) {
	old, ok := s.Gauge[name]
	switch {
	case !ok:
		s.Gauge[name] = v
	case name == KVCacheUsage:
		s.Gauge[name] = math.Max(old, v)
	default:
		s.Gauge[name] = old + v
	}
}

// Merge adds another target's sample into s (At and Errors of s are kept,
// o's errors appended; parts with the same key are added). Histograms with
// different bounds are not merged and are reported in the error.
func (s *Sample) Merge(o Sample) error {
	s.init()
	var errs []error
	skip := map[string]bool{}
	for name, h := range o.Hist {
		sum, err := s.Hist[name].Add(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			skip[name] = true
			continue
		}
		s.Hist[name] = sum
	}
	for name, v := range o.Counter {
		s.Counter[name] += v
	}
	for name, v := range o.Gauge {
		s.addGauge(name, v)
	}
	for key, op := range o.Parts {
		p := s.part(key)
		for name, v := range op.Counter {
			p.Counter[name] += v
		}
		for name, oh := range op.Hist {
			if skip[name] {
				continue
			}
			ph := p.Hist[name]
			if ph.Cumulative == nil {
				ph.Cumulative = make([]float64, len(oh.Cumulative))
			}
			if len(ph.Cumulative) != len(oh.Cumulative) {
				errs = append(errs, fmt.Errorf("%s: part %s has %d and %d buckets", name, key, len(ph.Cumulative), len(oh.Cumulative)))
				continue
			}
			for i, c := range oh.Cumulative {
				ph.Cumulative[i] += c
			}
			ph.Count += oh.Count
			ph.Sum += oh.Sum
			p.Hist[name] = ph
		}
	}
	s.Errors = append(s.Errors, o.Errors...)
	return errors.Join(errs...)
}
