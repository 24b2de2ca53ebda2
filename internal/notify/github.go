package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// DefaultGitHubAPI is github.com's REST API; GitHub Enterprise Server's is
// https://HOST/api/v3.
const DefaultGitHubAPI = "https://api.github.com"

// maxCommentBody stays under GitHub's 65536-character limit on a comment.
const maxCommentBody = 60000

// maxListPages bounds the search for an earlier run's comment: 100 pages
// of 100 comments.
const maxListPages = 100

// GitHub keeps one comment per key (the recipe) on a pull request up to
// date with the run. The first message looks for the comment an earlier
// run with the same key left, by the hidden marker at its top (GET
// /repos/{owner}/{repo}/issues/{pr}/comments, page by page), and rewrites
// it (PATCH /repos/{owner}/{repo}/issues/comments/{id}); only when there is
// none does it create one (POST /repos/{owner}/{repo}/issues/{pr}/comments).
// Every later message rewrites it in place with every message so far.
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
	// Key tells this comment from headroom's others on the pull request
	// (the recipe's name): runs with the same key share one comment.
	// Empty is Title.
	Key string
	// Client sends the requests; nil uses one with a 10 s timeout.
	Client *http.Client

	mu      sync.Mutex
	id      int64 // the comment's id, once found or created
	looked  bool  // the pull request's comments were searched for the marker
	lastSeq uint64
	lines   []string // phases and steps, in order
	done    []string // the run's final summary, shown after every other line
	where   string   // where the results are (the run directory), shown last
}

func (g *GitHub) cumulative() {}

// Name is the pull request the comment is on.
func (g *GitHub) Name() string { return fmt.Sprintf("GitHub PR %s#%d", g.Repo, g.PR) }

// CommentID is the id of the comment, 0 before it was found or created.
func (g *GitHub) CommentID() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.id
}

// Marker is the hidden line that starts every comment with this key: an
// HTML comment, which GitHub does not show.
func (g *GitHub) Marker() string {
	key := g.Key
	if key == "" {
		key = g.Title
	}
	// escaped so the key can neither end the HTML comment nor its quotes
	key = strings.ReplaceAll(url.PathEscape(key), "-", "%2D")
	return `<!-- headroom:comment key="` + key + `" -->`
}

// whereStart and whereEnd enclose the line that says where the results
// are, so a later edit (the uploaded report) can replace it alone.
const (
	whereStart = "<!-- headroom:where -->"
	whereEnd   = "<!-- /headroom:where -->"
)

// whereRegion is the line l between the markers, each on a line of its
// own: a line that starts with an HTML comment is raw HTML to Markdown.
func whereRegion(l string) string {
	if l == "" {
		return whereStart + "\n" + whereEnd
	}
	return whereStart + "\n" + l + "\n" + whereEnd
}

// Deliver adds m to the comment and finds, creates or rewrites it.
func (g *GitHub) Deliver(ctx context.Context, m Message) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.seq == 0 || m.seq > g.lastSeq {
		g.add(m)
		g.lastSeq = m.seq
	}
	if !g.looked {
		c, err := g.find(ctx)
		if err != nil {
			return err
		}
		g.id, g.looked = c.ID, true
	}
	body := g.body()
	if g.id == 0 {
		var created comment
		if _, err := g.request(ctx, http.MethodPost, g.api()+fmt.Sprintf("/repos/%s/issues/%d/comments", g.Repo, g.PR), body, &created); err != nil {
			return err
		}
		if created.ID == 0 {
			return Permanent(errors.New("GitHub created the comment but answered without its id"))
		}
		g.id = created.ID
		return nil
	}
	status, err := g.request(ctx, http.MethodPatch, g.api()+fmt.Sprintf("/repos/%s/issues/comments/%d", g.Repo, g.id), body, nil)
	if status == http.StatusNotFound {
		// someone deleted the comment: the next try posts a new one (not
		// a Permanent error, as other 404s are)
		gone := g.id
		g.id = 0
		return fmt.Errorf("GitHub PATCH comment %d: it is gone (deleted?); the next try posts a new one", gone)
	}
	return err
}

// add files m's line where the comment shows it.
func (g *GitHub) add(m Message) {
	if m.Event != "done" {
		g.lines = append(g.lines, line(m))
		return
	}
	g.done = append(g.done, line(m))
	if dir, ok := m.Fields["run_dir"].(string); ok && dir != "" {
		g.where = "- 📁 run directory `" + dir + "`"
	}
}

// Relink replaces the line that says where the results are, in the
// comment with g's key, by one that links url (the uploaded report): the
// run's own posts are over by then. It does nothing when the pull request
// has no such comment.
func (g *GitHub) Relink(ctx context.Context, url string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.find(ctx)
	if err != nil || c.ID == 0 {
		return err
	}
	body := c.Body
	i := strings.Index(body, whereStart)
	j := strings.Index(body, whereEnd)
	if i < 0 || j < i {
		return Permanent(fmt.Errorf("GitHub comment %d has no line for the report's place: it was not edited", c.ID))
	}
	body = body[:i] + whereRegion(ReportLine(url)) + body[j+len(whereEnd):]
	g.id, g.looked = c.ID, true
	_, err = g.request(ctx, http.MethodPatch, g.api()+fmt.Sprintf("/repos/%s/issues/comments/%d", g.Repo, c.ID), body, nil)
	return err
}

// ReportLine is the comment's line for a report uploaded to url: a link
// where GitHub can show one (http and https), else the address in code.
func ReportLine(url string) string {
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return "- 📄 [report](" + url + ")"
	}
	return "- 📄 report uploaded to `" + url + "`"
}

// comment is what GitHub answers about one issue comment.
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func (g *GitHub) api() string {
	api := strings.TrimRight(g.API, "/")
	if api == "" {
		return DefaultGitHubAPI
	}
	return api
}

// find is the oldest comment on the pull request that holds g's marker;
// its ID is 0 when there is none.
func (g *GitHub) find(ctx context.Context) (comment, error) {
	marker := g.Marker()
	next := g.api() + fmt.Sprintf("/repos/%s/issues/%d/comments?per_page=100", g.Repo, g.PR)
	for page := 0; next != "" && page < maxListPages; page++ {
		var cs []comment
		h, err := g.requestHeader(ctx, http.MethodGet, next, "", &cs)
		if err != nil {
			return comment{}, err
		}
		for _, c := range cs {
			if strings.Contains(c.Body, marker) {
				return c, nil
			}
		}
		next = nextPage(h.Get("Link"))
	}
	return comment{}, nil
}

// nextPage is the rel="next" URL of a Link header, "" when there is none.
func nextPage(link string) string {
	for _, part := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if strings.ReplaceAll(strings.TrimSpace(p), " ", "") == `rel="next"` {
				return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(target), "<"), ">")
			}
		}
	}
	return ""
}

// request makes one API request and returns the answer's status.
func (g *GitHub) request(ctx context.Context, method, url, body string, out any) (int, error) {
	status := 0
	_, err := g.send(ctx, method, url, body, out, &status)
	return status, err
}

// requestHeader makes one API request and returns the answer's header.
func (g *GitHub) requestHeader(ctx context.Context, method, url, body string, out any) (http.Header, error) {
	return g.send(ctx, method, url, body, out, new(int))
}

// send makes one API request, with the comment body unless it is a GET,
// and decodes the answer into out when it is not nil.
func (g *GitHub) send(ctx context.Context, method, url, body string, out any, status *int) (http.Header, error) {
	var rd io.Reader
	what := "GitHub " + method + " comment"
	if method == http.MethodGet {
		what = "GitHub GET comments"
	} else {
		b, _ := json.Marshal(map[string]string{"body": body})
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, Permanent(transportError(what, err))
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "headroom")
	resp, err := client(g.Client).Do(req)
	if err != nil {
		return nil, transportError(what, err)
	}
	defer resp.Body.Close()
	*status = resp.StatusCode
	if err := classify(resp, what); err != nil {
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			err = fmt.Errorf("%w: the token was refused; check notify.github.token_env", err)
		case http.StatusNotFound, http.StatusForbidden:
			err = fmt.Errorf("%w: check notify.github.repo and pr, and that the token may read and write its pull requests' comments", err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return resp.Header, err
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.Header, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return resp.Header, Permanent(fmt.Errorf("%s: the answer is not JSON: %v", what, err))
	}
	return resp.Header, nil
}

// body is the comment: the marker, the title, one line per phase and
// step, the final summary and where the results are; it drops the oldest
// step lines (never the first line) when it would be too long.
func (g *GitHub) body() string {
	head := g.Marker() + "\n### " + g.Title + "\n\n"
	foot := "\n<sub>Posted by headroom; this comment is edited as phases and steps finish, and by the next run of this recipe on this pull request.</sub>\n"
	tail := append(append([]string(nil), g.done...), whereRegion(g.where))
	lines := g.lines
	size := len(head) + len(foot) + 80 // room for the line that says how many were left out
	for _, l := range append(lines, tail...) {
		size += len(l) + 1
	}
	omitted := 0
	for size > maxCommentBody && len(lines) > 1 {
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
	for _, l := range tail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(foot)
	return b.String()
}

// maxLine is where a message's line in the comment is cut: far past any
// phase's detail (a pre-flight's notes run to a few hundred characters),
// it only keeps one runaway message from filling the comment.
const maxLine = 4000

// line renders one message as a Markdown list item.
func line(m Message) string {
	text := strings.ReplaceAll(m.Text, "\n", " ")
	if r := []rune(text); len(r) > maxLine {
		text = string(r[:maxLine]) + fmt.Sprintf("… (%d characters more: the run directory has the whole text)", len(r)-maxLine)
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
		return "- **" + text + "**"
	}
	return "- " + text
}
