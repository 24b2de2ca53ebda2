package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/upload"
	"github.com/headroom-bench/headroom/internal/verdict"
	"github.com/spf13/cobra"
)

func runsCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "runs",
		Short: "List, pack, serve, pull and upload run directories",
		Long: `Run directories are written under the run file's output folder, one per
run: <output>/<recipe>/<time>/. These commands get them off the machine
that ran them, with nothing but this binary (the container image has no
shell and no tar).

In Kubernetes, with the run directories on a PersistentVolumeClaim
(see docs/kubernetes.md), start a reader pod that mounts the claim and runs
'headroom runs serve', then either

  kubectl -n headroom exec headroom-runs -- headroom runs pack --root /work/runs > runs.tar.gz

or

  kubectl -n headroom port-forward pod/headroom-runs 8080 &
  headroom runs pull http://127.0.0.1:8080 --to runs

Runs are named recipe/time, as 'headroom runs list' shows them.`,
	}
	c.AddCommand(runsListCmd(stdout), runsPackCmd(stdout), runsServeCmd(stderr), runsPullCmd(stdout), runsUploadCmd(stdout))
	return c
}

func runsListCmd(stdout io.Writer) *cobra.Command {
	var root string
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [DIR]",
		Short: "List the run directories under a folder, newest first, with each run's capacity and verdict",
		Long: `List the run directories under DIR (or --root; default runs), newest
first: each run's name (recipe/time), whether it finished (wrote
summary.json), its capacity, its verdict on the target (pass, fail, too
close to call, no data; "no target" when the run file set none, "rig error"
when the run ended in one), and its files.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if cmd.Flags().Changed("root") && args[0] != root {
					return fmt.Errorf("runs list: give the folder once, as DIR (%s) or as --root (%s)", args[0], root)
				}
				root = args[0]
			}
			runs, err := upload.ListRuns(root)
			if err != nil {
				return err
			}
			listed := make([]listedRun, len(runs))
			for i, r := range runs {
				listed[i] = readListedRun(root, r)
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // ">= 2" reads as written
				return enc.Encode(listed)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tFINISHED\tCAPACITY\tVERDICT\tFILES\tSIZE\tMODIFIED")
			for _, r := range listed {
				fin := "yes"
				if !r.Finished {
					fin = "no (no summary.json)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, fin, dashIfEmpty(r.capacityCell), dashIfEmpty(r.verdictCell), r.Files, size(r.Bytes), r.Modified.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&root, "root", "runs", "the folder run directories are written under (the run file's output); DIR says it too")
	c.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return c
}

// listedRun is one line of 'runs list': the directory, and what its
// summary.json says.
type listedRun struct {
	upload.Run
	// Capacity is the summary's capacity line; empty for a run that did
	// not finish.
	Capacity string `json:"capacity,omitempty"`
	// CapacitySessions is the capacity's sessions (0 when not
	// established), Target the target's sessions (0 when none was set).
	CapacitySessions float64 `json:"capacity_sessions,omitempty"`
	Target           int     `json:"target,omitempty"`
	// Verdict is the target's verdict (pass, fail, too_close, no_data),
	// no_target or rig_error; empty for a run that did not finish.
	Verdict string `json:"verdict,omitempty"`
	// Error is why summary.json could not be read, or the run's rig error.
	Error string `json:"error,omitempty"`

	capacityCell, verdictCell string
}

// readListedRun reads the capacity and the verdict from r's summary.json.
func readListedRun(root string, r upload.Run) listedRun {
	out := listedRun{Run: r}
	if !r.Finished {
		return out
	}
	path := filepath.Join(root, filepath.FromSlash(r.Name), "summary.json")
	b, err := os.ReadFile(path)
	var s report.Summary
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		out.Error = fmt.Sprintf("%s: %v", path, err)
		out.capacityCell, out.verdictCell = "unreadable summary.json", "-"
		return out
	}
	c := s.Capacity
	out.Capacity, out.CapacitySessions = c.String(), c.Sessions
	switch {
	case len(s.Steps) == 0:
		out.Capacity, out.capacityCell = "not measured (no step was judged)", "not measured"
	case c.AtLeast:
		out.capacityCell = fmt.Sprintf(">= %g", c.Sessions)
	case c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data"):
		out.capacityCell = "no data"
	case c.BelowFirst || c.NotEstablished:
		out.capacityCell = "not established"
	default:
		hi := strconv.FormatFloat(c.Hi, 'f', 1, 64)
		if c.HiOpen {
			hi = ">=" + hi
		}
		out.capacityCell = fmt.Sprintf("%.1f (%.1f-%s)", c.Sessions, c.Lo, hi)
	}
	switch {
	case s.Error != "":
		out.Verdict, out.Error, out.verdictCell = "rig_error", s.Error, "rig error"
	case s.Target == nil:
		out.Verdict, out.verdictCell = "no_target", "no target"
	default:
		out.Target, out.Verdict = s.Target.Sessions, string(s.Target.Verdict)
		words := map[verdict.Verdict]string{verdict.TooClose: "too close to call", verdict.NoData: "no data"}[s.Target.Verdict]
		if words == "" {
			words = string(s.Target.Verdict)
		}
		out.verdictCell = fmt.Sprintf("%s at %d sessions", words, s.Target.Sessions)
	}
	return out
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// runNames turns the arguments (recipe/time names under root, or paths of
// run directories under root, such as runs/recipe/time) into names.
func runNames(root string, args []string) ([]string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = filepath.ToSlash(a)
		if _, err := os.Stat(filepath.Join(root, a, "config.yaml")); err == nil {
			continue // a name under root
		}
		if _, err := os.Stat(filepath.Join(a, "config.yaml")); err != nil {
			continue // not a run directory: Pack says so
		}
		abs, err := filepath.Abs(a)
		if err != nil {
			return nil, err
		}
		names[i] = upload.RunName(abs)
		if filepath.Join(absRoot, filepath.FromSlash(names[i])) != abs {
			return nil, fmt.Errorf("%s is not a run directory under --root %s: give --root the folder two levels above it", a, root)
		}
	}
	return names, nil
}

func runsPackCmd(stdout io.Writer) *cobra.Command {
	var root, out string
	c := &cobra.Command{
		Use:   "pack [RUN...]",
		Short: "Write run directories as one tar.gz (to stdout by default)",
		Long: `Pack writes the named runs (recipe/time, or their paths under --root; none:
every run) as one tar.gz whose entries are recipe/time/file. Any tar reads
it; 'headroom runs pull' and 'tar xzf' unpack it. A run still being written
is packed as it is at that moment.`,
		Example: `  headroom runs pack > runs.tar.gz
  headroom runs pack recipe-0-vllm/20261129T093000Z -o run.tar.gz
  kubectl -n headroom exec headroom-runs -- headroom runs pack --root /work/runs > runs.tar.gz`,
		RunE: func(_ *cobra.Command, args []string) error {
			names, err := runNames(root, args)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				return upload.Pack(stdout, root, names)
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := upload.Pack(f, root, names); err != nil {
				f.Close()
				os.Remove(out)
				return err
			}
			return f.Close()
		},
	}
	c.Flags().StringVar(&root, "root", "runs", "the folder run directories are written under (the run file's output)")
	c.Flags().StringVarP(&out, "output", "o", "", "write the tar.gz to this file instead of stdout")
	return c
}

func runsServeCmd(stderr io.Writer) *cobra.Command {
	var root, addr string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve run directories read-only over HTTP, for 'runs pull'",
		Long: `Serve lists the runs under --root at GET /v1/runs and packs them at
GET /v1/pack?run=recipe/time (no run: all), until interrupted. It writes
nothing. Run it in a pod that mounts the runs volume, then port-forward to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := upload.ListRuns(root); err != nil {
				return err
			}
			return upload.Serve(cmd.Context(), root, addr, func(a string) {
				fmt.Fprintf(stderr, "serving the run directories under %s at http://%s (GET /v1/runs, /v1/pack)\n", root, a)
			})
		},
	}
	c.Flags().StringVar(&root, "root", "runs", "the folder run directories are written under")
	c.Flags().StringVar(&addr, "addr", ":8080", "address to listen on")
	return c
}

func runsPullCmd(stdout io.Writer) *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "pull URL [RUN...]",
		Short: "Copy runs from a 'headroom runs serve' into a local folder",
		Example: `  kubectl -n headroom port-forward pod/headroom-runs 8080 &
  headroom runs pull http://127.0.0.1:8080                      # every run
  headroom runs pull http://127.0.0.1:8080 recipe-0-vllm/20261129T093000Z --to runs`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			got, err := upload.Pull(cmd.Context(), nil, args[0], to, args[1:])
			for _, n := range got {
				fmt.Fprintln(stdout, filepath.Join(to, filepath.FromSlash(n)))
			}
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return errors.New("the server holds no runs")
			}
			return nil
		},
	}
	c.Flags().StringVar(&to, "to", "runs", "the local folder to write the run directories under")
	return c
}

func runsUploadCmd(stdout io.Writer) *cobra.Command {
	var s upload.S3
	c := &cobra.Command{
		Use:   "upload RUN_DIR...",
		Short: "Copy run directories to an S3-compatible bucket",
		Long: `Upload copies each run directory to s3://BUCKET/PREFIX/recipe/time/, as a run
whose run file has report.upload does when it ends. A key pair is read
from the variables --access-key-env and --secret-key-env name; without those
flags, from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (with
$AWS_SESSION_TOKEN) or, when they are empty, the AWS SDK's default credential
chain: a profile ($AWS_PROFILE), web identity (IRSA), a container's or the
instance's role.`,
		Example: `  headroom runs upload runs/recipe-0-vllm/20261129T093000Z --endpoint http://minio.storage:9000 --bucket bench --prefix headroom`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := s.Validate("upload"); err != nil {
				return err
			}
			for _, dir := range args {
				res, err := s.Upload(cmd.Context(), dir, upload.RunName(dir), os.Getenv, nil)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s: %d files (%s) to %s\n", dir, res.Files, size(res.Bytes), res.URL)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&s.Endpoint, "endpoint", "", "the S3 service URL (empty: AWS for --region)")
	f.StringVar(&s.Bucket, "bucket", "", "the bucket")
	f.StringVar(&s.Prefix, "prefix", "", "a key prefix before recipe/time/")
	f.StringVar(&s.Region, "region", "", "the region requests are signed for (default us-east-1)")
	f.StringVar(&s.AccessKeyEnv, "access-key-env", "", "the variable holding the access key (default AWS_ACCESS_KEY_ID)")
	f.StringVar(&s.SecretKeyEnv, "secret-key-env", "", "the variable holding the secret key (default AWS_SECRET_ACCESS_KEY)")
	f.BoolVar(&s.VirtualHosted, "virtual-hosted", false, "address the bucket as BUCKET.host instead of host/BUCKET")
	return c
}
