package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/headroom-bench/headroom/internal/upload"
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
		Use:   "list",
		Short: "List the run directories under a folder, newest first",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			runs, err := upload.ListRuns(root)
			if err != nil {
				return err
			}
			if asJSON {
				if runs == nil {
					runs = []upload.Run{}
				}
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tFINISHED\tFILES\tSIZE\tMODIFIED")
			for _, r := range runs {
				fin := "yes"
				if !r.Finished {
					fin = "no (no summary.json)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Name, fin, r.Files, size(r.Bytes), r.Modified.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	c.Flags().StringVar(&root, "root", "runs", "the folder run directories are written under (the run file's output)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return c
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
