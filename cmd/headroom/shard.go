package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/rig"
)

// shardIndex is this process's shard of a sharded run in a Kubernetes
// Indexed Job (JOB_COMPLETION_INDEX): ok when it is one of 1..N-1, which
// replay their lanes for the coordinator, pod 0.
func shardIndex(cfg config.Run, getenv func(string) string) (int, bool, error) {
	v := getenv("JOB_COMPLETION_INDEX")
	if cfg.Sweep.ShardCount() <= 1 || v == "" {
		return 0, false, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 || k >= cfg.Sweep.ShardCount() {
		return 0, false, fmt.Errorf("JOB_COMPLETION_INDEX %q is not a shard of 0..%d (sweep.shards %d)", v, cfg.Sweep.ShardCount()-1, cfg.Sweep.Shards)
	}
	if k == 0 {
		return 0, false, nil
	}
	if cfg.Sweep.Shard.Coordinator == "" {
		return 0, false, fmt.Errorf("shard %d of an Indexed Job needs sweep.shard.coordinator, the URL of pod 0 (the chart sets it)", k)
	}
	return k, true, nil
}

func shardCmd(stderr io.Writer) *cobra.Command {
	var coordinator string
	var index int
	cmd := &cobra.Command{
		Use:   "shard --coordinator URL --index K",
		Short: "Replay one shard's lanes of a sharded sweep for its coordinator",
		Long: `shard runs shard K of a sweep whose run file sets sweep.shards: it reads
the run's setup (the resolved run file, the endpoint, the clock's origin,
pre-flight's prompt calibration) from the coordinator, builds the lanes one
process would run for lane ids i with i mod N = K, and replays them as the
coordinator orders, sending it every record. It writes nothing itself: the
coordinator (shard 0) judges the steps and writes records-shard-K.jsonl.

headroom run --shards N starts its N-1 shards itself on loopback; start
them by hand (or on other machines) with sweep.shard.listen and
sweep.shard.coordinator set. In a Kubernetes Indexed Job every pod runs
headroom run, and JOB_COMPLETION_INDEX says which shard it is.`,
		Example: `  headroom shard --coordinator http://10.0.0.5:7070 --index 2`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if coordinator == "" || index < 1 {
				return fmt.Errorf("shard needs --coordinator URL and --index K (1 or more: 0 is the coordinator)")
			}
			return rig.RunShard(cmd.Context(), coordinator, index, stderr)
		},
	}
	cmd.Flags().StringVar(&coordinator, "coordinator", "", "the coordinator's `URL` (shard 0's sweep.shard.listen)")
	cmd.Flags().IntVar(&index, "index", 0, "this shard's number `K`, 1 to N-1")
	return cmd
}
