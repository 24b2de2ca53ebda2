package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// DefaultGitHubAPI is github.com's REST API; GitHub Enterprise Server's is
// https://HOST/api/v3.
const DefaultGitHubAPI = "https://api.github.com"

// maxCommentBody stays under GitHub's 65536-character limit on a comment.
const maxCommentBody = 60000

// GitHub keeps one comment on a pull request up to date with the run: the
// first message creates it (POST /repos/{owner}/{repo}/issues/{pr}/comments),
// every later one rewrites it in place (PATCH
// /repos/{owner}/{repo}/issues/comments/{id}) with every message so far.
type GitHub struct {
	// API is the REST API's base URL; empty is DefaultGitHubAPI.
	API string
	// Repo is owner/name; PR the pull request's number.
	Repo string
	PR   int
	// Token is sent as "Authorization: Bearer <token>"; it needs write
	// access to the pull request's comments.
	Token string
	// Title heads the comment, e.g. "headroom: recipe-1".
	Title string
	// Client sends the requests; nil uses one with a 10 s timeout.
	Client *http.Client

	mu      sync.Mutex
	id      int64 // the comment's id, once it exists
	lastSeq uint64
	lines   []string
}

func (g *GitHub) cumulative() {}

// Name is the pull request the comment is on.
func (g *GitHub) Name() string { return fmt.Sprintf("GitHub PR %s#%d", g.Repo, g.PR) }

// CommentID is the id of the comment, 0 before it was created.
func (g *GitHub) CommentID() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.id
}

// Deliver adds m to the comment and creates or rewrites it.
func (g *GitHub) Deliver(ctx context.Context, m Message) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.seq == 0 || m.seq > g.lastSeq {
		g.lines = append(g.lines, line(m))
		g.lastSeq = m.seq
	}
	body := g.body()
	api := strings.TrimRight(g.API, "/")
	if api == "" {
		api = DefaultGitHubAPI
	}
	if g.id == 0 {
		var created struct {
			ID int64 `json:"id"`
		}
		url := fmt.Sprintf("%s/repos/%s/issues/%d/comments", api, g.Repo, g.PR)
		if err := g.send(ctx, http.MethodPost, url, body, &created); err != nil {
			return err
		}
		if created.ID == 0 {
			return Permanent(errors.New("GitHub created the comment but answered without its id"))
		}
		g.id = created.ID
		return nil
	}
	url := fmt.Sprintf("%s/repos/%s/issues/comments/%d", api, g.Repo, g.id)
	return g.send(ctx, http.MethodPatch, url, body, nil)
}

// send makes one API request with the comment body and decodes the answer
// into out when it is not nil.
func (g *GitHub) send(ctx context.Context, method, url, body string, out any) error {
	b, _ := json.Marshal(map[string]string{"body": body})
	what := "GitHub " + method + " comment"
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return Permanent(transportError(what, err))
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "headroom")
	resp, err := client(g.Client).Do(req)
	if err != nil {
		return transportError(what, err)
	}
	defer resp.Body.Close()
	if err := classify(resp, what); err != nil {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			err = fmt.Errorf("%w: the token was refused; check notify.github.token_env", err)
		case http.StatusNotFound, http.StatusForbidden:
			err = fmt.Errorf("%w: check notify.github.repo and pr, and that the token may write to its pull requests", err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return err
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return Permanent(fmt.Errorf("%s: the answer is not JSON: %v", what, err))
	}
	return nil
}

// body is the comment: the title, then one line per message, dropping the
// oldest step lines (never the first lines) when it would be too long.
func (g *GitHub) body() string {
	head := "### " + g.Title + "\n\n"
	foot := "\n<sub>Posted by headroom; this comment is edited as phases and steps finish.</sub>\n"
	lines := g.lines
	size := len(head) + len(foot) + 80 // room for the line that says how many were left out
	for _, l := range lines {
		size += len(l) + 1
	}
	omitted := 0
	for size > maxCommentBody && len(lines) > 2 {
		size -= len(lines[1]) + 1
		lines = append(lines[:1:1], lines[2:]...)
		omitted++
	}
	var b strings.Builder
	b.WriteString(head)
	for i, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
		if i == 0 && omitted > 0 {
			fmt.Fprintf(&b, "- … %d earlier lines left out (the comment's size limit)\n", omitted)
		}
	}
	b.WriteString(foot)
	return b.String()
}

// maxLine is where a message's line in the comment is cut.
const maxLine = 400

// line renders one message as a Markdown list item.
func line(m Message) string {
	text := strings.ReplaceAll(m.Text, "\n", " ")
	if r := []rune(text); len(r) > maxLine {
		text = string(r[:maxLine-1]) + "…"
	}
	switch m.Event {
	case "phase":
		mark := "•"
		switch m.Fields["status"] {
		case "ok":
			mark = "✅"
		case "failed":
			mark = "❌"
		case "skipped":
			mark = "⏭️"
		}
		return "- " + mark + " " + text
	case "step":
		return "- 📶 " + text
	case "done":
		out := "- **" + text + "**"
		if dir, ok := m.Fields["run_dir"].(string); ok && dir != "" {
			out += " (run directory `" + dir + "`)"
		}
		return out
	}
	return "- " + text
}
