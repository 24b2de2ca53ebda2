package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// Local is the coordinator's own lanes: a load.Generator with Shard 0.
type Local interface {
	SetSessions(n int)
	SetTag(load.Tag)
	InFlight() int
	Stop(grace time.Duration)
	Priming() load.Priming
	InFlightByTier() map[string]int
	Reseed(epoch int)
}

// Options configure a Coordinator.
type Options struct {
	Local  Local
	Shards int // every process, the coordinator's own included
	Setup  Setup
	Clock  *timescale.Clock
	// OnSend and Sink receive the other shards' records as the local
	// generator's Options.OnSend and Sink do its own; each record's Shard
	// says where it was sent from.
	OnSend, Sink func(load.Record)
	// Poll is how long a sync waits for a new order (wall); default 500ms.
	Poll time.Duration
	// Stale is how long a shard may go without a sync before it is lost
	// (wall); default 10s.
	Stale time.Duration
	// Logf, if set, says what the shards do (join, loss).
	Logf func(format string, args ...any)
}

// Coordinator runs the sweep's lanes on every shard: it is the sweep's
// load (SetSessions, SetTag, InFlight, Stop, as a load.Generator), and
// serves the other shards their orders.
type Coordinator struct {
	o      Options
	mu     sync.Mutex
	change chan struct{} // closed and replaced on every order or report
	order  Order
	peers  map[int]*peer
	lost   *Lost
	srv    *http.Server
	url    string
	done   chan struct{}
}

type peer struct {
	batch    int64 // the last report taken
	seen     time.Time
	seq      int64
	inFlight int
	byTier   map[string]int
	priming  load.Priming
	stopped  bool
	lost     bool
}

// Lost says which shard stopped answering and when: the load of the step
// under way is short of that shard's lanes.
type Lost struct {
	Shard int
	At    time.Duration // modelled time since the run started
	Why   string
}

func (l *Lost) Error() string {
	return fmt.Sprintf("shard %d was lost at %s (%s): the step under way ran without its lanes, so it reads no data; the steps judged before stand", l.Shard, l.At.Round(time.Second), l.Why)
}

// NewCoordinator returns a coordinator whose shards have not joined yet.
func NewCoordinator(o Options) *Coordinator {
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Stale <= 0 {
		o.Stale = 10 * time.Second
	}
	o.Setup.V, o.Setup.Shards = Version, o.Shards
	return &Coordinator{o: o, change: make(chan struct{}), peers: map[int]*peer{}, order: Order{V: Version, Tag: load.Tag{Phase: load.PhaseWarmup}}, done: make(chan struct{})}
}

// Listen serves the shards on addr (host:port; port 0 picks a free one)
// until Close.
func (c *Coordinator) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("shards: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathSync, c.serveSync)
	mux.HandleFunc("GET "+PathSetup, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, c.o.Setup) })
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	c.url = "http://" + ln.Addr().String()
	go func() { _ = c.srv.Serve(ln) }()
	go c.watch()
	return nil
}

// URL is where the shards reach the coordinator once it listens.
func (c *Coordinator) URL() string { return c.url }

// Close stops serving.
func (c *Coordinator) Close() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	if c.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.srv.Shutdown(ctx)
	}
}

// WaitJoined waits until every other shard has synced once, at most
// timeout (wall).
func (c *Coordinator) WaitJoined(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	told := -1
	for {
		c.mu.Lock()
		n, ch := len(c.peers), c.change
		c.mu.Unlock()
		if n >= c.o.Shards-1 {
			return nil
		}
		if n != told && c.o.Logf != nil {
			c.o.Logf("shards: %d of %d joined; waiting for the rest at %s", n+1, c.o.Shards, c.url)
			told = n
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("shards: %d of %d joined within %s (shards %s did not): start them with the coordinator's URL %s, or raise sweep.shard.join_timeout_s", n+1, c.o.Shards, timeout, c.missing(), c.url)
		}
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

func (c *Coordinator) missing() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := 1; k < c.o.Shards; k++ {
		if c.peers[k] == nil {
			out = append(out, fmt.Sprint(k))
		}
	}
	return strings.Join(out, ", ")
}

// notifyLocked wakes whoever waits on a change; c.mu is held.
func (c *Coordinator) notifyLocked() {
	close(c.change)
	c.change = make(chan struct{})
}

func (c *Coordinator) serveSync(w http.ResponseWriter, r *http.Request) {
	var rep Report
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 256<<20)).Decode(&rep); err != nil {
		http.Error(w, "shards: a sync's report does not parse: "+err.Error(), http.StatusBadRequest)
		return
	}
	if rep.V != Version {
		writeJSON(w, Order{V: Version, Refused: fmt.Sprintf("protocol version %d, the coordinator speaks %d: run the same headroom build on every shard", rep.V, Version)})
		return
	}
	if rep.Shard < 1 || rep.Shard >= c.o.Shards {
		writeJSON(w, Order{V: Version, Refused: fmt.Sprintf("shard %d is not one of 1..%d of this run (sweep.shards %d)", rep.Shard, c.o.Shards-1, c.o.Shards)})
		return
	}
	c.mu.Lock()
	p := c.peers[rep.Shard]
	if p == nil {
		p = &peer{seq: -1}
		c.peers[rep.Shard] = p
		if c.o.Logf != nil {
			c.o.Logf("shards: shard %d joined from %s", rep.Shard, r.RemoteAddr)
		}
	}
	if p.lost {
		c.mu.Unlock()
		writeJSON(w, Order{V: Version, Refused: fmt.Sprintf("shard %d was lost earlier in this run; its lanes are not taken back", rep.Shard)})
		return
	}
	p.seen, p.inFlight, p.byTier, p.priming, p.stopped = time.Now(), rep.InFlight, rep.ByTier, rep.Priming, rep.Stopped
	if rep.Batch <= p.batch {
		rep.Sent, rep.Done = nil, nil // taken already: its answer was lost
	}
	p.batch = max(p.batch, rep.Batch)
	c.mu.Unlock()
	// the book counts a request sent before its outcome; one sync at a
	// time per shard keeps each shard's records in order
	for _, rec := range rep.Sent {
		rec.Shard = rep.Shard
		if c.o.OnSend != nil {
			c.o.OnSend(rec)
		}
	}
	for _, rec := range rep.Done {
		rec.Shard = rep.Shard
		if c.o.Sink != nil {
			c.o.Sink(rec)
		}
	}
	c.mu.Lock()
	// applied only once its records are in: an order waiting on this
	// shard then has everything the shard sent before it
	p.seq = rep.Seq
	c.notifyLocked()
	if rep.Seq >= c.order.Seq && !rep.Stopped {
		ch := c.change
		c.mu.Unlock()
		t := time.NewTimer(c.o.Poll)
		select {
		case <-ch:
		case <-t.C:
		case <-r.Context().Done():
		case <-c.done:
		}
		t.Stop()
		c.mu.Lock()
	}
	o := c.order
	c.mu.Unlock()
	writeJSON(w, o)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// watch marks a shard lost once it has been silent for Stale.
func (c *Coordinator) watch() {
	t := time.NewTicker(c.o.Stale / 4)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		for k, p := range c.peers {
			if !p.lost && !p.stopped && time.Since(p.seen) > c.o.Stale {
				c.loseLocked(k, fmt.Sprintf("no sync for %s", time.Since(p.seen).Round(time.Second)))
			}
		}
		c.mu.Unlock()
	}
}

// loseLocked marks shard k lost; c.mu is held.
func (c *Coordinator) loseLocked(k int, why string) {
	p := c.peers[k]
	p.lost = true
	p.inFlight, p.byTier = 0, nil
	if c.lost == nil {
		c.lost = &Lost{Shard: k, At: c.o.Clock.Now(), Why: why}
	}
	if c.o.Logf != nil {
		c.o.Logf("shards: shard %d lost: %s", k, why)
	}
	c.notifyLocked()
}

// Lost is the first shard lost in this run, or nil while all answer. The
// sweep reads the step under way as no data and stops.
func (c *Coordinator) Lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost == nil {
		return nil
	}
	return c.lost
}

// publish changes the order and waits until every shard still answering
// has applied it (and sent every record before it), at most Stale; a shard
// that has not by then is lost.
func (c *Coordinator) publish(change func(*Order)) {
	c.mu.Lock()
	change(&c.order)
	c.order.Seq++
	seq := c.order.Seq
	c.notifyLocked()
	c.awaitLocked(time.Now().Add(c.o.Stale), func(p *peer) bool { return p.seq < seq },
		fmt.Sprintf("it did not take order %d within %s", seq, c.o.Stale))
	c.mu.Unlock()
}

// awaitLocked waits until no shard still answering is behind, at most
// until deadline, when the ones behind are lost for why; c.mu is held.
func (c *Coordinator) awaitLocked(deadline time.Time, behind func(*peer) bool, why string) {
	for {
		late := -1
		for k, p := range c.peers {
			if !p.lost && !p.stopped && behind(p) {
				late = k
				break
			}
		}
		if late < 0 {
			return
		}
		if !time.Now().Before(deadline) {
			c.loseLocked(late, why)
			continue
		}
		ch := c.change
		c.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		c.mu.Lock()
	}
}

// SetSessions runs lane ids 0..n-1 over all shards.
func (c *Coordinator) SetSessions(n int) {
	c.o.Local.SetSessions(n)
	c.publish(func(o *Order) { o.Sessions = n })
}

// SetTag labels what every shard sends from now on; it returns once every
// shard has switched, so a step's records end where its judged time does.
func (c *Coordinator) SetTag(t load.Tag) {
	c.o.Local.SetTag(t)
	c.publish(func(o *Order) { o.Tag = t })
}

// Reseed makes every shard's lanes started from now on draw fresh plays.
func (c *Coordinator) Reseed(epoch int) {
	c.o.Local.Reseed(epoch)
	c.publish(func(o *Order) { o.Epoch = epoch })
}

// Stop stops every shard's lanes and waits for their last records, at
// most grace and Stale beyond it.
func (c *Coordinator) Stop(grace time.Duration) {
	c.mu.Lock()
	c.order.Stop, c.order.GraceS = true, grace.Seconds()
	c.order.Seq++
	c.notifyLocked()
	c.mu.Unlock()
	c.o.Local.Stop(grace)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.awaitLocked(time.Now().Add(grace+c.o.Stale), func(*peer) bool { return true }, "it did not report its last records after the stop")
}

// InFlight is every shard's requests waiting on the server, as last
// reported.
func (c *Coordinator) InFlight() int {
	n := c.o.Local.InFlight()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		n += p.inFlight
	}
	return n
}

// InFlightByTier is InFlight split by tier.
func (c *Coordinator) InFlightByTier() map[string]int {
	out := c.o.Local.InFlightByTier()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		for tier, n := range p.byTier {
			out[tier] += n
		}
	}
	return out
}

// Priming is every shard's warm-up so far.
func (c *Coordinator) Priming() load.Priming {
	pm := c.o.Local.Priming()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.peers {
		if p.lost {
			continue // its lanes are gone: their warm-up is not the step's
		}
		q := p.priming
		pm.Started += q.Started
		pm.Pending += q.Pending
		pm.Failed += q.Failed
		pm.TimedOut += q.TimedOut
		pm.Last = max(pm.Last, q.Last)
		pm.Longest = max(pm.Longest, q.Longest)
	}
	return pm
}

// Joined lists the shards that joined, for the run's notes.
func (c *Coordinator) Joined() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for k := range c.peers {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
