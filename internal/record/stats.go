package record

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// counters are the recorder's tallies, updated from many goroutines.
type counters struct {
	proxied, chats, recorded        atomic.Int64
	dropClosed, dropQueue, tooLarge atomic.Int64
	notOK, unparsed, noTokens       atomic.Int64
	estimatedIn, estimatedOut       atomic.Int64
	dropSlowDisk, dropWriteError    atomic.Int64
	dropEncode, cut                 atomic.Int64
	tracesWritten, bytesWritten     atomic.Int64

	loggedQueue, loggedTooLarge, loggedUnparsed   atomic.Bool
	loggedSlowDisk, loggedWriteError, loggedNoTok atomic.Bool
	loggedCut                                     atomic.Bool
}

// Stats is what a recorder did so far.
type Stats struct {
	Proxied  int64 `json:"proxied"`  // requests passed to the upstream, of every kind
	Chats    int64 `json:"chats"`    // of them, chat completions
	Recorded int64 `json:"recorded"` // chat completions that became a request of a trace
	// Not recorded, each with its reason.
	DroppedClosed int64 `json:"dropped_closed"` // ended after Close began
	DroppedQueue  int64 `json:"dropped_queue"`  // the recorder's queue was full
	TooLarge      int64 `json:"too_large"`      // request or answer over the capture limit
	NotOK         int64 `json:"not_ok"`         // the upstream answered with an error status, or not at all
	Unparsed      int64 `json:"unparsed"`       // the request or answer could not be read as chat JSON
	// Cut counts streams cut off while passing (the agent left, the upstream
	// broke); such a request is still recorded with what passed.
	Cut int64 `json:"cut"`
	// NoTokens counts requests recorded without hash ids: token blocks were
	// wanted and /tokenize did not give the prompt's ids.
	NoTokens int64 `json:"no_tokens"`
	// EstimatedIn and EstimatedOut count requests whose prompt or answer
	// length was estimated because the upstream sent no usage.
	EstimatedIn  int64 `json:"estimated_in"`
	EstimatedOut int64 `json:"estimated_out"`
	// Traces not written: the disk did not keep up, a write failed, or a
	// trace could not be encoded.
	DroppedSlowDisk   int64 `json:"dropped_slow_disk"`
	DroppedWriteError int64 `json:"dropped_write_error"`
	DroppedEncode     int64 `json:"dropped_encode"`
	TracesWritten     int64 `json:"traces_written"`
	BytesWritten      int64 `json:"bytes_written"`
	OpenConversations int   `json:"open_conversations"`
	// Tokenize is how prompt blocks are cut: "tokens", "text", or
	// "undecided" before the first chat request.
	Tokenize string `json:"tokenize"`
}

// Stats returns the recorder's counts so far.
func (r *Recorder) Stats() Stats {
	c := &r.stats
	return Stats{
		Proxied: c.proxied.Load(), Chats: c.chats.Load(), Recorded: c.recorded.Load(),
		DroppedClosed: c.dropClosed.Load(), DroppedQueue: c.dropQueue.Load(), TooLarge: c.tooLarge.Load(),
		NotOK: c.notOK.Load(), Unparsed: c.unparsed.Load(), Cut: c.cut.Load(), NoTokens: c.noTokens.Load(),
		EstimatedIn: c.estimatedIn.Load(), EstimatedOut: c.estimatedOut.Load(),
		DroppedSlowDisk: c.dropSlowDisk.Load(), DroppedWriteError: c.dropWriteError.Load(), DroppedEncode: c.dropEncode.Load(),
		TracesWritten: c.tracesWritten.Load(), BytesWritten: c.bytesWritten.Load(),
		OpenConversations: int(r.openConvs.Load()), Tokenize: r.tok.modeName(),
	}
}

// Dropped is every chat request and trace that did not reach the output.
func (s Stats) Dropped() int64 {
	return s.DroppedClosed + s.DroppedQueue + s.TooLarge + s.Unparsed + s.DroppedSlowDisk + s.DroppedWriteError + s.DroppedEncode
}

// String is the one-line summary the command prints.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests proxied, %d chat completions, %d recorded; %d traces written (%d bytes), %d conversations open; blocks from %s",
		s.Proxied, s.Chats, s.Recorded, s.TracesWritten, s.BytesWritten, s.OpenConversations, s.Tokenize)
	var drops []string
	for _, d := range []struct {
		n    int64
		what string
	}{
		{s.DroppedQueue, "requests dropped (recorder queue full)"},
		{s.DroppedClosed, "requests dropped (ended while closing)"},
		{s.TooLarge, "requests too large to record"},
		{s.NotOK, "upstream errors not recorded"},
		{s.Unparsed, "requests not readable as chat JSON"},
		{s.Cut, "streams cut off while passing (recorded as far as they went)"},
		{s.NoTokens, "requests without hash ids (no token ids)"},
		{s.EstimatedIn, "prompt lengths estimated (no usage)"},
		{s.EstimatedOut, "answer lengths estimated (no usage)"},
		{s.DroppedSlowDisk, "traces dropped (disk too slow)"},
		{s.DroppedWriteError, "traces dropped (write failed)"},
		{s.DroppedEncode, "traces dropped (could not encode)"},
	} {
		if d.n > 0 {
			drops = append(drops, fmt.Sprintf("%d %s", d.n, d.what))
		}
	}
	if len(drops) > 0 {
		b.WriteString("; ")
		b.WriteString(strings.Join(drops, ", "))
	}
	return b.String()
}
