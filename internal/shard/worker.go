package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
)

// Worker runs one shard's lanes as the coordinator orders.
type Worker struct {
	URL   string // the coordinator's, e.g. http://127.0.0.1:7070
	Shard int
	// Lanes is this shard's generator (load.Options.Shard, Shards set), its
	// OnSend and Sink the worker's Sent and Done.
	Lanes  Local
	Client *http.Client
	// Stale bounds how long the worker goes on without reaching the
	// coordinator before it stops its lanes and gives up; default 30s.
	Stale time.Duration
	Logf  func(format string, args ...any)

	mu         sync.Mutex
	sent, done []load.Record
	batch      int64 // the last report's
	resend     *Report
}

// Sent is the shard generator's OnSend.
func (w *Worker) Sent(r load.Record) { w.mu.Lock(); w.sent = append(w.sent, r); w.mu.Unlock() }

// Done is the shard generator's Sink.
func (w *Worker) Done(r load.Record) { w.mu.Lock(); w.done = append(w.done, r); w.mu.Unlock() }

// ErrRefused is a shard the coordinator turned away.
var ErrRefused = errors.New("the coordinator refused this shard")

// FetchSetup reads the coordinator's Setup, retrying while it is not up
// yet, at most wait (wall).
func FetchSetup(ctx context.Context, client *http.Client, url string, wait time.Duration) (Setup, error) {
	deadline := time.Now().Add(wait)
	for {
		s, err := fetchSetup(ctx, client, url)
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return Setup{}, fmt.Errorf("shards: no setup from the coordinator at %s within %s: %w", url, wait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func fetchSetup(ctx context.Context, client *http.Client, url string) (Setup, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+PathSetup, nil)
	if err != nil {
		return Setup{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Setup{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Setup{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var s Setup
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return Setup{}, err
	}
	if s.V != Version {
		return Setup{}, fmt.Errorf("%w: protocol version %d, this build speaks %d: run the same headroom build on every shard", ErrRefused, s.V, Version)
	}
	return s, nil
}

// Run syncs with the coordinator and carries out its orders until it
// orders a stop (nil once the last records are in), refuses the shard, or
// cannot be reached for Stale, when the lanes stop (an error).
func (w *Worker) Run(ctx context.Context) error {
	if w.Stale <= 0 {
		w.Stale = 30 * time.Second
	}
	applied := Order{Seq: -1}
	stopped := false
	lastOK := time.Now()
	for {
		rep := w.report(applied.Seq, stopped)
		o, err := w.sync(ctx, rep)
		if err != nil {
			w.resend = &rep // the same batch again: the coordinator may have taken it
			if errors.Is(err, ErrRefused) || ctx.Err() != nil || time.Since(lastOK) > w.Stale {
				w.Lanes.Stop(time.Second)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("shard %d: %w", w.Shard, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		lastOK = time.Now()
		if stopped {
			return nil // the last report is in
		}
		if o.Seq == applied.Seq {
			continue
		}
		if o.Epoch != applied.Epoch {
			w.Lanes.Reseed(o.Epoch)
		}
		if o.Stop {
			w.Lanes.Stop(time.Duration(o.GraceS * float64(time.Second)))
			stopped = true
			applied = o
			continue
		}
		if o.Tag != applied.Tag {
			w.Lanes.SetTag(o.Tag)
		}
		if o.Sessions != applied.Sessions || applied.Seq < 0 {
			w.Lanes.SetSessions(o.Sessions)
		}
		applied = o
		if w.Logf != nil && o.Tag != (load.Tag{}) {
			w.Logf("shard %d: step %d, %d sessions over all shards, %s", w.Shard, o.Tag.Step+1, o.Sessions, o.Tag.Phase)
		}
	}
}

// report takes the records gathered since the last sync, or repeats the
// report whose answer did not come.
func (w *Worker) report(seq int64, stopped bool) Report {
	if r := w.resend; r != nil {
		w.resend = nil
		r.Seq, r.Stopped = seq, stopped
		return *r
	}
	w.batch++
	w.mu.Lock()
	sent, done := w.sent, w.done
	w.sent, w.done = nil, nil
	w.mu.Unlock()
	return Report{V: Version, Shard: w.Shard, Seq: seq, Batch: w.batch, InFlight: w.Lanes.InFlight(), ByTier: w.Lanes.InFlightByTier(),
		Priming: w.Lanes.Priming(), Sent: sent, Done: done, Stopped: stopped}
}

func (w *Worker) sync(ctx context.Context, rep Report) (Order, error) {
	body, err := json.Marshal(rep)
	if err != nil {
		return Order{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.Stale)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+PathSync, bytes.NewReader(body))
	if err != nil {
		return Order{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.Client.Do(req)
	if err != nil {
		return Order{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Order{}, fmt.Errorf("sync: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var o Order
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return Order{}, fmt.Errorf("sync: %w", err)
	}
	if o.Refused != "" {
		return Order{}, fmt.Errorf("%w: %s", ErrRefused, o.Refused)
	}
	return o, nil
}
