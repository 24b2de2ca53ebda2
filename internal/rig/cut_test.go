package rig

import (
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/sweep"
)

// fakeLoad is the sweep's view of a load generator, remembering its tag.
type fakeLoad struct{ tag load.Tag }

func (f *fakeLoad) SetSessions(int)    {}
func (f *fakeLoad) SetTag(t load.Tag)  { f.tag = t }
func (f *fakeLoad) InFlight() int      { return 0 }
func (f *fakeLoad) Stop(time.Duration) {}

// TestStepCutJudgesLateRequestsAsInFlight: a request of a step's judged
// time that finishes after that time ended is judged as still in flight,
// however late the judging runs, and its record says so, so that `judge`
// sees the step exactly as the live run did.
func TestStepCutJudgesLateRequestsAsInFlight(t *testing.T) {
	var written []savedRecord
	book := sweep.NewBook(func(r load.Record) { written = append(written, savedRecord{Record: r}) })
	cut := newStepCut(book, func(r load.Record) { written = append(written, savedRecord{Record: r, Late: true}) })
	gen := &fakeLoad{}
	l := cut.wrap(gen)
	measure := load.Tag{Step: 0, Sessions: 2, Phase: load.PhaseMeasure}
	l.SetTag(measure)
	early := load.Record{V: load.RecordVersion, Step: 0, Phase: load.PhaseMeasure, Lane: 0, Send: 100}
	late := load.Record{V: load.RecordVersion, Step: 0, Phase: load.PhaseMeasure, Lane: 1, Send: 110}
	book.Sent(early)
	book.Sent(late)
	early.Status = 200
	cut.add(early)
	// the judged time ends; the late request times out before the step is judged
	l.SetTag(load.Tag{Step: 1, Sessions: 2, Phase: load.PhaseWarmup})
	if gen.tag.Step != 1 {
		t.Fatalf("the tag did not reach the generator: %+v", gen.tag)
	}
	late.Error = load.ErrTimeout
	cut.add(late)
	warm := load.Record{V: load.RecordVersion, Step: 1, Phase: load.PhaseWarmup, Lane: 0, Send: 250, Status: 200}
	cut.add(warm)

	judged := book.Step(0, load.PhaseMeasure)
	if len(judged) != 2 {
		t.Fatalf("the step is judged on %d records, want 2", len(judged))
	}
	for _, r := range judged {
		if r.Lane == 1 && (!r.Pending || r.Error != "") {
			t.Errorf("the late request is judged as %+v, want in flight", r)
		}
	}
	if len(written) != 3 || !written[1].Late || written[0].Late || written[2].Late {
		t.Fatalf("records written: %+v", written)
	}
	// what the step was judged on as in flight is the late request as it
	// was sent, to be written with the step
	in := cut.inFlight(0)
	if len(in) != 1 || in[0].Lane != 1 || in[0].Error != "" || in[0].Send != 110 {
		t.Fatalf("in flight when step 1 was judged: %+v", in)
	}
	// judge reads it back as the live step saw it, and skips the late outcome
	if got := judgedView(savedRecord{Record: in[0], InFlight: true}); !got.Pending || got.Error != "" || got.Send != 110 || got.Lane != 1 {
		t.Errorf("judge reads the late request as %+v", got)
	}
}
