package config

import (
	"net"
	"net/url"
)

// MaxShards bounds sweep.shards.
const MaxShards = 256

// Shard says how the processes of a sharded sweep find each other: shard
// 0, the coordinator, runs the sweep and serves the others on Listen;
// shards 1 to N-1 replay their slice of each step's lanes and reach it at
// Coordinator. In a Kubernetes Indexed Job each pod's shard is its
// JOB_COMPLETION_INDEX; locally `headroom run --shards N` starts the
// other N-1 itself on loopback.
type Shard struct {
	// Listen is the address shard 0 serves the others on: host:port, an
	// empty host for every interface (a pod's), port 0 for a free one.
	// Default 127.0.0.1:0.
	Listen string `json:"listen,omitempty"`
	// Coordinator is the URL shards 1..N-1 reach shard 0 at, e.g.
	// http://headroom-1-0.headroom-shards.NS.svc:7070 (the chart sets it); empty
	// for local shards, which are told it.
	Coordinator string `json:"coordinator,omitempty"`
	// JoinTimeoutS is how long shard 0 waits for every other shard to
	// join before the sweep; default 300.
	JoinTimeoutS float64 `json:"join_timeout_s,omitempty"`
}

// ShardCount is the number of processes a step's lanes run on: at least 1.
func (s Sweep) ShardCount() int { return max(s.Shards, 1) }

// validateShards checks sweep.shards and sweep.shard.
func validateShards(r *Run, bad func(field, format string, args ...any)) {
	s := r.Sweep
	if s.Shards < 0 || s.Shards > MaxShards {
		bad("sweep.shards", "must be 0 or 1 (one process) up to %d, got %d", MaxShards, s.Shards)
	}
	if s.Shards > 1 && r.TimeScale.Virtual() {
		bad("sweep.shards", "%d shards need a wall clock: processes cannot share the virtual clock; set time_scale (1 for a real endpoint, 100 to rehearse the simulator over HTTP) or drop sweep.shards", s.Shards)
	}
	if l := s.Shard.Listen; l != "" {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			bad("sweep.shard.listen", "must be host:port (an empty host listens on every interface, port 0 picks a free one), got %q", l)
		}
	}
	if c := s.Shard.Coordinator; c != "" {
		if u, err := url.Parse(c); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("sweep.shard.coordinator", "must be an http:// URL with a host, e.g. http://headroom-1-0.headroom-shards.llm.svc:7070, got %q", c)
		}
	}
	if s.Shard.JoinTimeoutS < 0 {
		bad("sweep.shard.join_timeout_s", "must be > 0 seconds, got %g", s.Shard.JoinTimeoutS)
	}
}
