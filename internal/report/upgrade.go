package report

import (
	"math"
	"strings"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// Summary versions:
//
//	1: the first.
//	2: capacity from every judged step at once; capacity.bracket (the
//	   ladder's last step held, first missed) and capacity.not_established
//	   (no step passed: sessions 0, no price per session-hour, only
//	   cost.usd_per_session_hour_at_least with no upper end).
//
// A version 1 summary reads as version 2: its bracket is taken from its
// steps, and one in which no step passed is not established, whatever
// capacity and cost it stated.

// upgrade brings a summary read from disk to SummaryVersion's fields.
func (s *Summary) upgrade() {
	if s.Version >= 2 {
		return
	}
	upgradeLadder(s.Steps, &s.Capacity, &s.Cost)
	for i := range s.Mixes {
		m := &s.Mixes[i]
		cost := sweep.Cost{USDPerHour: s.Cost.USDPerHour}
		if m.Cost != nil {
			cost = *m.Cost
		}
		upgradeLadder(m.Steps, &m.Capacity, &cost)
		if m.Cost != nil {
			*m.Cost = cost
		}
	}
}

func upgradeLadder(steps []Step, c *sweep.Capacity, cost *sweep.Cost) {
	if len(steps) == 0 {
		return
	}
	pts := make([]sweep.Point, len(steps))
	for i, st := range steps {
		pts[i] = sweep.Point{Sessions: st.Sessions, Judged: verdict.Step{Verdict: st.Verdict}}
	}
	c.Bracket = sweep.BracketOf(pts)
	if c.Bracket[0] > 0 || c.NotEstablished {
		return
	}
	c.NotEstablished, c.AtLeast, c.TooClose = true, false, nil
	if c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data") {
		return
	}
	if c.Hi <= 0 {
		c.Hi = float64(firstStep(Summary{Steps: steps}))
	}
	c.Sessions, c.Lo = 0, 0
	cost.USDPerSessionHour, cost.USDPerSessionHourLo, cost.USDPerSessionHourHi, cost.AtMost = nil, nil, nil, false
	if v := cost.USDPerHour / c.Hi; c.Hi > 0 && !math.IsInf(v, 0) {
		cost.USDPerSessionHourAtLeast = &v
	}
}
