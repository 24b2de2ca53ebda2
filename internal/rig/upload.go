package rig

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/headroom-bench/headroom/internal/report"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/upload"
)

// UploadRun copies the finished run directory of sum to the run file's
// report.upload target, when it names one, and writes upload.json beside
// the files saying where they went or why they did not. It runs even when
// ctx is done (an interrupted run's partial report is still worth keeping),
// bounded by the target's own timeout. A failed upload never fails the
// run: it is added to sum.Warnings and told on progress (which may be nil).
func UploadRun(ctx context.Context, target upload.Config, sum *report.Summary, environ func(string) string, progress io.Writer) {
	if !target.Enabled() || sum == nil || sum.RunDir == "" {
		return
	}
	if progress == nil {
		progress = io.Discard
	}
	// the key pair and session token never reach a file or the terminal
	red := new(transport.Redactor)
	for _, name := range target.S3.SecretEnvs() {
		red.Add(environ(name))
	}
	start := time.Now()
	res, err := target.S3.Upload(context.WithoutCancel(ctx), sum.RunDir, upload.RunName(sum.RunDir), environ, nil)
	rec := uploadRecord{URL: res.URL, Files: res.Files, Bytes: res.Bytes, Credentials: res.Credentials, TookS: time.Since(start).Seconds()}
	if err != nil {
		rec.Error = red.String(err.Error())
		w := fmt.Sprintf("report.upload: the run directory was not uploaded to %s: %s", res.URL, rec.Error)
		sum.Warnings = append(sum.Warnings, w)
		fmt.Fprintln(progress, w)
	} else {
		fmt.Fprintf(progress, "uploaded %d files (%d bytes) to %s\n", res.Files, res.Bytes, res.URL)
	}
	if d, derr := report.OpenDir(sum.RunDir); derr == nil {
		d.Redact(red)
		if werr := d.WriteJSON("upload.json", rec); werr != nil {
			fmt.Fprintf(progress, "report.upload: could not write upload.json: %v\n", werr)
		}
	}
}

// uploadRecord is upload.json: what the upload at the end of the run did,
// and where its credentials came from (the variables, or the SDK's
// provider: WebIdentityCredentials, EC2RoleProvider...).
type uploadRecord struct {
	URL         string  `json:"url"`
	Files       int     `json:"files"`
	Bytes       int64   `json:"bytes"`
	Credentials string  `json:"credentials,omitempty"`
	TookS       float64 `json:"took_s"`
	Error       string  `json:"error,omitempty"`
}

func orEnv(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
