package main

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/record"
	"github.com/headroom-bench/headroom/internal/trace"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/spf13/cobra"
)

func recordCmd(stderr io.Writer) *cobra.Command {
	var (
		listen, upstream, out, tokenize, caFile string
		appendTo, insecure                      bool
		idle, statsEvery                        time.Duration
		queueMB                                 int
	)
	cmd := &cobra.Command{
		Use:   "record --upstream URL -o FILE",
		Short: "Record the shape of real agent sessions (never their content) as Weka/AgentX traces, as a proxy in front of the gateway",
		Long: `record is a reverse proxy for the OpenAI chat-completions API. Point the agents
at --listen instead of the gateway: every request goes to --upstream unchanged
(streamed chunk by chunk, the agents' own key passed through and never
stored), and each conversation is written to -o as one Weka/AgentX trace that
'headroom traces stats' and 'headroom run' read:

  - per request: prompt and answer tokens (from the upstream's usage), the
    time since the conversation began and since the agent's previous
    request, the time to first byte and the request's length;
  - hash ids of the prompt's 64-token blocks: a salted rolling hash of the
    token ids the upstream's POST /tokenize gives (vLLM), else of 64-word
    text blocks (the trace's block_size is then 64 words in tokens), so
    shared prefixes share ids as the engine's cache sees them. The salt is
    drawn per recording and never written; ids are numbered from 1 per
    conversation;
  - conversations and subagents recognised from the prompts alone: a
    request that extends an agent's latest prompt is its next turn, one that
    forks from the middle of a history (past its system messages) is a
    subagent, spawned when it arrives, anything else a new conversation.

No prompt, answer, tool argument or key is written. A conversation is written
when it has been idle for --idle, and all of them when record stops (Ctrl-C).
The recorder never holds an agent up: when it or the disk falls behind,
records are dropped and counted (the counts are printed every --stats-every
and at the end). See docs/record.md for the rules and what they get wrong.`,
		Example: `  headroom record --listen 127.0.0.1:8001 --upstream http://vllm.llm:8000 -o traces.jsonl.gz
  OPENAI_BASE_URL=http://127.0.0.1:8001/v1 my-agent ...
  headroom traces stats traces.jsonl.gz
  headroom traces anonymise traces.jsonl.gz -o shareable.jsonl.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if upstream == "" || out == "" {
				return errors.New("give --upstream URL (the gateway the agents use) and -o FILE (the recording)")
			}
			u, err := url.Parse(upstream)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("--upstream %q: give the gateway's base URL, such as http://127.0.0.1:8000", upstream)
			}
			if u.User != nil {
				return errors.New("--upstream: drop the user info from the URL; the agents' own Authorization header is passed through")
			}
			tr := record.DefaultTransport()
			if caFile != "" || insecure {
				conn, err := transport.Auth{TLS: &transport.TLS{CAFile: caFile, InsecureSkipVerify: insecure}}.Resolve("--ca-file", nil, "")
				if err != nil {
					return err
				}
				tr.TLSClientConfig = conn.TLS
			}
			f, err := record.CreateFile(out, appendTo)
			if err != nil {
				return fmt.Errorf("-o: %w", err)
			}
			logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
			rec, err := record.New(record.Options{
				Upstream: u, Transport: tr, Out: f, Gzip: strings.HasSuffix(strings.ToLower(out), ".gz"),
				Tokenize: tokenize, Idle: idle, QueueBytes: int64(queueMB) << 20, Log: logf,
			})
			if err != nil {
				f.Close()
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				f.Close()
				return fmt.Errorf("--listen %s: %v; pick a free address", listen, err)
			}
			srv := &http.Server{Handler: rec.Handler(), ReadHeaderTimeout: 30 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			logf("recording: agents at http://%s -> %s, traces to %s; Ctrl-C writes the open conversations and stops", ln.Addr(), u.Redacted(), out)
			ctx := cmd.Context()
			var tick <-chan time.Time
			if statsEvery > 0 {
				t := time.NewTicker(statsEvery)
				defer t.Stop()
				tick = t.C
			}
			var serveErr error
		wait:
			for {
				select {
				case <-ctx.Done():
					break wait
				case serveErr = <-served:
					break wait
				case <-tick:
					logf("record: %s", rec.Stats())
				}
			}
			// let the streams in flight finish, then write every conversation
			grace, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = srv.Shutdown(grace)
			closeErr := rec.Close(grace)
			fileErr := f.Close()
			st := rec.Stats()
			logf("record: %s", st)
			if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
				return fmt.Errorf("--listen %s: %v", listen, serveErr)
			}
			return errors.Join(closeErr, fileErr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", "127.0.0.1:8001", "`ADDRESS` the agents connect to (plain HTTP; keep it on loopback or a trusted network)")
	fs.StringVar(&upstream, "upstream", "", "the gateway's base `URL`, such as http://vllm.llm:8000")
	fs.StringVarP(&out, "output", "o", "", "the recording `FILE` (JSONL, one trace per line; gzipped when it ends in .gz)")
	fs.BoolVar(&appendTo, "append", false, "add to an existing recording instead of refusing to touch it")
	fs.StringVar(&tokenize, "tokenize", record.TokenizeAuto, "prompt blocks from the upstream's /tokenize token ids: auto (if it gives ids), on, or off (64-word text blocks)")
	fs.DurationVar(&idle, "idle", 30*time.Minute, "write a conversation once it has had no request for this long")
	fs.DurationVar(&statsEvery, "stats-every", time.Minute, "print the counts (recorded, dropped) this often; 0 only at the end")
	fs.IntVar(&queueMB, "queue-mb", 256, "MiB of requests and answers that may wait for the recorder before more pass unrecorded")
	fs.StringVar(&caFile, "ca-file", "", "PEM `FILE` of the authorities that sign the upstream's certificate")
	fs.BoolVar(&insecure, "insecure-skip-verify", false, "accept any upstream certificate (a test cluster only)")
	return cmd
}

func anonymiseCmd(stdout io.Writer) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:     "anonymise PATH...",
		Aliases: []string{"anonymize"},
		Short:   "Re-number and re-order Weka/AgentX traces (a recording or any published file) so they can be shared",
		Long: `anonymise reads traces and writes them with every name that could tie them to
where they were captured replaced: traces are put in an order drawn from a
fresh random salt (never written) and named trace_0001, ...; subagents are
named agent_001, ... in each trace; hash ids are numbered from 1 in the order
they first appear (per trace when hash_id_scope is local, across the file
otherwise), so equal blocks stay equal and a replay's cache sees what it saw;
the producer's totals block is dropped. Lengths, times, models and subagent
types are kept: they are the shape being shared.`,
		Example: `  headroom traces anonymise traces.jsonl.gz -o shareable.jsonl.gz`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			all, err := readTraces(paths)
			if err != nil {
				return err
			}
			salt := make([]byte, 32)
			if _, err := rand.Read(salt); err != nil {
				return fmt.Errorf("drawing the salt: %v", err)
			}
			anon := trace.Anonymise(all, salt)
			if out == "" || out == "-" {
				return trace.WriteJSONL(stdout, anon)
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("-o: %w", err)
			}
			if !strings.HasSuffix(strings.ToLower(out), ".gz") {
				return errors.Join(trace.WriteJSONL(f, anon), f.Close())
			}
			zw := gzip.NewWriter(f)
			err = trace.WriteJSONL(zw, anon)
			return errors.Join(err, zw.Close(), f.Close())
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "-", "`FILE` to write (JSONL; gzipped when it ends in .gz); - for stdout")
	return cmd
}
