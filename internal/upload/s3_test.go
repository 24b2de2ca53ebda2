package upload

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeS3 is a loopback stand-in for an S3-compatible server: it takes
// path-style PUT Object requests, checks each one's AWS Signature Version 4
// from the canonical request up (written from AWS's description of SigV4,
// not from the SDK's signer) and the payload hash against the body, and
// keeps the objects in memory. With sessionToken set (temporary
// credentials), each request must carry it, signed, in X-Amz-Security-Token;
// without, it must carry none.
type fakeS3 struct {
	accessKey, secretKey, region string
	sessionToken                 string

	mu      sync.Mutex
	objects map[string]object // "bucket/key"
	order   []string          // keys in the order they were put
	refused []string          // why requests were refused
}

type object struct {
	body        []byte
	contentType string
}

func newFakeS3(t *testing.T) (*fakeS3, *httptest.Server) {
	f := &fakeS3{accessKey: "AKIDHEADROOMTEST", secretKey: "s3cr3t/key+for/the+stand-in", region: "eu-test-1", objects: map[string]object{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodPut {
		f.refuse(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not PUT")
		return
	}
	if err := f.verify(r, body); err != nil {
		f.refuse(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	if !strings.Contains(p, "/") {
		f.refuse(w, http.StatusBadRequest, "InvalidRequest", "no key in path "+r.URL.Path)
		return
	}
	f.mu.Lock()
	f.objects[p] = object{body: body, contentType: r.Header.Get("Content-Type")}
	f.order = append(f.order, p)
	f.mu.Unlock()
	sum := sha256.Sum256(body)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeS3) refuse(w http.ResponseWriter, status int, code, msg string) {
	f.mu.Lock()
	f.refused = append(f.refused, code+": "+msg)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}

// verify checks the request's SigV4 Authorization header.
func (f *fakeS3) verify(r *http.Request, body []byte) error {
	const algo = "AWS4-HMAC-SHA256"
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, algo+" ") {
		return fmt.Errorf("authorization %q is not %s", auth, algo)
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(auth, algo+" "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	if len(cred) != 5 || cred[4] != "aws4_request" || cred[3] != "s3" {
		return fmt.Errorf("credential scope %q", fields["Credential"])
	}
	if cred[0] != f.accessKey {
		return fmt.Errorf("unknown access key %q", cred[0])
	}
	if cred[2] != f.region {
		return fmt.Errorf("signed for region %q, the bucket is in %q", cred[2], f.region)
	}
	amzDate := r.Header.Get("X-Amz-Date")
	when, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, cred[1]) {
		return fmt.Errorf("x-amz-date %q does not match the scope's date %q", amzDate, cred[1])
	}
	if d := time.Since(when); d > 15*time.Minute || d < -15*time.Minute {
		return fmt.Errorf("request time %s too far from now", amzDate)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case payload == "UNSIGNED-PAYLOAD":
	case strings.HasPrefix(payload, "STREAMING-"):
		return fmt.Errorf("streaming payload %s: the uploader must send a plain signed body", payload)
	default:
		sum := sha256.Sum256(body)
		if payload != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("x-amz-content-sha256 %q is not the body's hash", payload)
		}
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	must := []string{"host", "x-amz-date", "x-amz-content-sha256"}
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != f.sessionToken {
		return fmt.Errorf("x-amz-security-token %q, the credentials' session token is %q", tok, f.sessionToken)
	} else if tok != "" {
		must = append(must, "x-amz-security-token")
	}
	for _, must := range must {
		if !slices.Contains(signed, must) {
			return fmt.Errorf("header %s is not signed (signed: %v)", must, signed)
		}
	}
	if !sort.StringsAreSorted(signed) {
		return fmt.Errorf("signed headers not sorted: %v", signed)
	}
	var canon strings.Builder
	canon.WriteString(r.Method + "\n")
	canon.WriteString(r.URL.EscapedPath() + "\n")
	canon.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, h := range signed {
		canon.WriteString(h + ":" + headerValue(r, h) + "\n")
	}
	canon.WriteString("\n" + fields["SignedHeaders"] + "\n" + payload)
	hashed := sha256.Sum256([]byte(canon.String()))
	scope := strings.Join(cred[1:], "/")
	toSign := algo + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	key := []byte("AWS4" + f.secretKey)
	for _, part := range cred[1:] {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return fmt.Errorf("signature does not match the canonical request:\n%s", canon.String())
	}
	return nil
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// canonicalQuery sorts the query by key then value, each escaped as
// RFC 3986 says (space as %20).
func canonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, rfc3986(k)+"="+rfc3986(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

func rfc3986(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// headerValue is a signed header's canonical value: trimmed, inner runs of
// spaces folded; the server keeps Host and Content-Length out of Header.
func headerValue(r *http.Request, h string) string {
	var v string
	switch h {
	case "host":
		v = r.Host
	case "content-length":
		v = strconv.FormatInt(r.ContentLength, 10)
	default:
		v = strings.Join(r.Header.Values(h), ",")
	}
	return strings.Join(strings.Fields(v), " ")
}

// runDir makes root/<recipe>/<run> with a few files, a temporary file an
// interrupted atomic write left, and summary.json.
func runDir(t *testing.T, root, recipe, run string) string {
	t.Helper()
	d := filepath.Join(root, recipe, run)
	files := map[string]string{
		"config.yaml":      "version: 1\n",
		"records.jsonl":    `{"v":1,"lane":0}` + "\n",
		"steps.jsonl":      `{"index":0}` + "\n",
		"report.html":      "<html></html>\n",
		"charts/ttft.svg":  "<svg/>\n",
		"summary.json":     `{"version":1}` + "\n",
		".summary.json.42": "half written",
	}
	for name, body := range files {
		p := filepath.Join(d, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestUploadSignsAndPutsEveryFile(t *testing.T) {
	f, srv := newFakeS3(t)
	dir := runDir(t, t.TempDir(), "recipe-0-vllm", "20261129T093000Z")
	s := S3{Endpoint: srv.URL, Bucket: "bench", Prefix: "/headroom/runs/", Region: f.region, AccessKeyEnv: "HR_AK", SecretKeyEnv: "HR_SK"}
	if err := s.Validate("report.upload.s3"); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("a prefix starting with / validated: %v", err)
	}
	s.Prefix = "headroom/runs/"
	if err := s.Validate("report.upload.s3"); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HR_AK": f.accessKey, "HR_SK": f.secretKey}
	res, err := s.Upload(context.Background(), dir, RunName(dir), func(k string) string { return env[k] }, srv.Client())
	if err != nil {
		t.Fatalf("upload: %v (stand-in refused: %v)", err, f.refused)
	}
	want := []string{"charts/ttft.svg", "config.yaml", "records.jsonl", "report.html", "steps.jsonl", "summary.json"}
	if res.Files != len(want) || res.URL != "s3://bench/headroom/runs/recipe-0-vllm/20261129T093000Z/" {
		t.Errorf("result %+v, want %d files at s3://bench/headroom/runs/recipe-0-vllm/20261129T093000Z/", res, len(want))
	}
	var got []string
	for _, k := range f.order {
		got = append(got, strings.TrimPrefix(k, "bench/headroom/runs/recipe-0-vllm/20261129T093000Z/"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("objects put in order %v, want %v (summary.json last, no temporary file)", got, want)
	}
	for _, name := range want {
		b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		o := f.objects["bench/headroom/runs/recipe-0-vllm/20261129T093000Z/"+name]
		if string(o.body) != string(b) {
			t.Errorf("%s: object %q, file %q", name, o.body, b)
		}
		if name == "summary.json" && o.contentType != "application/json" {
			t.Errorf("summary.json content type %q", o.contentType)
		}
	}
}

func TestUploadRefusals(t *testing.T) {
	isolateAWS(t)
	f, srv := newFakeS3(t)
	dir := runDir(t, t.TempDir(), "r", "20260101T000000Z")
	s := S3{Endpoint: srv.URL, Bucket: "bench", Region: f.region}

	// No keys in the environment, nor anywhere the SDK's chain looks:
	// nothing is sent, and the error says which variables to set.
	_, err := s.Upload(context.Background(), dir, RunName(dir), func(string) string { return "" }, srv.Client())
	if err == nil || !strings.Contains(err.Error(), "no key pair in $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY") {
		t.Errorf("no keys: %v", err)
	}
	if len(f.order)+len(f.refused) != 0 {
		t.Errorf("requests were sent without keys: %v %v", f.order, f.refused)
	}

	// A wrong secret: the stand-in refuses the signature and the error
	// names the file and the server's code.
	env := map[string]string{"AWS_ACCESS_KEY_ID": f.accessKey, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
	_, err = s.Upload(context.Background(), dir, RunName(dir), func(k string) string { return env[k] }, srv.Client())
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") || !strings.Contains(err.Error(), "s3://bench/r/20260101T000000Z/") {
		t.Errorf("wrong secret: %v", err)
	}
	if len(f.order) != 0 {
		t.Errorf("objects stored with a bad signature: %v", f.order)
	}
	if strings.Contains(fmt.Sprint(err), "not-the-secret") {
		t.Error("the error holds the secret")
	}

	// The right key but the wrong region: refused too.
	env["AWS_SECRET_ACCESS_KEY"] = f.secretKey
	s.Region = "us-east-1"
	if _, err = s.Upload(context.Background(), dir, RunName(dir), func(k string) string { return env[k] }, srv.Client()); err == nil {
		t.Error("a request signed for another region was stored")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		s    S3
		err  string // substring; "" for valid
	}{
		// The smallest valid target: a bucket on AWS.
		{"bucket only", S3{Bucket: "b"}, ""},
		{"minio", S3{Endpoint: "http://minio.storage:9000", Bucket: "runs", Prefix: "headroom"}, ""},
		{"no bucket", S3{}, "report.upload.s3.bucket: is empty"},
		{"bucket with a folder", S3{Bucket: "b/runs"}, "put folders in prefix"},
		{"endpoint not a URL", S3{Bucket: "b", Endpoint: "minio:9000"}, "not an http(s) URL"},
		{"endpoint with keys", S3{Bucket: "b", Endpoint: "http://ak:sk@minio:9000"}, "user info"},
		{"endpoint with a path", S3{Bucket: "b", Endpoint: "http://minio:9000/runs"}, "has a path"},
		{"prefix escapes", S3{Bucket: "b", Prefix: "../x"}, "relative key prefix"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Config{S3: &c.s}.Validate("report.upload")
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
	if (Config{}).Enabled() || (Config{}).Validate("report.upload") != nil {
		t.Error("the zero config uploads or fails")
	}
}
