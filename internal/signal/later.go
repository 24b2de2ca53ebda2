package signal

import (
	"context"
	"errors"
	"runtime/pprof"
	"time"
)

// Pending is a scrape whose targets have answered and whose sample may
// still be being worked out (parsed and mapped) on a goroutine of its own.
type Pending struct {
	done chan struct{}
	s    Sample
	err  error
}

// Finished returns a Pending already worked out: s and err.
func Finished(s Sample, err error) *Pending {
	p := &Pending{done: make(chan struct{}), s: s, err: err}
	close(p.done)
	return p
}

// Later works a sample out with f on a goroutine of its own; f must touch
// no clock.
func Later(f func() (Sample, error)) *Pending {
	p := &Pending{done: make(chan struct{})}
	// labelled so a profile tells work beside the clock apart (docs/performance.md)
	go pprof.Do(context.Background(), pprof.Labels("beside", "scrape"), func(context.Context) {
		defer close(p.done)
		p.s, p.err = f()
	})
	return p
}

// Wait returns the scrape's sample and error (as Scrape's) once it is
// worked out. It waits on no clock: on a virtual clock the goroutine that
// waits keeps the clock's turn, so modelled time stands still meanwhile,
// and what it reads is what it would have read had the sample been worked
// out before ScrapeLater returned.
func (p *Pending) Wait() (Sample, error) {
	<-p.done
	return p.s, p.err
}

// answer is what one target sent a scrape, and the part worked out from it.
type answer struct {
	at   time.Duration
	seq  uint64 // orders scrapes by when they were sent (the process watch)
	text []byte
	err  error
	part Sample
}

// ScrapeLater is Scrape in two halves: it reads every target now and
// returns a Pending whose Wait gives the sample Scrape would have given.
//
// A Sequential scraper (on a virtual clock) works the sample out on a
// goroutine of its own, started here: reading the targets is what must
// happen at the modelled instant, while parsing the text and mapping it
// is computation whose result does not depend on when it runs, so it can
// run on another core while the clock moves on. Each scrape's sample is
// worked out after the one before it (a target's last parsed blocks and the
// process watch follow the scrapes in order), whether or not that one was
// waited for; that goroutine touches no clock. Otherwise the sample is
// worked out before ScrapeLater returns.
func (s *Scraper) ScrapeLater(ctx context.Context, at time.Duration) *Pending {
	out := NewSample(at)
	targets, err := s.targets(ctx)
	if err != nil {
		if len(targets) == 0 {
			return Finished(out, err)
		}
		out.Errors = append(out.Errors, err.Error())
	}
	if len(targets) == 0 {
		return Finished(out, errors.New("no metrics targets to scrape: give at least one /metrics URL"))
	}
	rules := s.rules.get(s.Mapping)
	answers := make([]answer, len(targets))
	read := func(i int) {
		a := &answers[i]
		a.at = at
		a.seq = s.seq.Add(1) // scrapes may overlap (the scrape loop and an idle wait)
		a.text, a.err = s.read(ctx, targets[i])
	}
	if !s.Sequential {
		s.each(len(targets), func(i int) {
			read(i)
			s.finish(targets[i], rules, &answers[i])
		})
		return Finished(sum(out, targets, answers))
	}
	for i := range targets {
		read(i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.last
	s.last = Later(func() (Sample, error) {
		if prev != nil {
			<-prev.done
		}
		for i := range answers {
			s.finish(targets[i], rules, &answers[i])
		}
		return sum(out, targets, answers)
	})
	return s.last
}
