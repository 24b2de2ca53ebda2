package signal

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// Cutting an exposition down to the families a scrape reads parses those
// families exactly as parsing the whole text does, for every engine's
// exposition in testdata and its mapping, and reads a sample the same.
func TestKeepFamiliesParsesTheSame(t *testing.T) {
	for _, tc := range []struct {
		file string
		m    Mapping
	}{
		{"vllm_metrics.txt", VLLM()},
		{"vllm_finish_reason_metrics.txt", VLLM()},
		{"sglang_metrics.txt", SGLang()},
		{"modelplane_metrics.txt", Modelplane()},
		{"gen_ai_metrics.txt", GenAI()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			text, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			sc := &Scraper{Mapping: tc.m}
			want := sc.wanted()
			kept, ok := keepFamilies(text, want)
			if !ok {
				t.Skip("this exposition is parsed whole (no cut)")
			}
			all, err := parseText(text)
			if err != nil {
				t.Fatal(err)
			}
			cut, err := parseText(kept)
			if err != nil {
				t.Fatalf("the cut text does not parse: %v\n%s", err, kept)
			}
			for name, mf := range all {
				if !want[name] {
					continue
				}
				if !proto.Equal(mf, cut[name]) {
					t.Errorf("%s parses differently from the cut text:\n%v\n%v", name, mf, cut[name])
				}
			}
			if len(kept) >= len(text) && len(want) < len(all) {
				t.Errorf("nothing was cut: %d of %d bytes kept", len(kept), len(text))
			}
			var a, b Sample
			a, b = NewSample(0), NewSample(0)
			errA, errB := tc.m.add(all, "t", &a), tc.m.add(cut, "t", &b)
			if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
				t.Errorf("the sample differs: %v %+v, cut %v %+v", errA, a, errB, b)
			}
		})
	}
}

// Expositions the cut cannot be sure of are parsed whole.
func TestKeepFamiliesRefuses(t *testing.T) {
	want := map[string]bool{"a": true}
	for _, tc := range []struct{ name, text string }{
		{"a label the process watch reads", "# TYPE b gauge\nb{pod=\"x\"} 1\n# TYPE a gauge\na 1\n"},
		{"a sample in another family's block", "# TYPE b gauge\nb 1\nc 2\n# TYPE a gauge\na 1\n"},
		{"a quoted name", "# TYPE \"b.c\" gauge\n{\"b.c\"} 1\n# TYPE a gauge\na 1\n"},
	} {
		if _, ok := keepFamilies([]byte(tc.text), want); ok {
			t.Errorf("%s: cut", tc.name)
		}
	}
	// What it can be sure of: other families' blocks go, whatever precedes
	// the first block and plain comments stay.
	text := "x 1\n# a comment\n# HELP b help\n# TYPE b histogram\nb_bucket{le=\"+Inf\"} 1\nb_sum 1\nb_count 1\n# TYPE a counter\n\na 3\n"
	kept, ok := keepFamilies([]byte(text), want)
	if want := "x 1\n# a comment\n# TYPE a counter\n\na 3\n"; !ok || string(kept) != want {
		t.Errorf("kept %q (%v), want %q", kept, ok, want)
	}
}

// A target whose exposition is broken where the cut keeps it reports the
// error of the whole text, with the whole text's line number.
func TestKeepFamiliesErrorsAsWhole(t *testing.T) {
	text := "# TYPE b gauge\nb 1\n# TYPE a gauge\na one\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, text) }))
	defer srv.Close()
	sc := &Scraper{}
	_, whole := sc.fetch(context.Background(), srv.URL)
	_, cut := sc.fetchWanted(context.Background(), srv.URL, map[string]bool{"a": true})
	if whole == nil || cut == nil || cut.Error() != whole.Error() || !strings.Contains(whole.Error(), "line 4") {
		t.Errorf("cut scrape error %v, whole %v; want the same, in line 4", cut, whole)
	}
}
