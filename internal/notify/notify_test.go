package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// fast retries, so the tests take milliseconds; the timeout of a try only
// guards against a hang (a loopback answer on a loaded host may be slow).
var fast = Options{Tries: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Timeout: 30 * time.Second}

// ghServer is a loopback stand-in for GitHub's REST API on one pull
// request (acme/serving#42): it checks each request the way GitHub would,
// keeps the comments in order, lists them a page at a time with a Link
// header (per_page at most 100, 30 by default) and creates and edits them.
type ghServer struct {
	t        *testing.T
	mu       sync.Mutex
	srv      *httptest.Server
	token    string
	order    []int64 // comment ids, oldest first
	comments map[int64]string
	nextID   int64
	requests []string // "METHOD path"
	fail     int      // answer this many requests with 502 first
	status   int      // when set, answer every request with it
}

func newGHServer(t *testing.T, token string) (*ghServer, *httptest.Server) {
	g := &ghServer{t: t, token: token, comments: map[int64]string{}, nextID: 9000}
	g.srv = httptest.NewServer(g)
	t.Cleanup(g.srv.Close)
	return g, g.srv
}

// seed adds comments someone else (or an earlier run) left on the PR.
func (g *ghServer) seed(bodies ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range bodies {
		g.add(b)
	}
}

func (g *ghServer) add(body string) int64 {
	id := g.nextID
	g.nextID++
	g.order = append(g.order, id)
	g.comments[id] = body
	return id
}

const (
	ghList  = "/api/v3/repos/acme/serving/issues/42/comments"
	ghEdit  = "/api/v3/repos/acme/serving/issues/comments/"
	jsonCT  = "application/json; charset=utf-8"
	perPage = 30
)

func (g *ghServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests = append(g.requests, r.Method+" "+r.URL.Path)
	if g.status != 0 {
		http.Error(w, `{"message":"nope"}`, g.status)
		return
	}
	if g.fail > 0 {
		g.fail--
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+g.token {
		g.t.Errorf("%s %s: Authorization %q, want the bearer token", r.Method, r.URL.Path, got)
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" {
		g.t.Errorf("%s %s: Accept %q, API version %q", r.Method, r.URL.Path, r.Header.Get("Accept"), r.Header.Get("X-GitHub-Api-Version"))
	}
	w.Header().Set("Content-Type", jsonCT)
	if r.Method == http.MethodGet && r.URL.Path == ghList {
		g.list(w, r)
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &in); err != nil || in.Body == "" {
		g.t.Errorf("%s %s: body %q is not {\"body\": ...}", r.Method, r.URL.Path, b)
		http.Error(w, "bad body", http.StatusUnprocessableEntity)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == ghList:
		id := g.add(in.Body)
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"id": id, "body": in.Body})
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, ghEdit):
		id, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, ghEdit), 10, 64)
		if _, ok := g.comments[id]; err != nil || !ok {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		g.comments[id] = in.Body
		json.NewEncoder(w).Encode(map[string]any{"id": id, "body": in.Body})
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

// list answers GET .../issues/42/comments?per_page=N&page=P as GitHub
// does: oldest first, a Link header naming the next and last pages.
func (g *ghServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per, page := perPage, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	last := max(1, (len(g.order)+per-1)/per)
	out := []map[string]any{}
	for i := (page - 1) * per; i < min(len(g.order), page*per); i++ {
		id := g.order[i]
		out = append(out, map[string]any{"id": id, "body": g.comments[id], "user": map[string]any{"login": "someone"}})
	}
	link := func(p int, rel string) string {
		return fmt.Sprintf(`<%s%s?per_page=%d&page=%d>; rel="%s"`, g.srv.URL, ghList, per, p, rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	json.NewEncoder(w).Encode(out)
}

func (g *ghServer) snapshot() (map[int64]string, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := map[int64]string{}
	for k, v := range g.comments {
		c[k] = v
	}
	return c, append([]string(nil), g.requests...)
}

func TestGitHubCommentIsCreatedOnceAndEditedInPlace(t *testing.T) {
	gh, srv := newGHServer(t, "ghp_secret_token_1234")
	g := &GitHub{API: srv.URL + "/api/v3/", Repo: "acme/serving", PR: 42, Token: "ghp_secret_token_1234", Title: "headroom: recipe-1"}
	s := Start(fast, g)
	s.Post(Message{Text: "recipe-1: pre-flight ok: endpoint serves glm", Event: "phase", Fields: map[string]any{"status": "ok"}})
	s.Post(Message{Text: "recipe-1: step 1, 4 sessions: pass", Event: "step"})
	s.Post(Message{Text: "recipe-1: capacity 8.9 (8.1-9.6)", Event: "done", Fields: map[string]any{"run_dir": "runs/recipe-1/20260101T000000Z"}})
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("warnings after a clean run: %q", w)
	}
	comments, reqs := gh.snapshot()
	// A look for an earlier run's comment, one POST, then PATCHes of the
	// id the POST returned.
	want := []string{"GET /api/v3/repos/acme/serving/issues/42/comments", "POST /api/v3/repos/acme/serving/issues/42/comments",
		"PATCH /api/v3/repos/acme/serving/issues/comments/9000", "PATCH /api/v3/repos/acme/serving/issues/comments/9000"}
	if strings.Join(reqs, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n  %s\nwant:\n  %s", strings.Join(reqs, "\n  "), strings.Join(want, "\n  "))
	}
	if len(comments) != 1 || g.CommentID() != 9000 {
		t.Fatalf("comments %v (id %d), want one, 9000", comments, g.CommentID())
	}
	body := comments[9000]
	for _, w := range []string{"### headroom: recipe-1", "✅ recipe-1: pre-flight ok", "step 1, 4 sessions: pass", "**recipe-1: capacity 8.9 (8.1-9.6)**", "runs/recipe-1/20260101T000000Z"} {
		if !strings.Contains(body, w) {
			t.Errorf("comment lacks %q:\n%s", w, body)
		}
	}
	// Each message is in the comment once, in order.
	if strings.Count(body, "pre-flight ok") != 1 || strings.Index(body, "pre-flight") > strings.Index(body, "step 1") {
		t.Errorf("comment does not list each message once, in order:\n%s", body)
	}
}

func TestRetriesWithBackoffThenPosts(t *testing.T) {
	gh, srv := newGHServer(t, "ghp_secret_token_1234")
	gh.fail = 2 // two 502s, then the POST goes through on the third try
	g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "ghp_secret_token_1234", Title: "t"}
	s := Start(fast, g)
	s.Post(Message{Text: "one", Event: "step"})
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("a post that succeeded on its third try left warnings: %q", w)
	}
	comments, reqs := gh.snapshot()
	if len(reqs) != 4 || len(comments) != 1 {
		t.Errorf("requests %q comments %v, want three tries of the look, a POST and one comment", reqs, comments)
	}
}

func TestFailedPostIsAWarningNotADrop(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		requests int    // requests the server should see for the two messages
		want     string // in the warning
	}{
		// A refused token is not retried and says what to check.
		{"bad token", http.StatusUnauthorized, 2, "token_env"},
		// A server that keeps failing: the first message is tried Tries
		// times, the next once (one round of backoff per dead receiver).
		{"server down", http.StatusServiceUnavailable, 3 + 1, "HTTP 503"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gh, srv := newGHServer(t, "tok-123456")
			gh.status = c.status
			g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "t"}
			s := Start(fast, g)
			s.Post(Message{Text: "one", Event: "step"})
			s.Post(Message{Text: "two", Event: "step"})
			w := s.Close(context.Background())
			if len(w) != 1 || !strings.Contains(w[0], "GitHub PR acme/serving#42") || !strings.Contains(w[0], "2 of 2 posts failed") || !strings.Contains(w[0], c.want) {
				t.Errorf("warnings %q, want one naming the PR, 2 of 2 failed and %q", w, c.want)
			}
			if _, reqs := gh.snapshot(); len(reqs) != c.requests {
				t.Errorf("%d requests, want %d", len(reqs), c.requests)
			}
		})
	}
}

func TestALaterEditMakesUpForAFailedOne(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "t"}
	s := Start(Options{Tries: 1, Backoff: time.Millisecond, Timeout: 30 * time.Second}, g)
	s.Post(Message{Text: "first", Event: "step"})
	waitFor(t, func() bool { _, r := gh.snapshot(); return len(r) == 2 }) // GET, POST
	gh.mu.Lock()
	gh.fail = 1
	gh.mu.Unlock()
	s.Post(Message{Text: "second", Event: "step"}) // its PATCH fails, once
	waitFor(t, func() bool { _, r := gh.snapshot(); return len(r) == 3 })
	s.Post(Message{Text: "third", Event: "step"}) // carries the second too
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("warnings %q after the comment caught up", w)
	}
	comments, _ := gh.snapshot()
	if b := comments[9000]; !strings.Contains(b, "second") || !strings.Contains(b, "third") {
		t.Errorf("comment %q lacks the failed edit's line", b)
	}
}

func TestWebhookPostsSlackJSONAndHidesItsPath(t *testing.T) {
	var mu sync.Mutex
	var got []Message
	fail := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/services/T000/B000/hook-secret" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "wrong", http.StatusNotFound)
			return
		}
		if fail > 0 {
			fail--
			http.Error(w, "busy", http.StatusTooManyRequests)
			return
		}
		var m Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		got = append(got, m)
	}))
	defer srv.Close()
	h := Webhook{URL: srv.URL + "/services/T000/B000/hook-secret"}
	s := Start(fast, h)
	s.Post(Message{Text: "step 2: 4 sessions pass", Event: "step", Fields: map[string]any{"sessions": 4}})
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	if len(got) != 1 || got[0].Text != "step 2: 4 sessions pass" || got[0].Fields["sessions"] != float64(4) {
		t.Errorf("receiver got %+v, want the message once (after one 429)", got)
	}

	// A webhook that cannot be reached: the warning names it without its
	// secret path, and so does the error inside it.
	srv.Close()
	s = Start(fast, h)
	s.Post(Message{Text: "x"})
	w := s.Close(context.Background())
	if len(w) != 1 || !strings.Contains(w[0], "webhook http://127.0.0.1") || strings.Contains(w[0], "hook-secret") {
		t.Errorf("warnings %q: want one naming the webhook's host, never its path", w)
	}
}

func TestPostNeverBlocksTheRun(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	s := Start(Options{Tries: 1, Timeout: time.Minute, Queue: 2}, Webhook{URL: srv.URL})
	// The first post is taken and stuck at the receiver; the next nine
	// find one of them in flight: two wait in the queue, seven are
	// dropped. Posting returns all the same, however slow the host: a
	// Post that blocked would never return while the receiver is stuck
	// (the 30 s is only a guard against hanging the test).
	s.Post(Message{Text: "0"})
	<-arrived
	posted := make(chan struct{})
	go func() {
		for i := 1; i < 10; i++ {
			s.Post(Message{Text: fmt.Sprint(i)})
		}
		close(posted)
	}()
	select {
	case <-posted:
	case <-time.After(30 * time.Second):
		t.Fatal("Post blocked on a stuck webhook")
	}
	// Close gives up at its deadline and says what was lost: the one in
	// flight and the two queued were not sent.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w := s.Close(ctx)
	if len(w) != 1 || !strings.Contains(w[0], "7 messages dropped") || !strings.Contains(w[0], "3 messages not sent when the run ended") {
		t.Errorf("warnings %q, want 7 dropped and 3 unsent messages", w)
	}
	if len(arrived) != 0 {
		t.Errorf("the webhook got %d more posts while the first was stuck", len(arrived))
	}
	if w := s.Close(context.Background()); w != nil {
		t.Errorf("a second Close returned %q", w)
	}
	s.Post(Message{Text: "after close"}) // ignored, no panic
}

func TestABrokenReceiverRecovers(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	gh.fail = 3 // the first message fails all its tries (the look for an earlier comment)
	g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "t"}
	s := Start(fast, g)
	s.Post(Message{Text: "first", Event: "step"})
	s.Post(Message{Text: "second", Event: "step"}) // one try, which goes through
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("warnings %q: the comment caught up", w)
	}
	comments, reqs := gh.snapshot()
	if len(reqs) != 5 || !strings.Contains(comments[9000], "first") || !strings.Contains(comments[9000], "second") {
		t.Errorf("requests %q comment %q", reqs, comments[9000])
	}
}

func TestLongLinesAreCut(t *testing.T) {
	l := line(Message{Text: strings.Repeat("é", 10000) + "\nnext", Event: "phase"})
	if n := utf8.RuneCountInString(l); n > maxLine+100 || !strings.Contains(l, "characters more") || strings.Contains(l, "\n") {
		t.Errorf("line of %d characters: %q", n, l[:40])
	}
}

func TestBodyStaysUnderGitHubsLimit(t *testing.T) {
	g := &GitHub{Title: "t"}
	for i := range 2000 {
		g.lines = append(g.lines, fmt.Sprintf("- step %d: %s", i, strings.Repeat("x", 60)))
	}
	b := g.body()
	if len(b) > maxCommentBody || !strings.Contains(b, "step 0:") || !strings.Contains(b, "step 1999:") || !strings.Contains(b, "earlier lines left out") {
		t.Errorf("body of %d bytes: first %q ... last %q", len(b), b[:80], b[len(b)-120:])
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a bound on the host's speed
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
