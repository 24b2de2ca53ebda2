package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
)

// Every failure path of pre-flight (refused, 401, 404, wrong model, a TLS
// error, a timeout) with every kind of secret the run holds (a URL's user
// and password, a bearer key and a header value from the environment),
// against a server that echoes what it was sent: no secret reaches the
// progress lines, the returned error, the summary the caller prints, or
// any file of the run directory.
func TestNoSecretOnAnyFailurePath(t *testing.T) {
	const (
		user, password = "alice-user", "pw-s3cret-9"
		key, header    = "sk-key-s3cret-7", "hdr-s3cret-5"
	)
	t.Setenv("HEADROOM_TEST_KEY", key)
	t.Setenv("HEADROOM_TEST_HEADER", header)
	echo := func(status int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error": "refused %s with %q and %q"}`, r.URL, r.Header.Get("Authorization"), r.Header.Get("X-Team-Key"))
		}
	}
	unauthorized := httptest.NewServer(echo(http.StatusUnauthorized))
	defer unauthorized.Close()
	notFound := httptest.NewServer(echo(http.StatusNotFound))
	defer notFound.Close()
	otherModel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object": "list", "data": [{"id": "other %s %s", "object": "model"}]}`, r.Header.Get("Authorization"), r.Header.Get("X-Team-Key"))
	}))
	defer otherModel.Close()
	tlsServer := httptest.NewUnstartedServer(echo(http.StatusOK)) // a certificate no one trusts
	tlsServer.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsServer.StartTLS()
	defer tlsServer.Close()
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(hang)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	withUser := func(u string) string {
		return strings.Replace(u, "://", "://"+user+":"+password+"@", 1)
	}
	cases := []struct{ name, url string }{
		{"refused", refused},
		{"401", unauthorized.URL},
		{"404", notFound.URL},
		{"wrong model", otherModel.URL},
		{"TLS error", tlsServer.URL},
		{"timeout", hanging.URL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Recipe.Endpoint = withUser(c.url)
			cfg.Recipe.Metrics = []string{withUser(c.url) + "/metrics"}
			cfg.Recipe.APIKeyEnv = "HEADROOM_TEST_KEY"
			cfg.Recipe.Headers = map[string]string{"X-Team-Key": "${HEADROOM_TEST_HEADER}"}
			cfg.TimeScale = 1
			cfg.Sweep.ReadyTimeoutS = 1
			cfg.Evals.Suites = nil
			cfg.Workload.SynthSessions = 8
			cfg.Output = t.TempDir()
			var progress bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sum, err := Run(ctx, Options{Config: cfg, Progress: &progress})
			if err == nil {
				t.Fatal("the run against a broken endpoint did not fail")
			}
			js, _ := json.Marshal(sum)
			texts := map[string]string{"progress": progress.String(), "error": err.Error(), "summary": string(js)}
			filepath.Walk(cfg.Output, func(path string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					b, _ := os.ReadFile(path)
					texts[path] = string(b)
				}
				return nil
			})
			t.Logf("error: %v", err)
			for where, text := range texts {
				for _, secret := range []string{password, user, key, header} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds the secret %q:\n%s", where, secret, text)
					}
				}
			}
		})
	}
}
