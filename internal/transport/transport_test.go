package transport

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) Env {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// A server that checks what it is sent, over TLS signed by its own CA.
func TestConnSendsCredentialsOverTLS(t *testing.T) {
	var got http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	a := Auth{BearerTokenEnv: "TOK", Headers: map[string]string{"X-Team": "team-${TEAM}", "X-Plain": "fixed-value"}, TLS: &TLS{CAFile: "ca.pem"}}
	c, err := a.Resolve("recipe", env(map[string]string{"TOK": "sk-secret-123", "TEAM": "blue42"}), dir)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Client(0).Get(srv.URL)
	if err != nil {
		t.Fatalf("TLS with the server's CA from ca_file: %v", err)
	}
	resp.Body.Close()
	if got.Get("Authorization") != "Bearer sk-secret-123" || got.Get("X-Team") != "team-blue42" || got.Get("X-Plain") != "fixed-value" {
		t.Fatalf("headers sent: %v", got)
	}
	for _, want := range []string{"sk-secret-123", "team-blue42", "blue42", "fixed-value"} {
		found := false
		for _, s := range c.Secrets {
			found = found || s == want
		}
		if !found {
			t.Errorf("%q is not listed as a secret: %v", want, c.Secrets)
		}
	}
	// Without the CA the same server is refused.
	if _, err := (Conn{}).Client(0).Get(srv.URL); err == nil {
		t.Fatal("a self-signed server was accepted without its CA")
	}
	// insecure_skip_verify accepts it.
	c2, err := Auth{TLS: &TLS{InsecureSkipVerify: true}}.Resolve("recipe", env(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c2.Client(0).Get(srv.URL); err != nil {
		t.Fatalf("insecure_skip_verify: %v", err)
	} else {
		resp.Body.Close()
	}
}

func TestBasicAuthAndMissingEnv(t *testing.T) {
	c, err := Auth{BasicAuth: &BasicAuth{Username: "prom", PasswordEnv: "PW"}}.Resolve("recipe.prometheus", env(map[string]string{"PW": "hunter22"}), "")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.Header = c.Header
	if u, p, ok := req.BasicAuth(); !ok || u != "prom" || p != "hunter22" {
		t.Fatalf("basic auth: %q %q %v", u, p, ok)
	}
	_, err = Auth{BearerTokenEnv: "NOPE", Headers: map[string]string{"X-K": "${ALSO_NOPE}"}}.Resolve("recipe.metrics_auth", env(nil), "")
	if err == nil {
		t.Fatal("unset variables resolved")
	}
	for _, want := range []string{"recipe.metrics_auth.bearer_token_env: the environment variable NOPE is not set", "recipe.metrics_auth.headers.X-K: the environment variable ALSO_NOPE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestCheckNamesEachBadField(t *testing.T) {
	errs := Auth{BearerTokenEnv: "sk-abc-123", BasicAuth: &BasicAuth{PasswordEnv: "x y"}, Headers: map[string]string{"Bad Name": "v", "X-Ok": "${1BAD}"}, TLS: &TLS{CertFile: "c.pem"}}.Check("recipe.prometheus")
	joined := strings.Join(errs, "\n")
	for _, want := range []string{"recipe.prometheus.bearer_token_env", "basic_auth.username", "basic_auth.password_env", "both set", `"Bad Name" is not an HTTP header name`, "${1BAD}", "cert_file and key_file"} {
		if !strings.Contains(joined, want) {
			t.Errorf("checks lack %q:\n%s", want, joined)
		}
	}
}

func TestURLRedaction(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:pa55word@gw.example:8443/v1", "https://redacted@gw.example:8443/v1"},
		{"http://127.0.0.1:8000", "http://127.0.0.1:8000"},
		{"https://hooks.example/x?token=abc&channel=ops", "https://hooks.example/x?channel=ops&token=[redacted]"},
		{"dial tcp: Post \"http://bob:s3cr3t@10.0.0.1/v1\": refused", "dial tcp: Post \"http://redacted@10.0.0.1/v1\": refused"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactorRemovesSecretsFromText(t *testing.T) {
	var r Redactor
	r.Add("sk-live-abcdef", "ab") // too short to redact
	r.AddURL("https://alice:pw%2Fwith-slash@host/")
	in := `{"detail":"bad key sk-live-abcdef","url":"https://alice:pw%2Fwith-slash@host/","x":"ab"}`
	out := r.String(in)
	for _, leak := range []string{"sk-live-abcdef", "pw%2Fwith-slash", "pw/with-slash", "alice"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q survives in %s", leak, out)
		}
	}
	if !strings.Contains(out, `"x":"ab"`) {
		t.Errorf("short values were redacted: %s", out)
	}
	var buf bytes.Buffer
	w := r.Writer(&buf)
	if _, err := w.Write([]byte("key sk-live-abcdef\n")); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "key [redacted]\n" {
		t.Errorf("writer: %q", buf.String())
	}
	clean := []byte("nothing to hide")
	if got := r.Bytes(clean); &got[0] != &clean[0] {
		t.Error("clean bytes were copied")
	}
}
