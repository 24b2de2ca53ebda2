package report

import (
	"encoding/json"
	"fmt"
	"sort"
)

// ReportVersion is the version of report.json.
const ReportVersion = 1

// Render reads a run directory and writes its four renderings next to the
// data: report.md, report.json (the summary and the gauges over time),
// junit.xml and the self-contained report.html. It sends no load and can be
// run again at any time.
func Render(d *Dir) error {
	r, err := LoadRun(d)
	if err != nil {
		return err
	}
	return RenderRun(d, r)
}

// RenderRun writes the renderings of a run already in memory, e.g. the run
// that just finished.
func RenderRun(d *Dir, r Run) error {
	if r.Summary.RunDir == "" {
		r.Summary.RunDir = d.Path()
	}
	if err := d.WriteFile("report.md", Markdown(r.Summary)); err != nil {
		return fmt.Errorf("write report.md: %w", err)
	}
	js, err := ReportJSON(r)
	if err != nil {
		return err
	}
	if err := d.WriteFile("report.json", js); err != nil {
		return fmt.Errorf("write report.json: %w", err)
	}
	ju, err := JUnit(r.Summary)
	if err != nil {
		return err
	}
	if err := d.WriteFile("junit.xml", ju); err != nil {
		return fmt.Errorf("write junit.xml: %w", err)
	}
	if err := d.WriteFile("report.html", HTML(r)); err != nil {
		return fmt.Errorf("write report.html: %w", err)
	}
	return nil
}

// ReportJSON renders report.json: the summary, the gauges over time and
// whether the summary was rebuilt from a killed run.
func ReportJSON(r Run) ([]byte, error) {
	doc := struct {
		Version int `json:"version"`
		Run
	}{ReportVersion, r}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report.json: %w", err)
	}
	return append(b, '\n'), nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
