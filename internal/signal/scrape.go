package signal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/transport"
)

// Scraper reads /metrics from every target and sums them into one Sample,
// keeping each target's series groups as parts keyed "URL{labels}".
type Scraper struct {
	Targets []string     // full /metrics URLs
	Mapping Mapping      // engine names to common names
	Client  *http.Client // nil means http.DefaultClient; bound each scrape with ctx
}

// maxBody bounds how much of one /metrics response is read.
const maxBody = 64 << 20

// Scrape reads every target at once and returns their sum, stamped with the
// modelled time at. Targets that fail are named in Sample.Errors; the error is
// non-nil only when no target answered.
func (s *Scraper) Scrape(ctx context.Context, at time.Duration) (Sample, error) {
	out := NewSample(at)
	if len(s.Targets) == 0 {
		return out, errors.New("no metrics targets to scrape: give at least one /metrics URL")
	}
	parts := make([]Sample, len(s.Targets))
	errs := make([]error, len(s.Targets))
	var wg sync.WaitGroup
	for i, target := range s.Targets {
		wg.Go(func() {
			parts[i] = NewSample(at)
			errs[i] = s.scrapeOne(ctx, target, &parts[i])
		})
	}
	wg.Wait()
	answered := 0
	for i, target := range s.Targets {
		name := transport.URL(target) // a target's user info is never written
		if errs[i] != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", name, errs[i]))
			continue
		}
		if err := out.Merge(parts[i]); err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: summing with other targets: %v", name, err))
		}
		answered++
	}
	if answered == 0 {
		return out, fmt.Errorf("no metrics target answered: %w", errors.Join(errs...))
	}
	return out, nil
}

func (s *Scraper) scrapeOne(ctx context.Context, target string, into *Sample) error {
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("bad metrics URL: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s (want 200 from a /metrics endpoint)", resp.Status)
	}
	// A target whose exposition is partly unusable (bucket mismatch between its
	// own series) still contributes what could be read; a target whose text
	// does not parse contributes nothing.
	part := NewSample(into.At)
	name := transport.URL(target)
	err = s.Mapping.parse(io.LimitReader(resp.Body, maxBody), name, &part)
	if err != nil && len(part.Hist)+len(part.Counter)+len(part.Gauge) == 0 {
		return err
	}
	if err != nil {
		part.Errors = append(part.Errors, fmt.Sprintf("%s: %v", name, err))
	}
	*into = part
	return nil
}
