package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/headroom-bench/headroom/internal/memnet"
	"github.com/headroom-bench/headroom/internal/timescale"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Router policies of a Cluster.
const (
	RoundRobin     = "round_robin"     // copies in turn
	LeastLoaded    = "least_loaded"    // the copy with the fewest requests in its engine
	PrefixAffinity = "prefix_affinity" // the copy that last served the longest prefix of the prompt, else the least loaded
)

// ClusterOptions configure N copies of one engine behind a routing gateway.
type ClusterOptions struct {
	// Options are every copy's options; copy i gets Seed + i.
	Options
	// Copies is how many engines serve behind the gateway (at least 1).
	Copies int
	// Router is the routing policy; empty means RoundRobin.
	Router string
	// Disaggregated, when set, splits prefill from decode: one more engine
	// does every request's prefill, and the Copies engines decode.
	Disaggregated *Disaggregation
}

// Disaggregation is a prefill/decode split. Each chat request is first
// prefilled on the prefill engine (its prompt, one token generated), then
// its prompt's KV (prompt tokens x the profile's KVBytesPerToken) crosses
// the link to the decode engine the router picked, and only then does that
// engine admit it, with the prompt already computed. Transfers share the
// link one after another, so a slow link queues them and the wait adds to
// the caller's time to first token.
type Disaggregation struct {
	// LinkBytesPerSecond is the link's bandwidth: plain TCP on 10 GbE is
	// about 1.25e9, RDMA (NIXL, Mooncake) about 5e10.
	LinkBytesPerSecond float64 `json:"link_bytes_per_second"`
	// Prefill is the prefill engine's own profile (sized to its GPUs); nil
	// means the copies' profile.
	Prefill *Profile `json:"-"`
}

// kvLink is the prefill-to-decode link: transfers go one at a time, in the
// order they ask.
type kvLink struct {
	bps  float64
	mu   sync.Mutex
	free time.Duration // modelled time the link is next idle
}

// reserve books a transfer of bytes asked for at now and returns when it ends.
func (k *kvLink) reserve(now time.Duration, bytes float64) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	start := max(now, k.free)
	k.free = start + time.Duration(bytes/k.bps*float64(time.Second))
	return k.free
}

// Cluster is N simulated engines behind one gateway. The gateway routes chat
// requests by its policy, measures what callers see as OpenTelemetry gen_ai
// histograms (gen_ai_server_time_to_first_token_seconds,
// gen_ai_server_time_per_output_token_seconds,
// gen_ai_server_request_duration_seconds with error_type on failures, and
// gen_ai_client_token_usage), and serves on /metrics its own series plus every
// copy's, each copy's labelled copy="i".
type Cluster struct {
	copies  []*Sim
	prefill *Sim    // the prefill engine of a prefill/decode split, else nil
	link    *kvLink // its link to the decode copies
	router  string
	model   string
	clock   *timescale.Clock
	gw      *gatewayMetrics
	handler http.Handler

	rr    atomic.Uint64
	affMu sync.Mutex
	aff   map[uint64]int // sampled prompt block hash -> copy that served it
	scans *scanCache     // the router's prompt scans, resumed turn to turn
	// rereads makes every copy read and scan a routed body itself (tests
	// compare it with the router's reading handed on).
	rereads bool

	runOnce  sync.Once
	srvMu    sync.Mutex
	srv      *http.Server
	handling atomic.Int64 // gateway handlers running on TCP
	net      *memnet.Net
	cancel   context.CancelFunc
	done     *timescale.Signal
}

// NewCluster builds the copies and the gateway. Nothing runs until Start or
// Run.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	if o.Copies < 1 {
		return nil, fmt.Errorf("sim cluster: copies is %d: give at least 1", o.Copies)
	}
	switch o.Router {
	case "":
		o.Router = RoundRobin
	case RoundRobin, LeastLoaded, PrefixAffinity:
	default:
		return nil, fmt.Errorf("sim cluster: router %q: use %s, %s or %s", o.Router, RoundRobin, LeastLoaded, PrefixAffinity)
	}
	c := &Cluster{router: o.Router, aff: map[uint64]int{}, net: o.Net}
	if o.Router == PrefixAffinity {
		c.scans = newScanCache(scanCacheBytes)
	}
	if o.Clock == nil {
		// One clock for every engine, so their modelled times agree.
		clock, err := timescale.New(max(o.Scale, 0))
		if err != nil {
			return nil, fmt.Errorf("sim cluster: scale: %w", err)
		}
		o.Clock = clock
	}
	o.Net = nil // the copies are reached through the gateway, not served
	for i := range o.Copies {
		co := o.Options
		co.Seed += uint64(i)
		s, err := New(co)
		if err != nil {
			return nil, err
		}
		c.copies = append(c.copies, s)
	}
	c.clock = c.copies[0].clock
	c.model = c.copies[0].prof.Model
	c.gw = newGatewayMetrics(c.copies[0].pers.name, c.model)
	if d := o.Disaggregated; d != nil {
		if !(d.LinkBytesPerSecond > 0) {
			return nil, fmt.Errorf("sim cluster: disaggregated link_bytes_per_second is %g: give the prefill-to-decode link's bandwidth (10 GbE TCP is about 1.25e9, RDMA about 5e10)", d.LinkBytesPerSecond)
		}
		po := o.Options
		po.Seed += uint64(o.Copies)
		if d.Prefill != nil {
			po.Profile = *d.Prefill
		}
		p, err := New(po)
		if err != nil {
			return nil, err
		}
		c.prefill, c.link = p, &kvLink{bps: d.LinkBytesPerSecond}
		c.gw.reg.MustRegister(c.gw.kvTransfer, c.gw.kvBytes)
		for _, s := range c.copies {
			s.beforeSubmit = c.prefillFirst
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", c.chat)
	mux.HandleFunc("GET /metrics", c.metrics)
	mux.HandleFunc("/admin/faults", c.admin)
	mux.HandleFunc("/", c.forward) // /v1/models, /tokenize, /health: any copy that is up
	c.handler = mux
	if c.net != nil && c.router == PrefixAffinity {
		c.handler = clusterPreparing{Handler: mux, c: c}
	}
	return c, nil
}

// Copy returns copy i, for faults and inspection.
func (c *Cluster) Copy(i int) *Sim { return c.copies[i] }

// Prefill returns the prefill engine of a prefill/decode split, else nil.
func (c *Cluster) Prefill() *Sim { return c.prefill }

// engines is every engine: the copies, then the prefill engine if any.
func (c *Cluster) engines() []*Sim {
	if c.prefill == nil {
		return c.copies
	}
	return append(append([]*Sim{}, c.copies...), c.prefill)
}

// prefillFirst runs r's prefill on the prefill engine and moves its KV over
// the link; r's decode engine then admits it with the prompt computed.
func (c *Cluster) prefillFirst(ctx context.Context, r *request) error {
	p := c.prefill
	pr := &request{
		id: p.nextID.Add(1), prompt: r.prompt, maxTokens: 1, maxParam: 1,
		finish: finishLength, hashes: r.hashes, notify: p.clock.NewSignal(),
	}
	if err := p.submit(p.life.Load(), pr); err != nil {
		return err
	}
	if _, err := p.waitTokens(ctx, pr, 0); err != nil {
		return err
	}
	now := c.clock.Now()
	bytes := float64(r.prompt) * p.prof.kvBytesPerToken()
	end := c.link.reserve(now, bytes)
	c.gw.kvTransfer.Observe((end - now).Seconds())
	c.gw.kvBytes.Add(bytes)
	if err := c.clock.SleepUntil(ctx, end); err != nil {
		return err
	}
	r.kvReady = true
	return nil
}

// Handler serves the gateway. Someone mounting it without Start must call Run.
func (c *Cluster) Handler() http.Handler { return c.handler }

// Run runs every copy's engine until ctx is done.
func (c *Cluster) Run(ctx context.Context) error {
	started := false
	c.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("sim cluster: already ran; make a new Cluster to run again")
	}
	g := c.clock.NewGroup()
	for _, s := range c.engines() {
		s.life.Load().up.Store(true)
		g.Go(func() { _ = s.Run(ctx) })
	}
	return g.Wait(context.Background())
}

// Start runs the copies and serves the gateway on addr, returning its URL.
func (c *Cluster) Start(addr string) (string, error) {
	if c.net != nil {
		return c.startMem()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sim cluster: listen on %s: %w; pick a free address such as 127.0.0.1:0", addr, err)
	}
	ctx, cancel := c.clock.WithCancel(context.Background())
	c.srvMu.Lock()
	c.srv = countingServer(c.handler, &c.handling)
	c.cancel, c.done = cancel, c.clock.NewLatch()
	srv, done := c.srv, c.done
	c.srvMu.Unlock()
	for _, s := range c.engines() {
		s.life.Load().up.Store(true)
	}
	go func() {
		defer done.Close()
		_ = c.Run(ctx)
	}()
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// startMem serves the gateway on the in-memory network, the copies running
// on the clock.
func (c *Cluster) startMem() (string, error) {
	ctx, cancel := c.clock.WithCancel(context.Background())
	c.srvMu.Lock()
	if c.done != nil {
		c.srvMu.Unlock()
		cancel()
		return "", errors.New("sim cluster: already started; make a new Cluster to serve again")
	}
	c.cancel, c.done = cancel, c.clock.NewLatch()
	done := c.done
	c.srvMu.Unlock()
	for _, s := range c.engines() {
		s.life.Load().up.Store(true)
	}
	c.clock.Go(func() {
		defer done.Close()
		_ = c.Run(ctx)
	})
	return c.net.Serve(c.handler), nil
}

// Close stops the copies and the gateway.
func (c *Cluster) Close() error {
	c.srvMu.Lock()
	srv, cancel, done := c.srv, c.cancel, c.done
	c.srvMu.Unlock()
	for _, s := range c.engines() {
		_ = s.Close()
	}
	if done == nil {
		return nil
	}
	cancel()
	_, _ = c.clock.WaitFor(context.Background(), "sim cluster close", -1, done)
	if srv == nil {
		return nil
	}
	return shutdown(srv, &c.handling, "sim cluster: shutting down the gateway")
}

// serving reports whether copy i takes requests now.
func (c *Cluster) serving(i int) bool {
	s := c.copies[i]
	return !s.down.Load() && s.life.Load().up.Load()
}

// leastLoaded picks the serving copy with the fewest requests in its engine,
// ties broken in turn.
func (c *Cluster) leastLoaded() int {
	start := int(c.rr.Add(1))
	best, load := 0, int64(-1)
	for k := range c.copies {
		i := (start + k) % len(c.copies)
		if !c.serving(i) {
			continue
		}
		if n := c.copies[i].life.Load().inflight.Load(); load < 0 || n < load {
			best, load = i, n
		}
	}
	return best
}

// affinityStride samples every this many prompt blocks for prefix affinity.
const affinityStride = 8

// maxAffinity bounds the affinity table; it starts afresh when full.
const maxAffinity = 1 << 20

// pick chooses the copy for a chat body, with the router's reading of it
// when it has one for the copy to use (nil otherwise).
func (c *Cluster) pick(body []byte, prep *clusterPrep) (int, *routedChat) {
	switch c.router {
	case LeastLoaded:
		return c.leastLoaded(), nil
	case PrefixAffinity:
		var scan *promptScan
		var rc *routedChat
		if prep != nil {
			scan, rc = prep.scan, prep.rc // scanned off the clock (clusterPreparing)
		} else {
			scan, rc = c.scanPrompt(body)
		}
		if scan == nil {
			return c.leastLoaded(), nil
		}
		c.affMu.Lock()
		defer c.affMu.Unlock()
		chosen := -1
		// Block hashes chain, so the deepest sampled block found marks the
		// longest prefix some copy has served.
		for j := (len(scan.hashes)/affinityStride - 1) * affinityStride; j >= 0; j -= affinityStride {
			if i, ok := c.aff[scan.hashes[j]]; ok && c.serving(i) {
				chosen = i
				break
			}
		}
		if chosen < 0 {
			chosen = c.leastLoaded()
		}
		if len(c.aff) > maxAffinity {
			c.aff = map[uint64]int{}
		}
		for j := 0; j < len(scan.hashes); j += affinityStride {
			// Most of a turn's prefix is its last turn's, already there:
			// a read is cheaper than a write of the same value.
			if i, ok := c.aff[scan.hashes[j]]; !ok || i != chosen {
				c.aff[scan.hashes[j]] = chosen
			}
		}
		return chosen, rc
	}
	n := len(c.copies)
	for range n {
		if i := int(c.rr.Add(1)-1) % n; c.serving(i) {
			return i, nil
		}
	}
	return 0, nil
}

// scanPrompt scans a chat body's prompt into blocks as the copies do: the
// fast path resumes from the router's scan of the conversation's last
// turn, and its reading is handed to the copy (rc); other bodies go
// through encoding/json. A nil scan for a body that is not a chat request.
func (c *Cluster) scanPrompt(body []byte) (scan *promptScan, rc *routedChat) {
	bs := c.copies[0].prof.BlockSize
	if req, scan, ok := c.scans.fastChat(body, bs); ok {
		return scan, &routedChat{body: body, req: req, scan: scan, blockSize: bs}
	}
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, nil
	}
	scan, err := c.copies[0].scanMessages(req.Messages, len(body))
	if err != nil {
		return nil, nil
	}
	return scan, nil
}

func (c *Cluster) chat(w http.ResponseWriter, r *http.Request) {
	start := c.clock.Time()
	prep, _ := memnet.Prepared(r.Context()).(*clusterPrep)
	var body []byte
	var err error
	if prep != nil {
		body = prep.body
	} else {
		body, err = readBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), r.ContentLength)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		c.gw.observe(c.clock, start, &gatewayWriter{code: http.StatusBadRequest})
		return
	}
	i, rc := c.pick(body, prep)
	ctx := r.Context()
	if rc != nil && !c.rereads {
		ctx = context.WithValue(ctx, routedKey{}, rc)
	}
	req := r.Clone(ctx)
	req.Body = bodyReader(body)
	req.ContentLength = int64(len(body))
	gw := &gatewayWriter{ResponseWriter: w, code: http.StatusOK, clock: c.clock}
	c.copies[i].handler.ServeHTTP(gw, req)
	if r.Context().Err() != nil && !gw.done {
		gw.aborted = true
	}
	c.gw.observe(c.clock, start, gw)
}

// forward sends other API calls to the first copy that serves.
func (c *Cluster) forward(w http.ResponseWriter, r *http.Request) {
	for i := range c.copies {
		if c.serving(i) {
			c.copies[i].handler.ServeHTTP(w, r)
			return
		}
	}
	c.copies[0].handler.ServeHTTP(w, r)
}

// admin forwards /admin/faults?copy=i to copy i, and copy=prefill to the
// prefill engine of a prefill/decode split.
func (c *Cluster) admin(w http.ResponseWriter, r *http.Request) {
	if c.prefill != nil && r.URL.Query().Get("copy") == "prefill" {
		c.prefill.handler.ServeHTTP(w, r)
		return
	}
	i, err := strconv.Atoi(r.URL.Query().Get("copy"))
	if err != nil || i < 0 || i >= len(c.copies) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("name the copy: /admin/faults?copy=N with N from 0 to %d", len(c.copies)-1))
		return
	}
	c.copies[i].handler.ServeHTTP(w, r)
}

// metrics serves the gateway's series and every copy's, labelled by copy.
func (c *Cluster) metrics(w http.ResponseWriter, _ *http.Request) {
	fams, err := c.gw.reg.Gather()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for i, s := range c.engines() {
		fs := s.faults.Load()
		if fs.f.MetricsGone {
			continue
		}
		cf, err := s.life.Load().met.reg.Gather()
		if err != nil {
			continue
		}
		labels := []*dto.LabelPair{pair("copy", strconv.Itoa(i))}
		if c.prefill != nil {
			phase := "decode"
			if s == c.prefill {
				labels[0], phase = pair("copy", "prefill"), "prefill"
			}
			labels = append(labels, pair("phase", phase))
		}
		for _, f := range cf {
			if fs.missing[f.GetName()] {
				continue
			}
			for _, m := range f.Metric {
				m.Label = append(m.Label, labels...)
				sort.Slice(m.Label, func(a, b int) bool { return m.Label[a].GetName() < m.Label[b].GetName() })
			}
			if have, ok := byName[f.GetName()]; ok {
				have.Metric = append(have.Metric, f.Metric...)
			} else {
				byName[f.GetName()] = f
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	sorted := make([]*dto.MetricFamily, len(names))
	for i, n := range names {
		sorted[i] = byName[n]
	}
	if page, ok := appendText(nil, sorted); ok {
		_, _ = w.Write(page)
		return
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range sorted {
		_ = enc.Encode(f)
	}
}

func pair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

// OpenTelemetry's advisory bucket boundaries for the gen_ai metrics.
var (
	genAITTFTBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	genAITPOTBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}
	genAIDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	genAITokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// gatewayMetrics are the gateway's gen_ai series, named as an OpenTelemetry
// Prometheus exporter names them.
type gatewayMetrics struct {
	reg            *prometheus.Registry
	ttft, tpot     prometheus.Observer
	duration       *prometheus.HistogramVec // by error_type ("" on success)
	input, output  prometheus.Observer
	durationLabels []string
	// A prefill/decode split's KV transfers: the wait for the link plus the
	// transfer, and the bytes moved.
	kvTransfer prometheus.Histogram
	kvBytes    prometheus.Counter
}

func newGatewayMetrics(provider, model string) *gatewayMetrics {
	reg := prometheus.NewRegistry()
	labels := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"}
	values := []string{"chat", provider, model}
	hist := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, append(append([]string{}, labels...), extra...))
		reg.MustRegister(v)
		return v
	}
	g := &gatewayMetrics{reg: reg}
	g.ttft = hist("gen_ai_server_time_to_first_token_seconds", "Time to generate first token for successful responses (modelled seconds).", genAITTFTBuckets).WithLabelValues(values...)
	g.tpot = hist("gen_ai_server_time_per_output_token_seconds", "Time per output token generated after the first token for successful responses (modelled seconds).", genAITPOTBuckets).WithLabelValues(values...)
	g.duration = hist("gen_ai_server_request_duration_seconds", "Generative AI server request duration such as time-to-last byte or last output token (modelled seconds).", genAIDurationBuckets, "error_type")
	// The success series exists from the start, as TTFT's does, so the family
	// is on /metrics before the first request: a gen_ai mapping then reads
	// no 4xx, 5xx or failure yet as zero (pre-flight needs the family).
	g.duration.WithLabelValues(append(append([]string{}, values...), "")...)
	usage := hist("gen_ai_client_token_usage", "Number of input and output tokens used.", genAITokenBuckets, "gen_ai_token_type")
	g.input = usage.WithLabelValues(append(append([]string{}, values...), "input")...)
	g.output = usage.WithLabelValues(append(append([]string{}, values...), "output")...)
	g.durationLabels = values
	g.kvTransfer = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "headroom_sim_kv_transfer_seconds",
		Help:    "Prefill/decode split: time from a prefill's end until its KV reached the decode engine, queueing for the link included (modelled seconds).",
		Buckets: genAIDurationBuckets,
	})
	g.kvBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "headroom_sim_kv_transfer_bytes_total",
		Help: "Prefill/decode split: KV bytes moved from the prefill engine to the decode engines.",
	})
	return g
}

// observe records one request the gateway answered.
func (g *gatewayMetrics) observe(clock *timescale.Clock, start time.Time, w *gatewayWriter) {
	end := clock.Time()
	errType := ""
	switch {
	case w.code >= 400:
		errType = strconv.Itoa(w.code)
	case w.aborted:
		errType = "aborted"
	case !w.done:
		errType = "incomplete" // the engine cut the answer off
	}
	g.duration.WithLabelValues(append(append([]string{}, g.durationLabels...), errType)...).Observe(clock.Modelled(end.Sub(start)).Seconds())
	if errType != "" {
		return
	}
	in, out, _ := w.tokens()
	if in > 0 {
		g.input.Observe(float64(in))
	}
	if out > 0 {
		g.output.Observe(float64(out))
	}
	if w.streaming && !w.first.IsZero() {
		g.ttft.Observe(clock.Modelled(w.first.Sub(start)).Seconds())
		if out > 1 {
			g.tpot.Observe(clock.Modelled(w.last.Sub(w.first)).Seconds() / float64(out-1))
		}
	}
}
