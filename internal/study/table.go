package study

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/headroom-bench/headroom/internal/stats"
)

// WriteCoverage writes the study's tables in Markdown: one row a recipe,
// then each recipe's truth and step intervals level by level.
func WriteCoverage(w io.Writer, all []Coverage) error {
	var b strings.Builder
	b.WriteString("| recipe | runs | true capacity (bracket) | capacity coverage | capacity half-width / calibrated | TTFT step coverage | interactivity step coverage | false pass | false fail | GPU-min per sweep | wall |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range all {
		fmt.Fprintf(&b, "| %s | %d | %s (%d-%d) | %s | %s | %s | %s | %s | %s | %.0f (%.0f-%.0f) | %.0f s |\n",
			c.Recipe, c.Runs, capText(c.Truth.Capacity), c.Truth.Bracket[0], c.Truth.Bracket[1], c.Capacity, widthText(c.CapacityWidth),
			c.TTFT, c.Interactivity, c.FalsePass, c.FalseFail, c.GPUMinutes.Mean, c.GPUMinutes.Min, c.GPUMinutes.Max, c.WallS)
	}
	for _, c := range all {
		fmt.Fprintf(&b, "\n%s: capacity intervals above the truth %d, below %d\n\n", c.Recipe, c.CapacityAbove, c.CapacityBelow)
		b.WriteString("| sessions | truth runs (windows) | true TTFT P90 | true interactivity P90 | true errors | part | steps | coverage | above / below | half-width / calibrated |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, l := range c.Truth.Levels {
			fine := ""
			if l.Fine {
				fine = " (fine)"
			}
			if l.Cold {
				fine += " (cold)"
			}
			fine += fmt.Sprintf(" | %d (%d)", l.Runs, l.Windows)
			row := false
			for _, p := range c.Steps {
				if p.Sessions != l.Sessions {
					continue
				}
				row = true
				fmt.Fprintf(&b, "| %d%s | %.3f s | %.2f tok/s | %.2f%% | %s | %d | %s | %d / %d | %s |\n", l.Sessions, fine, l.TTFTP90, l.InteractivityP90, 100*l.ErrorRate,
					p.Part, p.Covered.N, p.Covered, p.Above, p.Below, widthText(p.Width))
			}
			if !row {
				fmt.Fprintf(&b, "| %d%s | %.3f s | %.2f tok/s | %.2f%% | - | 0 | | | |\n", l.Sessions, fine, l.TTFTP90, l.InteractivityP90, 100*l.ErrorRate)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func capText(x float64) string {
	if math.IsInf(x, 1) {
		return "beyond every level"
	}
	return fmt.Sprintf("%.2f", x)
}

// widthText is "mean half-width / 1.96 sd = ratio (n estimates)" (n/a with fewer than two
// estimates or no finite interval).
func widthText(w Width) string {
	if math.IsNaN(w.MeanHalfWidth) || math.IsNaN(w.Calibrated) {
		return fmt.Sprintf("n/a (%d estimates, %d finite)", w.N, w.Finite)
	}
	return fmt.Sprintf("%.3g / %.3g = %.2f (n %d)", w.MeanHalfWidth, w.Calibrated, w.Ratio(), w.N)
}

// The study's figures can be NaN (nothing to measure) or infinite (a truth
// that never crossed, an open interval); JSON writes those as strings, as
// stats.Number does.

// MarshalJSON writes the level with non-finite values as strings.
func (l Level) MarshalJSON() ([]byte, error) {
	type plain Level
	return json.Marshal(struct {
		plain
		TTFTP90          stats.Number `json:"ttft_p90_s"`
		InteractivityP90 stats.Number `json:"interactivity_p90_tps"`
		ErrorRate        stats.Number `json:"error_rate"`
	}{plain(l), stats.Number(l.TTFTP90), stats.Number(l.InteractivityP90), stats.Number(l.ErrorRate)})
}

// MarshalJSON writes the truth with an infinite capacity as "+Inf".
func (t Truth) MarshalJSON() ([]byte, error) {
	type plain Truth
	return json.Marshal(struct {
		plain
		Capacity stats.Number `json:"capacity"`
	}{plain(t), stats.Number(t.Capacity)})
}

// MarshalJSON writes the width with non-finite values as strings.
func (w Width) MarshalJSON() ([]byte, error) {
	type plain Width
	return json.Marshal(struct {
		plain
		MeanHalfWidth stats.Number `json:"mean_half_width"`
		SD            stats.Number `json:"sd"`
		Calibrated    stats.Number `json:"calibrated"`
		CalibratedHi  stats.Number `json:"calibrated_hi"`
	}{plain(w), stats.Number(w.MeanHalfWidth), stats.Number(w.SD), stats.Number(w.Calibrated), stats.Number(w.CalibratedHi)})
}

// MarshalJSON writes the part's truth as a string when it is not finite.
func (p PartLevel) MarshalJSON() ([]byte, error) {
	type plain PartLevel
	return json.Marshal(struct {
		plain
		Truth stats.Number `json:"truth"`
	}{plain(p), stats.Number(p.Truth)})
}
