// Package record is a reverse proxy for the OpenAI chat-completions API that
// records the shape of the agent sessions passing through it, never their
// content, as Weka/AgentX traces headroom replays: per request the prompt and
// answer token counts, the times, and hash ids of fixed-size prompt blocks
// (a salted rolling hash, the salt per recording and never written), with
// requests grouped into conversations and subagents by their prompts alone.
//
// The proxy's hot path only copies bytes: the request and answer are kept in
// memory as they pass, and handed to the recorder on a bounded queue when the
// answer ends. The recorder (off the hot path) works out the shape, forgets
// the text, and writes each conversation when it goes idle. A full queue, a
// slow disk or a full one drops records and counts them; it never holds an
// agent up. See docs/record.md for the rules and what they get wrong.
package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Tokenize modes: how prompt blocks are cut.
const (
	// TokenizeAuto asks the upstream's POST /tokenize for the prompt's
	// token ids on the first request and hashes token blocks if it gives
	// them, text blocks otherwise, for the whole recording.
	TokenizeAuto = "auto"
	// TokenizeOn always hashes token blocks; a request whose ids cannot be
	// had is recorded without hash ids (and counted).
	TokenizeOn = "on"
	// TokenizeOff hashes text blocks and never calls /tokenize.
	TokenizeOff = "off"
)

// BlockSize is the tokens of one hash block in a recording made from token
// ids, and the words of one text block otherwise (see docs/record.md).
const BlockSize = 64

// Options configure a Recorder.
type Options struct {
	// Upstream is the server the agents' requests go to, such as
	// http://127.0.0.1:8000 (a path prefix is kept).
	Upstream *url.URL
	// Transport reaches the upstream; nil uses a pooled transport without
	// proxies.
	Transport http.RoundTripper
	// Out receives the traces, each one complete write (a JSONL line, or a
	// gzip member of one when Gzip is set). Writes happen on the recorder's
	// own goroutine; a write that fails drops its trace and is counted, and
	// Out may implement Rewinder to undo a partial one.
	Out  io.Writer
	Gzip bool
	// Tokenize is TokenizeAuto (the default when empty), TokenizeOn or
	// TokenizeOff.
	Tokenize string
	// Idle is how long a conversation may go without a request before it is
	// written; 0 means 30 minutes. Close writes the rest.
	Idle time.Duration
	// QueueBytes bounds the request and answer bytes waiting for the
	// recorder; past it requests pass through unrecorded (counted). 0 means
	// 256 MiB.
	QueueBytes int64
	// WriteQueue is how many finished traces may wait for the disk before
	// more are dropped (counted); 0 means 64.
	WriteQueue int
	// Now stamps arrivals and answers; nil means time.Now.
	Now func() time.Time
	// Log receives one line per notable event (the tokenize mode chosen, the
	// first drop of each kind); nil discards them.
	Log func(format string, args ...any)
}

// Recorder is the proxy and its recorder. Its Handler serves agents; Close
// writes every open conversation and stops.
type Recorder struct {
	o         Options
	proxy     http.Handler
	seed      maphash.Seed // the salt: random per recording, never written
	prefix    string       // random per recording, so trace ids of two recordings differ
	stats     counters
	queue     chan *exchange
	queued    atomic.Int64 // bytes of the exchanges in queue
	writes    chan []byte
	tok       *tokenizer
	convos    *conversations // the assembler's own
	openConvs atomic.Int64
	wrote     chan struct{}
	closing   sync.Once
	closed    atomic.Bool
	mu        sync.RWMutex // held for reading while enqueueing, for writing to close the queue
}

// Rewinder is an Out that can undo a partial write: Rewind drops what was
// written since the last complete trace (a file truncates back to it), so
// a full disk leaves the file readable.
type Rewinder interface {
	Mark() error
	Rewind() error
}

// New builds a recorder and starts its goroutines.
func New(o Options) (*Recorder, error) {
	if o.Upstream == nil || o.Upstream.Scheme == "" || o.Upstream.Host == "" {
		return nil, errors.New("record: upstream: give the server's base URL, such as http://127.0.0.1:8000")
	}
	if o.Upstream.User != nil {
		return nil, errors.New("record: upstream: URL user info is not supported (it would be a stored secret); the agents' own Authorization header is passed through")
	}
	if o.Out == nil {
		return nil, errors.New("record: no output: give the file the traces go to")
	}
	switch o.Tokenize {
	case "":
		o.Tokenize = TokenizeAuto
	case TokenizeAuto, TokenizeOn, TokenizeOff:
	default:
		return nil, fmt.Errorf("record: tokenize %q: give auto, on or off", o.Tokenize)
	}
	if o.Idle <= 0 {
		o.Idle = 30 * time.Minute
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 256 << 20
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = 64
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Transport == nil {
		o.Transport = DefaultTransport()
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("record: drawing the recording's id: %v", err)
	}
	r := &Recorder{
		o:      o,
		seed:   maphash.MakeSeed(),
		prefix: "rec-" + hex.EncodeToString(id[:]),
		queue:  make(chan *exchange, 4096),
		writes: make(chan []byte, o.WriteQueue),
		wrote:  make(chan struct{}),
	}
	r.tok = newTokenizer(o.Upstream, o.Transport, o.Tokenize)
	r.convos = newConversations(r.prefix, o.Idle)
	r.proxy = r.newProxy()
	go r.work()
	go r.write()
	return r, nil
}

// Handler is the proxy: every request goes to the upstream unchanged, and
// chat completions are recorded on the way.
func (r *Recorder) Handler() http.Handler { return r.proxy }

// Close stops recording: exchanges already queued are processed, every open
// conversation is written, and the output is flushed; requests still passing
// through are no longer recorded. Serve no more requests through Handler
// before calling it (http.Server.Shutdown first). ctx bounds the wait.
func (r *Recorder) Close(ctx context.Context) error {
	r.closing.Do(func() {
		r.mu.Lock()
		r.closed.Store(true)
		close(r.queue)
		r.mu.Unlock()
	})
	select {
	case <-r.wrote:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("record: closing: %w; traces still waiting were not written", ctx.Err())
	}
}

// pending is an exchange being shaped by a worker.
type pending struct {
	x    *exchange
	s    *shape
	err  error
	done chan struct{}
}

// work shapes exchanges on a few workers and assembles them into
// conversations on this goroutine, in the order their answers ended; it
// closes idle conversations and hands finished traces to the writer.
func (r *Recorder) work() {
	// at most half the cores: the recorder must never take the CPU the
	// proxy needs to pass answers on; a backlog waits in the queue or drops
	workers := min(4, max(1, runtime.GOMAXPROCS(0)/2))
	jobs := make(chan *pending, workers)
	ordered := make(chan *pending, 4*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				p.s, p.err = r.shapeOf(p.x)
				r.queued.Add(-p.x.queuedSize)
				p.x.release()
				close(p.done)
			}
		}()
	}
	go func() {
		for x := range r.queue {
			p := &pending{x: x, done: make(chan struct{})}
			jobs <- p
			ordered <- p
		}
		close(jobs)
		close(ordered)
	}()
	defer wg.Wait()
	defer close(r.writes)
	tick := time.NewTicker(max(time.Second, min(r.o.Idle/4, time.Minute)))
	defer tick.Stop()
	for {
		select {
		case p, ok := <-ordered:
			if !ok {
				r.flush(r.convos.closeAll())
				r.openConvs.Store(0)
				return
			}
			<-p.done
			r.assemble(p)
			r.flush(r.convos.closeIdle(r.o.Now()))
		case <-tick.C:
			r.flush(r.convos.closeIdle(r.o.Now()))
		}
		r.openConvs.Store(int64(r.convos.open()))
	}
}

// assemble adds one shaped request to its conversation.
func (r *Recorder) assemble(p *pending) {
	switch {
	case errors.Is(p.err, errTooLarge):
		r.stats.tooLarge.Add(1)
	case p.err != nil:
		r.stats.unparsed.Add(1)
		r.once(&r.stats.loggedUnparsed, "record: a chat request was not recorded: %v (further ones are only counted)", p.err)
	default:
		r.convos.add(p.s)
		r.stats.recorded.Add(1)
	}
}

// flush encodes finished traces and queues them for the disk, dropping (and
// counting) those the disk cannot take now.
func (r *Recorder) flush(done []finished) {
	for _, f := range done {
		line, err := encodeTrace(f.trace, r.o.Gzip)
		if err != nil {
			r.stats.dropEncode.Add(1)
			r.o.Log("record: trace %s not written: %v", f.trace.ID, err)
			continue
		}
		select {
		case r.writes <- line:
		default:
			r.stats.dropSlowDisk.Add(1)
			r.once(&r.stats.loggedSlowDisk, "record: the disk is not keeping up: trace %s dropped (further drops are only counted)", f.trace.ID)
		}
	}
}

// write puts finished traces on the output, one complete write each.
func (r *Recorder) write() {
	defer close(r.wrote)
	rw, _ := r.o.Out.(Rewinder)
	for line := range r.writes {
		_, err := r.o.Out.Write(line)
		if err == nil && rw != nil {
			err = rw.Mark()
		}
		if err != nil {
			r.stats.dropWriteError.Add(1)
			if rw != nil {
				_ = rw.Rewind()
			}
			r.once(&r.stats.loggedWriteError, "record: writing a trace failed: %v; it was dropped (further failures are only counted)", err)
			continue
		}
		r.stats.tracesWritten.Add(1)
		r.stats.bytesWritten.Add(int64(len(line)))
	}
}

// once logs a line the first time flag is set.
func (r *Recorder) once(flag *atomic.Bool, format string, args ...any) {
	if flag.CompareAndSwap(false, true) {
		r.o.Log(format, args...)
	}
}
