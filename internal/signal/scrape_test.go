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

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Cutting an exposition down to the families a scrape reads parses those
// families exactly as parsing the whole text does, for every engine's
// exposition in testdata and its mapping, and reads a sample the same.
func TestKeepFamiliesParsesTheSame(t *testing.T) {
	for _, tc := range engineExpositions() {
		t.Run(tc.file, func(t *testing.T) {
			text, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			sc := &Scraper{Mapping: tc.m}
			want := sc.wanted()
			blocks, ok := keepFamilies(text, want)
			if !ok {
				t.Skip("this exposition is parsed whole (no cut)")
			}
			kept := joinBlocks(blocks)
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
	blocks, ok := keepFamilies([]byte(text), want)
	if want := "x 1\n# a comment\n# TYPE a counter\n\na 3\n"; !ok || string(joinBlocks(blocks)) != want {
		t.Errorf("kept %q (%v), want %q", joinBlocks(blocks), ok, want)
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

func joinBlocks(blocks []textBlock) []byte {
	var out []byte
	for _, b := range blocks {
		out = append(out, b.text...)
	}
	return out
}

// Successive scrapes of a target parse only the families whose lines
// changed, and read what parsing each whole text reads.
func TestParseBlocksReusesUnchangedFamilies(t *testing.T) {
	want := map[string]bool{"a": true, "b": true, "h": true}
	texts := []string{
		"# TYPE a counter\na 1\n# TYPE b gauge\nb 2\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
		"# TYPE a counter\na 5\n# TYPE b gauge\nb 2\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n",
		"# TYPE a counter\na 5\n# TYPE b gauge\nb 7\n# TYPE x gauge\nx 1\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 4\nh_count 3\n",
	}
	sc := &Scraper{}
	var last map[string]*dto.MetricFamily
	for i, text := range texts {
		blocks, ok := keepFamilies([]byte(text), want)
		if !ok {
			t.Fatalf("scrape %d: not cut", i)
		}
		got, ok := sc.parseBlocks("t", blocks)
		whole, err := parseText([]byte(text))
		if !ok || err != nil {
			t.Fatalf("scrape %d: %v %v", i, ok, err)
		}
		for name := range want {
			if !proto.Equal(got[name], whole[name]) {
				t.Errorf("scrape %d: %s is %v, want %v", i, name, got[name], whole[name])
			}
		}
		if _, ok := got["x"]; ok {
			t.Errorf("scrape %d: x was not cut", i)
		}
		if i == 1 && (got["b"] != last["b"] || got["h"] != last["h"] || got["a"] == last["a"]) {
			t.Errorf("scrape 1: the unchanged b and h were parsed again, or the changed a was not")
		}
		last = got
	}
}
