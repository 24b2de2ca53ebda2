package report

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/stats"
)

// csvNum prints a number for a spreadsheet: empty when not measured.
func csvNum(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	if math.IsInf(v, -1) {
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// csvRound prints a number rounded to digits decimal places, without
// trailing zeros; empty when not measured.
func csvRound(v float64, digits int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return csvNum(v)
	}
	p := math.Pow(10, float64(digits))
	r := math.Round(v*p) / p
	if r == 0 {
		r = 0 // no "-0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// StepsCSV is steps.csv: one row per judged step, in the order run,
// counted from 1 as every other view counts them, with each part's P90 or
// share and its 95% interval. Errors and the prefix-cache hit rate are in
// percent, as every rendering shows them, numbers a spreadsheet reads; a
// value not measured is empty. Seconds are rounded to the millisecond,
// tokens/s and percents to 3 decimals.
func StepsCSV(s Summary) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"step", "sessions", "run", "pooled", "verdict",
		"ttft_p90_s", "ttft_p90_lo_s", "ttft_p90_hi_s",
		"interactivity_p90_tps", "interactivity_p90_lo_tps", "interactivity_p90_hi_tps",
		"errors_pct", "errors_lo_pct", "errors_hi_pct",
		"turns_planned", "turns_sent", "not_reached", "unsent", "client_errors",
		"in_flight_per_session", "cache_hit_pct", "start_s", "measure_start_s", "end_s", "windows"})
	runs := map[int]int{}
	for i, st := range s.Steps {
		runs[st.Sessions]++
		three := func(v stats.Summary, scale float64) []string {
			return []string{csvRound(v.Center*scale, 3), csvRound(v.Lo*scale, 3), csvRound(v.Hi*scale, 3)}
		}
		row := []string{fmt.Sprint(i + 1), fmt.Sprint(st.Sessions), fmt.Sprint(runs[st.Sessions]), fmt.Sprint(runs[st.Sessions] > 1), string(st.Verdict)}
		row = append(row, three(st.TTFTP90, 1)...)
		row = append(row, three(st.InteractivityP90, 1)...)
		row = append(row, three(st.ErrorRate, 100)...)
		row = append(row, fmt.Sprint(st.Load.Planned), fmt.Sprint(st.Load.Sent), fmt.Sprint(st.Load.NotReached), fmt.Sprint(st.Load.Unsent), fmt.Sprint(st.Load.ClientErrors),
			csvRound(st.Load.InFlightPerSession, 3), csvRound(cacheHitPct(st), 3), csvRound(st.StartS, 3), csvRound(st.MeasureStartS, 3), csvRound(st.EndS, 3), fmt.Sprint(st.Windows))
		_ = w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}

// cacheHitPct is the step's prefix-cache hit rate in percent; NaN (an
// empty cell) where Step.CacheHit says "not reported" or "no data".
func cacheHitPct(st Step) float64 {
	if !st.CacheReported && st.Tokens.Cached <= 0 || st.Tokens.Prompt <= 0 {
		return math.NaN()
	}
	return 100 * st.Tokens.Cached / st.Tokens.Prompt
}

// recordColumns are records.csv's columns: every field of load.Record, by
// its JSON name, so a field added to the record reaches the CSV too.
func recordColumns() (names []string, index []int) {
	t := reflect.TypeOf(load.Record{})
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		names = append(names, tag)
		index = append(index, i)
	}
	return names, index
}

// writeRecordsCSV writes records.csv from records.jsonl: one row per
// request, with the client-side TTFT as a last column. A run directory
// without records gets none.
func writeRecordsCSV(d *Dir) error {
	f, ok, err := d.openRecords()
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	defer f.Close()
	names, index := recordColumns()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(append(append([]string(nil), names...), "ttft_s"))
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r load.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			break // a killed run's torn last line
		}
		v := reflect.ValueOf(r)
		row := make([]string, 0, len(index)+1)
		for _, i := range index {
			switch x := v.Field(i).Interface().(type) {
			case float64:
				row = append(row, csvNum(x))
			default:
				row = append(row, fmt.Sprint(x))
			}
		}
		ttft := ""
		if r.FirstToken > 0 {
			ttft = csvNum(r.TTFT())
		}
		_ = w.Write(append(row, ttft))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return d.WriteFile("records.csv", b.Bytes())
}
