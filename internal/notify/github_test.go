package notify

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// run posts msgs to the pull request as one run of recipe would, and
// returns its comment's id.
func runOn(t *testing.T, srv string, recipe string, msgs ...Message) int64 {
	t.Helper()
	g := &GitHub{API: srv + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "headroom: " + recipe, Key: recipe}
	s := Start(fast, g)
	for _, m := range msgs {
		s.Post(m)
	}
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Fatalf("%s: warnings %q", recipe, w)
	}
	return g.CommentID()
}

func TestASecondRunEditsTheFirstRunsComment(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	// 130 comments by people first: the run's comment lands on the
	// second page of 100.
	var people []string
	for i := range 130 {
		people = append(people, fmt.Sprintf("LGTM %d", i))
	}
	gh.seed(people...)
	first := runOn(t, srv.URL, "recipe-1", Message{Text: "recipe-1: step 1, 4 sessions: fail", Event: "step"})
	// another recipe's run on the same PR keeps a comment of its own,
	// though its name starts with the first's
	other := runOn(t, srv.URL, "recipe-10", Message{Text: "recipe-10: step 1, 4 sessions: pass", Event: "step"})
	second := runOn(t, srv.URL, "recipe-1", Message{Text: "recipe-1: step 1, 8 sessions: pass", Event: "step"})
	comments, reqs := gh.snapshot()
	if first == 0 || second != first || other == first {
		t.Errorf("comment ids: first run %d, recipe-10 %d, second run %d: want the second run to edit the first's", first, other, second)
	}
	if len(comments) != 132 {
		t.Errorf("%d comments on the PR, want the 130 people's and one per recipe", len(comments))
	}
	body := comments[first]
	if !strings.Contains(body, "8 sessions: pass") || strings.Contains(body, "4 sessions: fail") || strings.Contains(body, "recipe-10") {
		t.Errorf("recipe-1's comment after its second run:\n%s", body)
	}
	if !strings.Contains(comments[other], "recipe-10: step 1") {
		t.Errorf("recipe-10's comment:\n%s", comments[other])
	}
	// the second run read both pages, posted nothing and edited once
	var posts, gets int
	for _, r := range reqs[len(reqs)-3:] {
		posts += strings.Count(r, "POST")
		gets += strings.Count(r, "GET")
	}
	if posts != 0 || gets != 2 || !strings.HasPrefix(reqs[len(reqs)-1], "PATCH "+ghEdit) {
		t.Errorf("the second run's requests: %q, want two pages read and one PATCH", reqs[len(reqs)-3:])
	}
}

func TestADeletedCommentIsPostedAgain(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "t", Key: "r"}
	s := Start(fast, g)
	s.Post(Message{Text: "first", Event: "step"})
	waitFor(t, func() bool { return g.CommentID() != 0 })
	gh.mu.Lock()
	delete(gh.comments, g.CommentID()) // someone deletes it mid-run
	gh.mu.Unlock()
	s.Post(Message{Text: "second", Event: "step"})
	if w := s.Close(context.Background()); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	comments, _ := gh.snapshot()
	if len(comments) != 1 || !strings.Contains(comments[g.CommentID()], "second") || !strings.Contains(comments[g.CommentID()], "first") {
		t.Errorf("comments %v, want one new one with both lines", comments)
	}
}

func TestTheSummaryComesAfterTheRollback(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	id := runOn(t, srv.URL, "recipe-1",
		Message{Text: "recipe-1: sweep ok", Event: "phase", Fields: map[string]any{"status": "ok"}},
		Message{Text: "recipe-1: capacity 8 sessions", Event: "done", Fields: map[string]any{"run_dir": "runs/recipe-1/x"}},
		Message{Text: "recipe-1: rollback ok: the previous recipe is back", Event: "phase", Fields: map[string]any{"status": "ok"}})
	comments, _ := gh.snapshot()
	body := comments[id]
	rollback, done, dir := strings.Index(body, "rollback ok"), strings.Index(body, "**recipe-1: capacity"), strings.Index(body, "run directory `runs/recipe-1/x`")
	if rollback < 0 || done < rollback || dir < done {
		t.Errorf("want the rollback, then the summary, then the run directory:\n%s", body)
	}
}

func TestRelinkPointsAtTheUploadedReport(t *testing.T) {
	gh, srv := newGHServer(t, "tok-123456")
	gh.seed("an unrelated comment")
	id := runOn(t, srv.URL, "recipe-1",
		Message{Text: "recipe-1: capacity 8 sessions", Event: "done", Fields: map[string]any{"run_dir": "/var/runs/recipe-1/x"}})
	for _, url := range []string{"s3://bucket/headroom/recipe-1/x/report.html", "https://minio.example/bucket/recipe-1/x/report.html"} {
		g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "headroom: recipe-1", Key: "recipe-1"}
		if err := g.Relink(context.Background(), url); err != nil {
			t.Fatal(err)
		}
		comments, _ := gh.snapshot()
		body := comments[id]
		if strings.Contains(body, "/var/runs") || !strings.Contains(body, url) || !strings.Contains(body, "**recipe-1: capacity 8 sessions**") {
			t.Errorf("after Relink(%s):\n%s", url, body)
		}
		if strings.HasPrefix(url, "https:") && !strings.Contains(body, "[report]("+url+")") {
			t.Errorf("an https report is not a link:\n%s", body)
		}
		if len(comments) != 2 {
			t.Errorf("%d comments, want the unrelated one and the run's", len(comments))
		}
	}
	// a pull request without the recipe's comment is left alone
	g := &GitHub{API: srv.URL + "/api/v3", Repo: "acme/serving", PR: 42, Token: "tok-123456", Title: "x", Key: "recipe-2"}
	if err := g.Relink(context.Background(), "s3://b/k"); err != nil || g.CommentID() != 0 {
		t.Errorf("Relink without a comment: %v, id %d", err, g.CommentID())
	}
}

func TestAPreflightLineIsWhole(t *testing.T) {
	detail := "http://127.0.0.1:8000 serves glm with a 32768-token context; every signal the bar needs is reported; the engine is idle"
	for i := range 12 {
		detail += fmt.Sprintf("; note %d: the server reports no running/waiting gauges of its %d-th kind; idleness was not checked", i, i)
	}
	l := line(Message{Text: "recipe-1: pre-flight ok: " + detail, Event: "phase", Fields: map[string]any{"status": "ok"}})
	if !strings.HasSuffix(l, "note 11: the server reports no running/waiting gauges of its 11-th kind; idleness was not checked") || strings.Contains(l, "…") {
		t.Errorf("the pre-flight line (%d characters) is cut: %q", len(detail), l[len(l)-80:])
	}
}

func TestNextPage(t *testing.T) {
	for link, want := range map[string]string{
		`<https://api.github.com/repositories/1/issues/42/comments?page=2>; rel="next", <https://api.github.com/repositories/1/issues/42/comments?page=5>; rel="last"`: "https://api.github.com/repositories/1/issues/42/comments?page=2",
		`<https://x/c?page=1>; rel="prev", <https://x/c?page=1>; rel="first"`:                                                                                          "",
		``: "",
	} {
		if got := nextPage(link); got != want {
			t.Errorf("nextPage(%q) = %q, want %q", link, got, want)
		}
	}
}
