package trace

import (
	"math"
	"slices"
	"testing"
)

// resumes lists a session's own turns after its first, each with the pause
// before it and whether it resumed cold: a prompt over 20K tokens with more
// than half of it new (not a prefix of any earlier prompt of the session),
// the rule coldAfterThink was counted by.
func resumes(tr Trace) (thinks []float64, cold []bool, kept []float64) {
	turns := tr.Turns()
	for i, tu := range turns {
		shared := 0
		for _, p := range turns[:i] {
			k := 0
			for k < len(p.HashIDs) && k < len(tu.HashIDs) && p.HashIDs[k] == tu.HashIDs[k] {
				k++
			}
			shared = max(shared, k)
		}
		if i == 0 || tu.Agent != "" {
			continue
		}
		isCold := tu.In > 20000 && tu.In-shared*tu.BlockSize > tu.In/2
		thinks = append(thinks, tu.ThinkTime)
		cold = append(cold, isCold)
		if isCold && len(tu.HashIDs) > 0 {
			kept = append(kept, float64(shared)/float64(len(tu.HashIDs)))
		}
	}
	return thinks, cold, kept
}

// coldCounts counts resumes and cold ones in coldAfterThink's buckets.
func coldCounts(traces []Trace) (n, k []int, kept []float64) {
	n, k = make([]int, len(coldAfterThink)), make([]int, len(coldAfterThink))
	for _, tr := range traces {
		thinks, cold, kp := resumes(tr)
		kept = append(kept, kp...)
		for i, th := range thinks {
			b := 0
			for th >= coldAfterThink[b].below {
				b++
			}
			n[b]++
			if cold[i] {
				k[b]++
			}
		}
	}
	return n, k, kept
}

// TestColdResumesMatchTheCorpus recounts coldAfterThink from the shared
// corpus: the table's shares are its counts, bucket for bucket.
func TestColdResumesMatchTheCorpus(t *testing.T) {
	traces := readSharedCorpus(t)
	n, k, kept := coldCounts(traces)
	for b, e := range coldAfterThink {
		got := float64(k[b]) / float64(n[b])
		t.Logf("pause < %6g s: %3d of %5d resume cold (%.4f)", e.below, k[b], n[b], got)
		if math.Abs(got-e.share) > 1e-12 {
			t.Errorf("pause < %g s: the corpus gives %d/%d = %.5f, the table %.5f", e.below, k[b], n[b], got, e.share)
		}
	}
	if m := median(kept); math.Abs(m-coldKeep) > 0.01 {
		t.Errorf("the corpus's cold turns keep a median %.3f of their blocks, coldKeep is %.3f", m, coldKeep)
	}
	heavy, _ := Tiers(traces)
	_, hk, _ := coldCounts(heavy)
	t.Logf("heavy tier: %d cold resumes over %d sessions", sum(hk), len(heavy))
}

// TestSynthColdResumes: with ColdResumes, synthesised heavy sessions resume
// cold at the corpus's rate for each pause, keeping coldKeep of their
// blocks; without it, never.
func TestSynthColdResumes(t *testing.T) {
	on := Synthesize(SynthOptions{Sessions: 1500, Seed: 5, HeavyShare: 1, ColdResumes: true})
	n, k, kept := coldCounts(on)
	for b, e := range coldAfterThink {
		want := float64(n[b]) * e.share
		sd := math.Sqrt(want * (1 - e.share))
		t.Logf("pause < %6g s: %4d of %5d cold, want %.1f (sd %.1f)", e.below, k[b], n[b], want, sd)
		if n[b] < 100 {
			t.Errorf("pause < %g s: only %d resumes drawn; the test needs more sessions", e.below, n[b])
		}
		if math.Abs(float64(k[b])-want) > 4*sd+1 {
			t.Errorf("pause < %g s: %d of %d resumed cold, want %.1f (4 sd: %.1f)", e.below, k[b], n[b], want, 4*sd)
		}
	}
	if m := median(kept); math.Abs(m-coldKeep) > 0.01 {
		t.Errorf("cold turns keep a median %.3f of their blocks, want %.2f", m, coldKeep)
	}
	// The heavy tier of real sessions: 123 cold resumes in 118 sessions.
	if per := float64(sum(k)) / float64(len(on)); per < 0.5 || per > 1.6 {
		t.Errorf("%.2f cold resumes a heavy session, the corpus's heavy tier has about 1", per)
	}
	_, k, _ = coldCounts(Synthesize(SynthOptions{Sessions: 300, Seed: 5, HeavyShare: 1}))
	if c := sum(k); c != 0 {
		t.Errorf("without ColdResumes %d turns resumed cold, want none", c)
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
