package calibrate

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/sim"
)

// ProfileYAML is the fitted profile as a profile file (what
// recipe.sim.profile and `headroom sim serve --profile` read), with a
// comment per field saying where its value came from.
func (f Fit) ProfileYAML(sources []string) ([]byte, error) {
	body, err := yaml.Marshal(sim.ProfileFile{Profile: f.Profile})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Fitted by `headroom sim calibrate` from %s.\n", strings.Join(sources, ", "))
	fmt.Fprintf(&b, "# Behaves like %s; the timing fit's error is %.2g s per decode iteration.\n", f.Personality, f.RMS)
	fmt.Fprintf(&b, "# Each field: value +- the fit's standard error (statistical only): where it came from.\n")
	for _, p := range f.Params {
		se := ""
		if p.SE > 0 {
			se = fmt.Sprintf(" +- %.2g", p.SE)
		}
		fmt.Fprintf(&b, "#   %s = %.4g%s [%s]: %s\n", p.Field, p.Value, se, p.Status, p.Source)
	}
	for _, n := range f.Notes {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	b.Write(body)
	// the file must read back as the profile it was written from
	if _, err := sim.ParseProfile(b.Bytes(), "the fitted profile"); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
