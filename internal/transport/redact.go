package transport

import (
	"bytes"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Redacted stands in for a secret wherever one would have been written.
const Redacted = "[redacted]"

// RedactedUser stands in for a URL's user info: brackets are not allowed
// there, so "[redacted]@" would not parse back, and the run directory's
// config.yaml is read again by judge, reports and --resume.
const RedactedUser = "redacted"

// minSecret is the shortest value treated as a secret: shorter ones (a
// header value "1") would redact ordinary text everywhere.
const minSecret = 4

// userInfo finds a URL's user info in running text: scheme://user[:pass]@.
var userInfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s"']+@`)

// secretQuery are query parameters that carry credentials in URLs people
// paste (webhooks, gateways that take ?key=).
var secretQuery = []string{"key", "api_key", "apikey", "token", "access_token", "auth", "password", "sig", "signature"}

// URL returns s with its user info and any credential-like query
// parameter replaced by Redacted. A string that is not a URL is returned
// with only user-info patterns redacted.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return userInfo.ReplaceAllString(s, "${1}"+RedactedUser+"@")
	}
	if u.User != nil {
		u.User = url.User(RedactedUser)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			for _, s := range secretQuery {
				if strings.EqualFold(k, s) {
					q.Set(k, Redacted)
					changed = true
				}
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	out := u.String()
	// q.Encode escapes the brackets; keep the marker readable.
	return strings.ReplaceAll(out, url.PathEscape(Redacted), Redacted)
}

// HasUserInfo reports whether s is a URL that carries user info.
func HasUserInfo(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.User != nil
}

// Redactor removes known secrets, and the user info of any URL, from text
// before it is written. The zero value redacts URL user info only; it is
// safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // longest first, so a secret inside another goes last
}

// Add registers secrets; values shorter than a few bytes are ignored.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < minSecret {
			continue
		}
		dup := false
		for _, have := range r.secrets {
			dup = dup || have == s
		}
		if !dup {
			r.secrets = append(r.secrets, s)
		}
		// The userinfo part of a URL is often written percent-encoded.
		if e := url.QueryEscape(s); e != s && len(e) >= minSecret {
			r.secrets = append(r.secrets, e)
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// AddURL registers the password in a URL's user info as a secret.
func (r *Redactor) AddURL(s string) {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return
	}
	if p, ok := u.User.Password(); ok {
		r.Add(p)
	}
	r.Add(u.User.Username())
}

// String returns s with every secret and URL user info redacted.
func (r *Redactor) String(s string) string {
	if r != nil {
		r.mu.RLock()
		for _, sec := range r.secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Redacted)
			}
		}
		r.mu.RUnlock()
	}
	if strings.Contains(s, "@") {
		s = userInfo.ReplaceAllString(s, "${1}"+RedactedUser+"@")
	}
	return s
}

// Bytes is String for a byte slice; it returns b itself when nothing in it
// needs redacting (the common case, without copying).
func (r *Redactor) Bytes(b []byte) []byte {
	need := bytes.IndexByte(b, '@') >= 0
	if r != nil && !need {
		r.mu.RLock()
		for _, sec := range r.secrets {
			if bytes.Contains(b, []byte(sec)) {
				need = true
				break
			}
		}
		r.mu.RUnlock()
	}
	if !need {
		return b
	}
	return []byte(r.String(string(b)))
}

// Writer redacts everything written through it before passing it on. Each
// Write is redacted on its own: callers write whole lines (log lines, JSON
// records), so a secret is never split across two writes. Writes are
// serialized: a run shares its progress writer between its own log lines
// and the goroutines that copy its shard processes' output, and the writer
// underneath (a bytes.Buffer, a terminal view) need not be safe for
// concurrent use.
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return &redactWriter{r: r, w: w}
}

type redactWriter struct {
	r  *Redactor
	mu sync.Mutex
	w  io.Writer
}

func (w *redactWriter) Write(p []byte) (int, error) {
	out := w.r.Bytes(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
