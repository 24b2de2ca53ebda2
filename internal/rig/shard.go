package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/load"
	"github.com/headroom-bench/headroom/internal/prompt"
	"github.com/headroom-bench/headroom/internal/shard"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/timescale"
)

// lanesOf is the load generator's options for the run: one process's lanes
// (shards 1, index 0) or shard index of cfg.Sweep.ShardCount().
func lanesOf(cfg config.Run, client *load.Client, clock *timescale.Clock, sessions map[string][]load.Session, tokensPerWord float64, index int, sink, onSend func(load.Record)) load.Options {
	w := cfg.Workload
	return load.Options{
		Client: client, Clock: clock, Tiers: sessions, Fresh: FreshSessions(w),
		Mix:       mixOf(w),
		Prompts:   prompt.Builder{Seed: w.Seed, BlockSize: prompt.DefaultBlockSize, TokensPerWord: tokensPerWord, Memo: prompt.NewMemo(prompt.MemoBytes)},
		ThinkTime: w.ThinkTime, ThinkCap: seconds(w.ThinkTimeCapS),
		Timeout: seconds(w.RequestTimeoutS), PrimeTimeout: seconds(w.PrimeTimeoutS),
		Seed: w.Seed, Sink: sink, OnSend: onSend,
		Retry: load.RetryPolicy{Attempts: w.Retry.Attempts, Base: seconds(w.Retry.BackoffS), Max: seconds(w.Retry.BackoffMaxS)},
		Shard: index, Shards: cfg.Sweep.ShardCount(),
	}
}

// mixOf is the run file's mix as the load generator's tier shares.
func mixOf(w config.Workload) []load.TierShare {
	return []load.TierShare{{Tier: "heavy", Share: w.Mix.Heavy}, {Tier: "light", Share: w.Mix.Light}}
}

// ShardStarter starts shard index of a sharded run on this machine,
// pointed at the coordinator's url, and returns a wait for its end.
type ShardStarter func(ctx context.Context, url string, index int) (wait func() error, err error)

// ExecShard is the default ShardStarter: `headroom shard` in a process of
// its own, this binary again, its output on progress.
func ExecShard(progress io.Writer) ShardStarter {
	return func(ctx context.Context, url string, index int) (func() error, error) {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(self, "shard", "--coordinator", url, "--index", strconv.Itoa(index))
		cmd.Stdout, cmd.Stderr = progress, progress
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start shard %d: %w", index, err)
		}
		return cmd.Wait, nil
	}
}

// shardLanes is the sweep's load: gen alone, or with sweep.shards above 1
// a coordinator over gen and the other shards, once all have joined. In a
// Kubernetes Indexed Job the other shards are pods of their own; without
// sweep.shard.coordinator they are started here (Options.StartShard).
func (r *run) shardLanes(ctx context.Context, cfg config.Run, clock *timescale.Clock, gen *load.Generator, endpoint string, tokensPerWord float64, sink, onSend func(load.Record)) (sweep.Load, func(), error) {
	n := cfg.Sweep.ShardCount()
	if n <= 1 {
		return gen, func() {}, nil
	}
	if clock.Virtual() {
		return nil, nil, errors.New("sweep.shards: shards need a wall clock (time_scale 1 for a real endpoint, 100 to rehearse the simulator)")
	}
	resolved, err := yaml.Marshal(cfg.Redacted())
	if err != nil {
		return nil, nil, err
	}
	c := shard.NewCoordinator(shard.Options{Local: gen, Shards: n, Clock: clock, OnSend: onSend, Sink: sink, Logf: r.logf,
		Setup: shard.Setup{Config: resolved, Endpoint: endpoint, Origin: clock.Origin(), TokensPerWord: tokensPerWord, ContextLen: r.contextLen}})
	listen := cfg.Sweep.Shard.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if err := c.Listen(listen); err != nil {
		return nil, nil, err
	}
	var waits []func() error
	stop := func() {
		c.Close()
		for _, w := range waits {
			_ = w()
		}
	}
	if cfg.Sweep.Shard.Coordinator == "" {
		start := r.o.StartShard
		if start == nil {
			start = ExecShard(r.progress)
		}
		for k := 1; k < n; k++ {
			w, err := start(ctx, c.URL(), k)
			if err != nil {
				stop()
				return nil, nil, err
			}
			waits = append(waits, w)
		}
	}
	join := seconds(cfg.Sweep.Shard.JoinTimeoutS)
	if join <= 0 {
		join = 5 * time.Minute
	}
	if err := c.WaitJoined(ctx, clock.Real(join)); err != nil {
		stop()
		return nil, nil, err
	}
	r.logf("shards: all %d joined; each step's lanes are split over them (lane i on shard i mod %d)", n, n)
	r.notes = append(r.notes, fmt.Sprintf("the load ran on %d shards (sweep.shards), each replaying its lanes of every step; shard 0 judged the steps on the server's metrics and wrote every shard's records (records.jsonl and records-shard-K.jsonl)", n))
	return c, stop, nil
}

// RunShard runs shard index of a sharded sweep whose coordinator is at
// url: it reads the run's setup from the coordinator, builds the lanes
// one process would run for its lane ids, and replays them as ordered
// until the coordinator stops it.
func RunShard(ctx context.Context, url string, index int, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	hc := &http.Client{}
	setup, err := shard.FetchSetup(ctx, hc, url, 2*time.Minute)
	if err != nil {
		return err
	}
	if index < 1 || index >= setup.Shards {
		return fmt.Errorf("shard %d: the coordinator runs shards 0..%d (0 is itself)", index, setup.Shards-1)
	}
	cfg, err := config.Parse(setup.Config, "the coordinator's run file")
	if err != nil {
		return err
	}
	acc, err := resolveAccess(cfg, nil)
	if err != nil {
		return err
	}
	clock, err := timescale.NewFrom(cfg.TimeScale.Wall(), setup.Origin)
	if err != nil {
		return err
	}
	sessions, err := BuildSessions(cfg.Workload)
	if err != nil {
		return err
	}
	if setup.ContextLen > 0 {
		if sessions, _, _, err = checkContext(cfg, sessions, setup.ContextLen, "the coordinator's pre-flight"); err != nil {
			return err
		}
	}
	client := load.NewClientConn(setup.Endpoint, cfg.Recipe.Model, acc.endpoint)
	defer client.Close()
	logf := func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }
	w := &shard.Worker{URL: url, Shard: index, Client: hc, Logf: logf}
	w.Lanes = load.NewGenerator(lanesOf(cfg, client, clock, sessions, setup.TokensPerWord, index, w.Done, w.Sent))
	logf("shard %d of %d: joined %s; sending to %s", index, setup.Shards, url, setup.Endpoint)
	return w.Run(ctx)
}
