package report

import "strconv"

// The run's clock, as the renderings name it: a summary's time_scale is
// modelled seconds per wall second, 0 for a virtual clock (which has none).

// wallOf is modelled seconds in wall seconds at the run's time scale
// (modelled seconds per wall second; 0 is a virtual clock, which has none).
func wallOf(modelled, scale float64) float64 {
	if scale <= 0 {
		return 0
	}
	return modelled / scale
}

// timeScaleWords is the run's time scale as the renderings name it:
// "virtual clock" for 0, which is what a virtual clock's summary holds.
func timeScaleWords(scale float64) string {
	if scale == 0 {
		return "virtual clock"
	}
	return strconv.FormatFloat(scale, 'g', -1, 64)
}

// timeScaleField is the report's Time scale field: the scale in
// modelled seconds per wall second, or the virtual clock's words.
func timeScaleField(scale float64) string {
	if scale == 0 {
		return "virtual clock (modelled time jumps from one event to the next)"
	}
	return strconv.FormatFloat(scale, 'g', -1, 64) + " (modelled seconds per wall second)"
}
