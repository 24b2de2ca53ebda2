// Package stats computes the statistics headroom judges with: quantiles from
// Prometheus-style histograms, bootstrap intervals over windows, and binomial
// intervals. Every result carries its uncertainty.
package stats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Summary is a statistic with its uncertainty: a center, an interval at a
// stated confidence, and the caveats a reader must see next to it.
type Summary struct {
	Center     float64  `json:"value"`
	Lo         float64  `json:"lo"`
	Hi         float64  `json:"hi"`
	Confidence float64  `json:"confidence"`
	Warnings   []string `json:"warnings,omitempty"`
}

// String formats the summary as "center [lo, hi] @95%".
func (s Summary) String() string {
	return fmt.Sprintf("%.4g [%.4g, %.4g] @%g%%", s.Center, s.Lo, s.Hi, s.Confidence*100)
}

// MarshalJSON writes the summary with non-finite numbers as "+Inf", "-Inf" or
// "NaN" strings, since JSON has no infinities and an open-ended interval is a
// normal result.
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(summaryJSON{Number(s.Center), Number(s.Lo), Number(s.Hi), s.Confidence, s.Warnings})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var j summaryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Summary{float64(j.Center), float64(j.Lo), float64(j.Hi), j.Confidence, j.Warnings}
	return nil
}

type summaryJSON struct {
	Center     Number   `json:"value"`
	Lo         Number   `json:"lo"`
	Hi         Number   `json:"hi"`
	Confidence float64  `json:"confidence"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Number is a float64 that survives JSON when it is infinite or NaN: those are
// written as the strings "+Inf", "-Inf" and "NaN" (Prometheus spelling).
type Number float64

// MarshalJSON writes finite values as JSON numbers and the rest as strings.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads a JSON number or one of the strings MarshalJSON writes.
func (n *Number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f, err := strconv.ParseFloat(strings.TrimPrefix(s, "+"), 64)
		if err != nil {
			return fmt.Errorf("number %q is neither a JSON number nor +Inf, -Inf or NaN", s)
		}
		*n = Number(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}
