// Package shard spreads a sweep's lanes over several headroom processes:
// shard 0, the coordinator, runs the sweep and judges it on the server's
// metrics, as one process does; shards 1 to N-1 each replay their slice of
// every step's lanes (load.Options.Shard) and report what they sent.
//
// The protocol is JSON over HTTP, one call a shard repeats: POST
// /shard/v1/sync with its Report; the answer is the coordinator's Order,
// held back (up to a poll) until it differs from the one the shard has
// applied. The coordinator's order changes (sessions, tag, stop) wait until
// every shard has applied them and sent everything before, so the shards
// start and end each step together and no record lands in the wrong step.
package shard

import (
	"time"

	"github.com/headroom-bench/headroom/internal/load"
)

// Version is the protocol's version; a shard of another version is refused.
const Version = 1

// Paths the coordinator serves.
const (
	PathSync  = "/shard/v1/sync"
	PathSetup = "/shard/v1/setup"
)

// Order is what every shard must be doing now.
type Order struct {
	V int `json:"v"`
	// Seq counts the coordinator's changes; a shard that has applied an
	// order reports its Seq.
	Seq      int64    `json:"seq"`
	Sessions int      `json:"sessions"` // lane ids 0..Sessions-1 run, over all shards
	Tag      load.Tag `json:"tag"`
	Epoch    int      `json:"epoch"` // load.Generator.Reseed
	// Stop ends the shard: its lanes stop, GraceS (wall seconds) bounds
	// the wait for what they have in flight, then it sends its last report.
	Stop   bool    `json:"stop,omitempty"`
	GraceS float64 `json:"grace_s,omitempty"`
	// Refused, when set, is why the coordinator turned the shard away.
	Refused string `json:"refused,omitempty"`
}

// Report is what a shard tells the coordinator on each sync.
type Report struct {
	V     int   `json:"v"`
	Shard int   `json:"shard"`
	Seq   int64 `json:"seq"` // the last order it applied; -1 before the first
	// Batch numbers the shard's reports from 1; one the coordinator has
	// taken already (its answer was lost) is not counted again.
	Batch int64 `json:"batch"`
	// InFlight and ByTier are its requests waiting on the server now.
	InFlight int            `json:"in_flight"`
	ByTier   map[string]int `json:"by_tier,omitempty"`
	Priming  load.Priming   `json:"priming"`
	// Sent are the requests that went out since the last report (no
	// outcome yet), Done the records that ended, in the order they did.
	Sent []load.Record `json:"sent,omitempty"`
	Done []load.Record `json:"done,omitempty"`
	// Stopped: the order to stop was carried out; this is the last report.
	Stopped bool `json:"stopped,omitempty"`
}

// Setup is what a shard needs to build lanes that replay what the same
// lane ids would in one process: the run file as the coordinator
// resolved it, and what pre-flight measured that the prompts depend on.
type Setup struct {
	V      int    `json:"v"`
	Shards int    `json:"shards"`
	Config []byte `json:"config"` // the resolved run file (YAML)
	// Endpoint is the URL the lanes send to, as the coordinator resolved
	// it (the simulated gateway it serves, for recipe.endpoint sim).
	Endpoint string `json:"endpoint"`
	// Origin is the wall-clock instant the run's clock reads 0 at, so
	// every shard's records are on one timeline.
	Origin time.Time `json:"origin"`
	// TokensPerWord is pre-flight's calibration of the prompts.
	TokensPerWord float64 `json:"tokens_per_word"`
	// ContextLen is the served context pre-flight found (0: not known),
	// which trims the sessions as it did the coordinator's.
	ContextLen int `json:"context_len,omitempty"`
}
