// Package upload moves finished run directories off the machine that made
// them: to an S3-compatible bucket (report.upload in the run file), or packed
// as one tar.gz stream that `headroom runs` serves, pulls and unpacks, so a
// run inside a distroless pod can still be read after the pod is gone.
package upload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Config is the run file's report.upload: where a finished run directory
// is copied. The zero value uploads nothing.
type Config struct {
	S3 *S3 `json:"s3,omitempty"`
}

// Enabled says whether the config names a target.
func (c Config) Enabled() bool { return c.S3 != nil }

// Validate checks the config; field is its name in the run file
// ("report.upload"), used in the errors.
func (c Config) Validate(field string) error {
	if c.S3 == nil {
		return nil
	}
	return c.S3.Validate(field + ".s3")
}

// S3 is an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, R2, GCS's XML
// API). Objects are named <prefix>/<recipe>/<run>/<file>. The keys are never
// in the run file: a key pair is read from the environment variables named
// here, or, without one, the SDK's default credential chain finds
// credentials (a profile, web identity, a container's or instance's role).
type S3 struct {
	// Endpoint is the service URL (http://minio.storage:9000); empty means
	// AWS's endpoint for Region.
	Endpoint string `json:"endpoint,omitempty"`
	Bucket   string `json:"bucket"`
	// Prefix goes before every key ("headroom/runs"); empty for none.
	Prefix string `json:"prefix,omitempty"`
	// Region signs the requests; default us-east-1 (what MinIO expects).
	Region string `json:"region,omitempty"`
	// AccessKeyEnv and SecretKeyEnv name the variables holding the key
	// pair; default AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
	// AWS_SESSION_TOKEN when set), and when those are empty, the SDK's
	// default credential chain. Named here, the pair must be there.
	AccessKeyEnv string `json:"access_key_env,omitempty"`
	SecretKeyEnv string `json:"secret_key_env,omitempty"`
	// SessionTokenEnv names a variable with a session token (temporary
	// credentials) that must be set; empty for none (or AWS_SESSION_TOKEN
	// with the default pair).
	SessionTokenEnv string `json:"session_token_env,omitempty"`
	// VirtualHosted addresses the bucket as bucket.host instead of
	// host/bucket (path style, the default, which S3-compatible servers take).
	VirtualHosted bool `json:"virtual_hosted,omitempty"`
	// TimeoutS bounds the whole upload; default 600.
	TimeoutS float64 `json:"timeout_s,omitempty"`
}

// Defaults for the fields left empty.
const (
	DefaultRegion       = "us-east-1"
	DefaultAccessKeyEnv = "AWS_ACCESS_KEY_ID"
	DefaultSecretKeyEnv = "AWS_SECRET_ACCESS_KEY"
	DefaultTimeout      = 10 * time.Minute
)

// Validate checks the fields that need no environment; field names the
// section in errors.
func (s S3) Validate(field string) error {
	var errs []error
	bad := func(f, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", field, f, fmt.Sprintf(format, args...)))
	}
	if s.Bucket == "" {
		bad("bucket", "is empty: name the bucket the run directories go to")
	} else if strings.ContainsAny(s.Bucket, "/ ") {
		bad("bucket", "%q is not a bucket name (no slashes or spaces; put folders in prefix)", s.Bucket)
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		switch {
		case err != nil:
			bad("endpoint", "%v", err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			bad("endpoint", "%q is not an http(s) URL such as https://s3.eu-west-1.amazonaws.com or http://minio.storage:9000", s.Endpoint)
		case u.User != nil:
			bad("endpoint", "holds user info: put the keys in the environment variables access_key_env and secret_key_env name")
		case u.Path != "" && u.Path != "/":
			bad("endpoint", "%q has a path: give the service URL alone and the folder in prefix", s.Endpoint)
		}
	}
	if strings.HasPrefix(s.Prefix, "/") || strings.Contains(s.Prefix, "..") {
		bad("prefix", "%q must be a relative key prefix such as headroom/runs", s.Prefix)
	}
	if s.TimeoutS < 0 {
		bad("timeout_s", "is negative")
	}
	return errors.Join(errs...)
}

func (s S3) region() string {
	if s.Region == "" {
		return DefaultRegion
	}
	return s.Region
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// Key is the object key of one file of a run directory named name
// ("recipe/run").
func (s S3) Key(name, file string) string {
	return path.Join(strings.Trim(s.Prefix, "/"), name, file)
}

// URL is where the run directory name lands, as s3://bucket/key/.
func (s S3) URL(name string) string {
	return "s3://" + s.Bucket + "/" + s.Key(name, "") + "/"
}

// client builds the S3 client; hc may be nil for the default transport.
func (s S3) client(creds aws.CredentialsProvider, hc *http.Client) *s3.Client {
	o := s3.Options{
		Region:       s.region(),
		Credentials:  creds,
		UsePathStyle: !s.VirtualHosted,
		// S3-compatible servers do not all take the trailing checksums the
		// SDK sends by default; a signed payload hash is enough.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           4,
	}
	if s.Endpoint != "" {
		o.BaseEndpoint = aws.String(strings.TrimSuffix(s.Endpoint, "/"))
	}
	if hc != nil {
		o.HTTPClient = hc
	}
	return s3.New(o)
}

// Result says what an upload copied, and where its credentials came from
// ("$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY", or the name of the SDK's
// provider: WebIdentityCredentials, EC2RoleProvider...).
type Result struct {
	URL         string
	Files       int
	Bytes       int64
	Credentials string
}

// Upload copies every file of the run directory dir to the bucket under
// <prefix>/<name>/, name being "recipe/run"; summary.json goes last, so a
// reader that waits for it finds the rest there. The key pair is read with
// env, else the SDK's default credential chain finds credentials (see
// credentials); they are fetched once before the first file. hc may be nil.
func (s S3) Upload(ctx context.Context, dir, name string, env func(string) string, hc *http.Client) (Result, error) {
	res := Result{URL: s.URL(name)}
	files, err := runFiles(dir)
	if err != nil {
		return res, err
	}
	timeout := DefaultTimeout
	if s.TimeoutS > 0 {
		timeout = time.Duration(s.TimeoutS * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	provider, err := s.credentials(ctx, env)
	if err != nil {
		return res, err
	}
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		return res, err
	}
	res.Credentials = creds.Source
	c := s.client(provider, hc)
	for _, f := range files {
		n, err := s.put(ctx, c, filepath.Join(dir, filepath.FromSlash(f)), s.Key(name, f))
		if err != nil {
			return res, err
		}
		res.Files++
		res.Bytes += n
	}
	return res, nil
}

func (s S3) put(ctx context.Context, c *s3.Client, file, key string) (int64, error) {
	fh, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.Bucket),
		Key:           aws.String(key),
		Body:          fh,
		ContentLength: aws.Int64(st.Size()),
		ContentType:   aws.String(contentType(key)),
	})
	if err != nil {
		return 0, fmt.Errorf("upload %s to s3://%s/%s: %w", file, s.Bucket, key, err)
	}
	return st.Size(), nil
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".json":
		return "application/json"
	case ".jsonl":
		return "application/x-ndjson"
	case ".html":
		return "text/html; charset=utf-8"
	case ".md":
		return "text/markdown; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".xml":
		return "application/xml"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".csv":
		return "text/csv; charset=utf-8"
	}
	return "application/octet-stream"
}

// runFiles lists the files of a run directory, relative and slash-separated,
// sorted with summary.json last; half-written temporary files (".name.*"
// from an atomic write) and anything that is not a regular file are left out.
func runFiles(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a run directory", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(files, func(i, j int) bool {
		if si, sj := files[i] == "summary.json", files[j] == "summary.json"; si != sj {
			return sj
		}
		return files[i] < files[j]
	})
	return files, nil
}
