package sim

import (
	"net/http"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// simRegistry is a prometheus.Registry that also lists the simulator's own
// families registered on it, so that the /metrics page can be written from
// them (seriesPage) while every collector registered is one of them.
type simRegistry struct {
	*prometheus.Registry

	mu      sync.Mutex
	fams    []*seriesFamily // sorted by name, as Gather sorts families
	foreign int             // collectors registered that are not the simulator's
}

func newSimRegistry() *simRegistry { return &simRegistry{Registry: prometheus.NewRegistry()} }

// ownFamily is the family c collects whole, or nil.
func ownFamily(c prometheus.Collector) *seriesFamily {
	switch c := c.(type) {
	case *seriesFamily:
		return c
	case pageSeries:
		// A series collects itself alone: its family whole only when the
		// family has no labels (and so no other series).
		if f := c.base().fam; len(f.labels) == 0 {
			return f
		}
	}
	return nil
}

// Register is prometheus.Registry's, noting what was registered.
func (r *simRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := ownFamily(c)
	if f == nil {
		r.foreign++
		return nil
	}
	// A new slice, not an insert in place: own hands the old one out.
	at := sort.Search(len(r.fams), func(i int) bool { return r.fams[i].name >= f.name })
	next := make([]*seriesFamily, 0, len(r.fams)+1)
	r.fams = append(append(append(next, r.fams[:at]...), f), r.fams[at:]...)
	return nil
}

// MustRegister is prometheus.Registry's, through Register.
func (r *simRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister is prometheus.Registry's, noting what was unregistered.
func (r *simRegistry) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := ownFamily(c)
	for i, g := range r.fams {
		if f != nil && g == f {
			r.fams = append(append([]*seriesFamily(nil), r.fams[:i]...), r.fams[i+1:]...)
			return true
		}
	}
	r.foreign--
	return true
}

// own returns the families registered (not to be changed), and whether
// they are all the registry holds.
func (r *simRegistry) own() ([]*seriesFamily, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fams, r.foreign == 0
}

// seriesPage serves the families (sorted by name) as promhttp would serve
// the registry they are all of, less those named in hide, in format (the
// classic text): each family's HELP and TYPE lines as made once, and each
// series' lines as it wrote them last unless its values changed since.
func (pw *pageWriter) seriesPage(w http.ResponseWriter, format expfmt.Format, fams []*seriesFamily, hide map[string]bool) {
	bp := pw.buffer()
	defer pw.bufs.Put(bp)
	page := (*bp)[:0]
	pw.mu.Lock()
	for _, f := range fams {
		series := *f.series.Load()
		if len(series) == 0 || hide[f.name] {
			continue // Gather leaves out a family with no series
		}
		page = append(page, f.header...)
		for _, s := range series {
			page = s.appendPage(page)
		}
	}
	pw.mu.Unlock()
	*bp = page[:0]
	writePage(w, format, page)
}
