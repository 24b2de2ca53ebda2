package timescale

import (
	"container/heap"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A virtual clock runs the goroutines that use it one at a time, the way an
// event queue runs events: the goroutine that holds the turn runs until it
// waits on the clock (Sleep, Wait, a Signal, a Group, a pipe built on them)
// or ends; the turn then passes to the oldest goroutine that became ready,
// and when none is ready, modelled time jumps to the earliest deadline. So a
// simulated sweep takes as long as its computation, not its modelled
// minutes, and the same seed gives the same run on a busy host or an idle one.
//
// The rules for code that runs on it: start goroutines with Clock.Go; wait
// only through the clock (never on a bare channel, a sync.WaitGroup or a
// wall-clock timer); derive contexts that are cancelled while others wait on
// them with Clock.WithCancel or Clock.WithTimeout, so the waiters wake at
// once; do not hold a mutex across a wait. A goroutine that breaks them
// deadlocks the run (reported by a panic naming what every goroutine waits
// on) rather than making it wrong.
type virtual struct {
	mu      sync.Mutex
	now     time.Duration // written under mu; read by Now through nowA
	nowA    atomic.Int64  // now, for Now without the lock
	pool    sync.Pool     // *waiter, reused once a goroutine woke from it
	seq     uint64
	runq    []*waiter
	timers  timerHeap
	parked  waitList // parked waiters that watch a context, in the order they parked
	checkCx bool     // a context made by the clock was cancelled
	live    int      // goroutines started by Run or Go that have not ended
	idle    bool     // no goroutine holds the turn
	steps   uint64   // turns handed over, for the periodic context check
	stopped bool     // Run's function returned: nothing runs any more
	dead    string   // the deadlock report, once nothing can run
}

// unlock releases mu and panics with the deadlock report if dispatch found
// that nothing can run any more.
func (v *virtual) unlock() {
	dead := v.dead
	v.dead = ""
	v.mu.Unlock()
	if dead != "" {
		panic(dead)
	}
}

// waiter is one goroutine's wait: at most one per goroutine at a time.
type waiter struct {
	turn  chan struct{} // buffered 1: the turn is handed over on it
	state int
	at    time.Duration // deadline; < 0 for none
	seq   uint64
	hi    int // index in timers; -1 when not in it
	done  <-chan struct{}
	sigs  []*Signal
	fn    func() // a timer that runs a function instead of waking a goroutine
	// sigBuf is sigs' room, so a wait's signals need no allocation.
	sigBuf [3]*Signal
	// prev and next link the waiter into parked while it is there.
	prev, next *waiter
	inList     bool
	woke       int    // which signal woke it; -1 a deadline, -2 its context
	reason     string // what it waits on, for the deadlock report
}

const (
	wsParked = iota
	wsReady
	wsRunning
)

// NewVirtual returns a virtual clock at modelled time 0. Code runs on it
// inside Run.
func NewVirtual() *Clock {
	return &Clock{scale: 1, start: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), v: &virtual{idle: true}}
}

// NewVirtualAt returns a virtual clock that reads at: a resumed run
// continues the timeline of the run it resumes.
func NewVirtualAt(at time.Duration) *Clock {
	c := NewVirtual()
	c.v.setNow(max(at, 0))
	return c
}

// Virtual reports whether c is a virtual clock.
func (c *Clock) Virtual() bool { return c.v != nil }

// Run runs f on the clock and returns when f returns. On a wall clock it
// just calls f. On a virtual clock the calling goroutine takes the turn for
// f, so f and the goroutines it starts with Go run in modelled time; those
// still waiting when f returns stay parked for good.
func (c *Clock) Run(f func()) {
	if c.v == nil {
		f()
		return
	}
	v := c.v
	w := v.newWaiter("run")
	v.mu.Lock()
	v.live++
	v.stopped = false
	v.ready(w)
	if v.idle {
		v.dispatch()
	}
	v.mu.Unlock()
	<-w.turn
	v.putWaiter(w)
	defer func() {
		v.mu.Lock()
		v.live--
		v.stopped, v.idle = true, true
		v.mu.Unlock()
	}()
	f()
}

// Go starts f in a new goroutine that runs on the clock.
func (c *Clock) Go(f func()) {
	if c.v == nil {
		go f()
		return
	}
	v := c.v
	w := v.newWaiter("start")
	v.mu.Lock()
	v.live++
	v.ready(w)
	if v.idle {
		v.dispatch()
	}
	v.mu.Unlock()
	go func() {
		<-w.turn
		v.putWaiter(w)
		defer v.exit()
		f()
	}()
}

// newWaiter returns a waiter for one wait. A waiter is referenced by
// nothing of the clock's once its goroutine woke (ready takes it off the
// timers, the parked set and every signal), so the goroutine hands it back
// with putWaiter and the next wait reuses it, its channel too.
func (v *virtual) newWaiter(reason string) *waiter {
	if w, ok := v.pool.Get().(*waiter); ok {
		*w = waiter{turn: w.turn, hi: -1, at: -1, reason: reason}
		return w
	}
	return &waiter{turn: make(chan struct{}, 1), hi: -1, at: -1, reason: reason}
}

// putWaiter hands back the waiter of a wait that is over.
func (v *virtual) putWaiter(w *waiter) {
	w.sigs, w.sigBuf, w.done = nil, [3]*Signal{}, nil
	v.pool.Put(w)
}

// setNow moves modelled time (under mu).
func (v *virtual) setNow(t time.Duration) {
	v.now = t
	v.nowA.Store(int64(t))
}

// exit ends the running goroutine's turn for good.
func (v *virtual) exit() {
	v.mu.Lock()
	v.live--
	v.dispatch()
	v.unlock()
}

// ready queues w to run (under mu).
func (v *virtual) ready(w *waiter) {
	if w.state != wsParked {
		return
	}
	w.state = wsReady
	if w.hi >= 0 {
		heap.Remove(&v.timers, w.hi)
	}
	if w.inList {
		v.parked.remove(w)
	}
	for _, s := range w.sigs {
		s.drop(w)
	}
	v.runq = append(v.runq, w)
}

// dispatch hands the turn to the next goroutine (under mu): the oldest ready
// one, else the earliest deadline's, running timer functions on the way.
func (v *virtual) dispatch() {
	if v.stopped {
		return
	}
	v.idle = false
	for {
		v.steps++
		if v.checkCx || v.steps%1024 == 0 {
			v.checkCx = false
			v.wakeCancelled()
		}
		if len(v.runq) > 0 {
			w := v.runq[0]
			v.runq[0] = nil
			v.runq = v.runq[1:]
			w.state = wsRunning
			w.turn <- struct{}{}
			return
		}
		if len(v.timers) == 0 {
			v.wakeCancelled()
			if len(v.runq) > 0 {
				continue
			}
			v.idle = true
			if v.live > 0 {
				v.dead = v.deadlock()
			}
			return
		}
		w := heap.Pop(&v.timers).(*waiter)
		if w.at > v.now {
			v.setNow(w.at)
		}
		if w.fn != nil {
			fn := w.fn
			w.state = wsRunning
			v.mu.Unlock()
			fn()
			v.mu.Lock()
			continue
		}
		w.woke = -1
		v.ready(w)
	}
}

// wakeCancelled readies every parked waiter whose context is done.
func (v *virtual) wakeCancelled() {
	if v.parked.n == 0 {
		return
	}
	var woke []*waiter
	for w := v.parked.head; w != nil; w = w.next {
		select {
		case <-w.done:
			woke = append(woke, w) // in the order they parked, for determinism
		default:
		}
	}
	for _, w := range woke {
		w.woke = -2
		v.ready(w)
	}
}

func (v *virtual) deadlock() string {
	var b strings.Builder
	fmt.Fprintf(&b, "timescale: virtual clock deadlock at modelled %v: %d goroutine(s) wait with nothing scheduled to wake them (a wait that bypasses the clock?):", v.now, v.live)
	seen := map[string]int{}
	for w := v.parked.head; w != nil; w = w.next {
		seen[w.reason]++
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s x%d;", k, seen[k])
	}
	return b.String()
}

// park gives up the turn until w is readied, and returns why it woke.
// Called with mu held; returns with it released.
func (v *virtual) park(w *waiter) int {
	w.state = wsParked
	v.seq++
	w.seq = v.seq
	if w.at >= 0 {
		heap.Push(&v.timers, w)
	}
	if w.done != nil {
		v.parked.push(w)
	}
	for _, s := range w.sigs {
		s.waiters = append(s.waiters, w)
	}
	v.dispatch()
	v.unlock()
	<-w.turn
	return w.woke
}

// wait is Clock.Wait on a virtual clock.
func (v *virtual) wait(ctx context.Context, until time.Duration, reason string, sigs []*Signal) (int, error) {
	v.mu.Lock()
	if err := ctx.Err(); err != nil {
		v.mu.Unlock()
		return -2, err
	}
	for i, s := range sigs {
		if s.takeLocked() {
			v.mu.Unlock()
			return i, nil
		}
	}
	if until >= 0 && until <= v.now {
		v.mu.Unlock()
		return -1, nil
	}
	w := v.newWaiter(reason)
	w.at, w.done = until, ctx.Done()
	if len(sigs) <= len(w.sigBuf) {
		w.sigs = append(w.sigBuf[:0], sigs...) // the caller's slice stays its own
	} else {
		w.sigs = append([]*Signal(nil), sigs...)
	}
	woke := v.park(w)
	v.putWaiter(w)
	if woke == -2 {
		return -2, ctx.Err()
	}
	return woke, nil
}

// after runs fn on the clock at modelled time at, unless the returned stop
// is called first (stop reports whether it stopped it).
func (v *virtual) after(at time.Duration, fn func()) (stop func() bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := &waiter{hi: -1, at: -1, reason: "timer"} // never pooled: stop may look at it later
	w.fn, w.at = fn, at
	v.seq++
	w.seq = v.seq
	heap.Push(&v.timers, w)
	return func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		if w.hi < 0 {
			return false
		}
		heap.Remove(&v.timers, w.hi)
		return true
	}
}

// cancelled notes that a context made by the clock was cancelled: its
// waiters wake before the turn passes on.
func (v *virtual) cancelled() {
	v.mu.Lock()
	v.checkCx = true
	v.mu.Unlock()
}

// waitList is a doubly linked list of waiters, oldest first.
type waitList struct {
	head, tail *waiter
	n          int
}

func (l *waitList) push(w *waiter) {
	w.prev, w.next, w.inList = l.tail, nil, true
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.n++
}

func (l *waitList) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next, w.inList = nil, nil, false
	l.n--
}

type timerHeap []*waiter

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hi, h[j].hi = i, j
}
func (h *timerHeap) Push(x any) {
	w := x.(*waiter)
	w.hi = len(*h)
	*h = append(*h, w)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	w.hi = -1
	return w
}
