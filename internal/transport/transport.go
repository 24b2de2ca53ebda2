// Package transport says how headroom reaches a server that is not ours:
// the TLS to use and the credentials to send (a bearer key, basic auth,
// extra headers), read from the environment when the run starts and kept in
// memory only. Its Redactor keeps every one of them, and any URL's user
// info, out of what headroom writes.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// TLS is how a server's certificate is checked.
type TLS struct {
	// CAFile is a PEM bundle of the authorities that sign the server's
	// certificate, added to the system's.
	CAFile string `json:"ca_file,omitempty"`
	// InsecureSkipVerify accepts any certificate: for a test cluster only.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// CertFile and KeyFile are a client certificate for mutual TLS.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// BasicAuth is a user name and the environment variable holding its password.
type BasicAuth struct {
	Username    string `json:"username"`
	PasswordEnv string `json:"password_env"`
}

// Auth is what is sent to one kind of server (the metrics targets, a
// Prometheus server): a bearer token or basic auth from the environment,
// extra headers, and TLS.
type Auth struct {
	// BearerTokenEnv names the environment variable whose value is sent as
	// "Authorization: Bearer <value>".
	BearerTokenEnv string     `json:"bearer_token_env,omitempty"`
	BasicAuth      *BasicAuth `json:"basic_auth,omitempty"`
	// Headers are added to every request; a value may name environment
	// variables as ${NAME}. Values are secrets: they are never written.
	Headers map[string]string `json:"headers,omitempty"`
	TLS     *TLS              `json:"tls,omitempty"`
}

// IsZero reports whether a sends nothing and checks TLS the default way.
func (a Auth) IsZero() bool {
	return a.BearerTokenEnv == "" && a.BasicAuth == nil && len(a.Headers) == 0 && a.TLS == nil
}

// Env looks up an environment variable, as os.LookupEnv does.
type Env func(name string) (string, bool)

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envRef is a ${NAME} reference inside a header value.
var envRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// Check reports every problem with a's fields, each prefixed with field (the
// section's path in the run file, "recipe.prometheus"). It reads nothing
// from the environment.
func (a Auth) Check(field string) []string {
	var errs []string
	bad := func(f, format string, args ...any) {
		errs = append(errs, field+"."+f+": "+fmt.Sprintf(format, args...))
	}
	if a.BearerTokenEnv != "" && !envName.MatchString(a.BearerTokenEnv) {
		bad("bearer_token_env", "%q is not an environment variable name: give the variable's name (HEADROOM_TOKEN), never the token itself", a.BearerTokenEnv)
	}
	if b := a.BasicAuth; b != nil {
		if b.Username == "" {
			bad("basic_auth.username", "is required")
		}
		if !envName.MatchString(b.PasswordEnv) {
			bad("basic_auth.password_env", "%q is not an environment variable name: give the variable's name, never the password itself", b.PasswordEnv)
		}
		if a.BearerTokenEnv != "" {
			bad("basic_auth", "and bearer_token_env are both set: a request carries one Authorization header")
		}
	}
	errs = append(errs, CheckHeaders(field+".headers", a.Headers)...)
	if a.TLS != nil {
		errs = append(errs, a.TLS.Check(field+".tls")...)
	}
	return errs
}

// CheckHeaders reports every problem with a header map: names HTTP allows,
// and well-formed ${NAME} references.
func CheckHeaders(field string, h map[string]string) []string {
	var errs []string
	for _, name := range sortedKeys(h) {
		if !validHeaderName(name) {
			errs = append(errs, fmt.Sprintf("%s: %q is not an HTTP header name", field, name))
		}
		for _, m := range envRef.FindAllStringSubmatch(h[name], -1) {
			if !envName.MatchString(m[1]) {
				errs = append(errs, fmt.Sprintf("%s.%s: ${%s} is not an environment variable reference; write ${NAME}", field, name, m[1]))
			}
		}
	}
	return errs
}

// Check reports problems with t's fields that can be seen without reading
// the files.
func (t TLS) Check(field string) []string {
	var errs []string
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, field+": cert_file and key_file go together (a client certificate and its key)")
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		errs = append(errs, field+": ca_file is ignored with insecure_skip_verify: true; drop one")
	}
	return errs
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// Conn is one server's resolved credentials and TLS: what every request to
// it carries. The zero Conn adds nothing and checks TLS the default way.
type Conn struct {
	// Header is added to every request (Authorization included).
	Header http.Header
	// TLS, when not nil, replaces the default TLS configuration.
	TLS *tls.Config
	// Secrets are the values that must never be written: keys, passwords,
	// header values.
	Secrets []string
	// RoundTripper, when not nil, carries the requests instead of the
	// network (the in-memory simulator of a virtual-clock run); TLS is then
	// unused.
	RoundTripper http.RoundTripper
}

// Resolve reads a's credentials from env and its TLS files (relative paths
// from dir). Each error names the field and says what to do.
func (a Auth) Resolve(field string, env Env, dir string) (Conn, error) {
	var c Conn
	c.Header = http.Header{}
	var errs []error
	if a.BearerTokenEnv != "" {
		v, err := lookup(env, a.BearerTokenEnv, field+".bearer_token_env")
		if err != nil {
			errs = append(errs, err)
		} else {
			c.Header.Set("Authorization", "Bearer "+v)
			c.Secrets = append(c.Secrets, v)
		}
	}
	if b := a.BasicAuth; b != nil {
		v, err := lookup(env, b.PasswordEnv, field+".basic_auth.password_env")
		if err != nil {
			errs = append(errs, err)
		} else {
			enc := base64.StdEncoding.EncodeToString([]byte(b.Username + ":" + v))
			c.Header.Set("Authorization", "Basic "+enc)
			c.Secrets = append(c.Secrets, v, enc)
		}
	}
	for _, name := range sortedKeys(a.Headers) {
		v, secrets, err := expand(a.Headers[name], env, field+".headers."+name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.Header.Set(name, v)
		c.Secrets = append(c.Secrets, v)
		c.Secrets = append(c.Secrets, secrets...)
	}
	if a.TLS != nil {
		cfg, err := a.TLS.config(field+".tls", dir)
		if err != nil {
			errs = append(errs, err)
		}
		c.TLS = cfg
	}
	if err := errors.Join(errs...); err != nil {
		return Conn{}, err
	}
	return c, nil
}

func lookup(env Env, name, field string) (string, error) {
	if env == nil {
		env = os.LookupEnv
	}
	v, ok := env(name)
	if !ok || v == "" {
		return "", fmt.Errorf("%s: the environment variable %s is not set (or empty): export it before the run, e.g. export %s=...", field, name, name)
	}
	return v, nil
}

// expand replaces ${NAME} references in a header value, returning the
// values it read so they can be redacted too.
func expand(v string, env Env, field string) (string, []string, error) {
	var errs []error
	var read []string
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := ref[2 : len(ref)-1]
		val, err := lookup(env, name, field)
		if err != nil {
			errs = append(errs, err)
			return ""
		}
		read = append(read, val)
		return val
	})
	return out, read, errors.Join(errs...)
}

func (t TLS) config(field, dir string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the user asked for it, for a test cluster
	if t.CAFile != "" {
		pem, err := os.ReadFile(rel(dir, t.CAFile))
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", field, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", field, t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(rel(dir, t.CertFile), rel(dir, t.KeyFile))
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file/key_file: %w", field, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Wrap returns a round tripper over a clone of base with c's TLS, adding
// c's headers to every request.
func (c Conn) Wrap(base *http.Transport) http.RoundTripper {
	var t http.RoundTripper = c.RoundTripper
	if t == nil {
		bt := base.Clone()
		if c.TLS != nil {
			bt.TLSClientConfig = c.TLS.Clone()
		}
		t = bt
	}
	if len(c.Header) == 0 {
		return t
	}
	return &headers{next: t, h: c.Header}
}

// Client is an HTTP client that reaches the server the way c says, without
// proxies (traffic goes only where the run file says), with the given
// overall timeout (0 for none).
func (c Conn) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: c.Wrap(Base()), Timeout: timeout}
}

// Base is headroom's default transport: no proxy, bounded dials.
func Base() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// headers adds fixed headers to each request, on a copy of it (a
// RoundTripper must not change the request it is given).
type headers struct {
	next http.RoundTripper
	h    http.Header
}

func (t *headers) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport underneath.
func (t *headers) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func rel(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
