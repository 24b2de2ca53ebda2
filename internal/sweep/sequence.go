package sweep

import (
	"fmt"
	"time"
)

// sequence picks the sessions of the next step. The ladder climbs its steps
// in order and stops at the first miss; the adaptive mode doubles from the
// first step until a miss, then bisects between the highest step that held
// and the lowest that missed until they are Resolution apart, so each step
// halves the capacity interval.
type sequence struct {
	p      Plan
	k      int // next ladder position
	lo, hi int // highest held and lowest missed sessions; 0 = none yet
	steps  int
}

func newSequence(p Plan) *sequence { return &sequence{p: p} }

func (q *sequence) next() (int, bool) {
	if !q.p.Adaptive {
		if q.k >= len(q.p.Ladder) || (q.hi > 0 && q.steps > 0) {
			return 0, false
		}
		q.k++
		return q.p.Ladder[q.k-1], true
	}
	if len(q.p.Ladder) == 0 {
		return 0, false
	}
	first, top := q.p.Ladder[0], q.p.Ladder[len(q.p.Ladder)-1]
	res := max(q.p.Resolution, 1)
	switch {
	case q.lo == 0 && q.hi == 0:
		return first, true
	case q.lo == 0: // the first step missed
		return 0, false
	case q.hi == 0: // still climbing
		if q.lo >= top {
			return 0, false
		}
		return min(2*q.lo, top), true
	case q.hi-q.lo <= res:
		return 0, false
	}
	return (q.lo + q.hi) / 2, true
}

// left is how many steps may still follow the one about to run: the rest
// of the ladder and, when asked, the two repeats; in adaptive mode, which
// cannot know, none.
func (q *sequence) left() time.Duration {
	if q.p.Adaptive {
		return 0
	}
	n := len(q.p.Ladder) - q.k
	if q.p.Repeat && len(q.p.Ladder) > 1 {
		n += 2
	}
	return time.Duration(n)
}

func (q *sequence) judged(n int, miss bool) {
	q.steps++
	if miss {
		if q.hi == 0 || n < q.hi {
			q.hi = n
		}
		return
	}
	if n > q.lo && (q.hi == 0 || n < q.hi) {
		q.lo = n
	}
}

// bracket is the highest step that held and the lowest that missed.
func (q *sequence) bracket() (lo, hi int) { return q.lo, q.hi }

func (q *sequence) story() string {
	switch {
	case q.lo == 0 && q.hi > 0:
		return fmt.Sprintf("adaptive: the first step (%d sessions) missed", q.hi)
	case q.hi == 0:
		return fmt.Sprintf("adaptive: every step held, up to %d sessions", q.lo)
	}
	return fmt.Sprintf("adaptive: bracketed between %d (held) and %d (missed) sessions in %d steps", q.lo, q.hi, q.steps)
}

// Points are the steps capacity is computed from: for each number of
// sessions, its latest judgement (a repeat's pooled verdict replaces the
// first run's).
func Points(steps []StepResult) []Point {
	latest := map[int]int{}
	var order []int
	for k, s := range steps {
		if _, ok := latest[s.Sessions]; !ok {
			order = append(order, s.Sessions)
		}
		latest[s.Sessions] = k
	}
	out := make([]Point, 0, len(order))
	for _, n := range order {
		s := steps[latest[n]]
		out = append(out, Point{Sessions: n, Judged: s.Judged})
	}
	return out
}

// lastAt is the index of the latest step at n sessions, or -1.
func lastAt(steps []StepResult, n int) int {
	idx := -1
	for _, s := range steps {
		if s.Sessions == n {
			idx = s.Index
		}
	}
	return idx
}

// AdaptivePath is the longest climb and bisection an adaptive sweep of this
// ladder can run before its repeats: the sessions of each step, in order,
// for the capacity that needs the most steps (each step held exactly when
// its sessions are at most that capacity), and that capacity (the least
// of those that need as many). It runs the sweep's own sequence, so a
// plan counts the steps the sweep would take.
func AdaptivePath(ladder []int, resolution int) (path []int, capacity int) {
	if len(ladder) == 0 {
		return nil, 0
	}
	for c := 0; c <= ladder[len(ladder)-1]; c++ {
		q := newSequence(Plan{Ladder: ladder, Adaptive: true, Resolution: resolution})
		var steps []int
		for {
			n, more := q.next()
			if !more {
				break
			}
			steps = append(steps, n)
			q.judged(n, n > c)
		}
		if len(steps) > len(path) {
			path, capacity = steps, c
		}
	}
	return path, capacity
}
