package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Scale is the run's clock: modelled seconds per wall second, or Virtual.
type Scale float64

// Virtual is the scale of a virtual clock: `time_scale: virtual` in a run
// file. Modelled time jumps from one event to the next.
const Virtual Scale = -1

// Virtual reports whether the run is on a virtual clock.
func (s Scale) Virtual() bool { return s == Virtual }

// Wall is the scale as a number of modelled seconds per wall second; a
// virtual clock has none, and Wall says 0.
func (s Scale) Wall() float64 {
	if s.Virtual() {
		return 0
	}
	return float64(s)
}

// String is "virtual" or the number.
func (s Scale) String() string {
	if s.Virtual() {
		return "virtual"
	}
	return strconv.FormatFloat(float64(s), 'g', -1, 64)
}

// UnmarshalJSON reads a number or the word "virtual".
func (s *Scale) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		var w string
		if err := json.Unmarshal(b, &w); err != nil {
			return err
		}
		if w == "virtual" {
			*s = Virtual
			return nil
		}
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return fmt.Errorf("time scale %q: give a number of modelled seconds per wall second (1 for real time) or \"virtual\"", w)
		}
		*s = Scale(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("time scale %s: give a number or \"virtual\"", b)
	}
	*s = Scale(f)
	return nil
}

// MarshalJSON writes "virtual" or the number.
func (s Scale) MarshalJSON() ([]byte, error) {
	if s.Virtual() {
		return []byte(`"virtual"`), nil
	}
	return json.Marshal(float64(s))
}
