package rig

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-bench/headroom/internal/config"
	"github.com/headroom-bench/headroom/internal/live"
	"github.com/headroom-bench/headroom/internal/notify"
	"github.com/headroom-bench/headroom/internal/signal"
	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/transport"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// notifier posts each phase's and step's numbers to the run's webhook and
// pull-request comment in the background; a post that finally fails is a
// warning in the summary (see finish), never a failed run or a silent drop.
type notifier struct {
	send     *notify.Sender
	redact   *transport.Redactor // set before the first post
	secrets  []string            // the GitHub token, for the redactor
	warnings []string            // what stopped a target before it started
}

// notifyDrain bounds how long the end of a run waits for queued posts.
const notifyDrain = 30 * time.Second

// startNotifier starts posting where cfg.Notify says; env looks up the
// GitHub token's variable (os.LookupEnv). It returns nil when there is
// nowhere to post.
func startNotifier(cfg config.Run, env func(string) (string, bool)) *notifier {
	return startNotifierWith(cfg, env, notify.Options{})
}

func startNotifierWith(cfg config.Run, env func(string) (string, bool), o notify.Options) *notifier {
	nc := cfg.Notify
	n := &notifier{}
	var targets []notify.Target
	if nc.Webhook != "" {
		// the webhook's path is its secret, but it is never in a message
		// or an error (notify names a webhook by its host), and as a
		// secret its bare host would redact the endpoint's URLs too
		targets = append(targets, notify.Webhook{URL: nc.Webhook})
	}
	if g := nc.GitHub; g != nil {
		name := g.TokenEnv
		if name == "" {
			name = "GITHUB_TOKEN"
		}
		token, ok := env(name)
		if !ok || token == "" {
			n.warnings = append(n.warnings, fmt.Sprintf("notify.github: $%s is not set, so no comment was posted on %s#%d; set it to a token that may write the pull request's comments (notify.github.token_env names it)", name, g.Repo, g.PR))
		} else {
			n.secrets = append(n.secrets, token)
			targets = append(targets, githubTarget(cfg, token))
		}
	}
	if len(targets) == 0 && len(n.warnings) == 0 {
		return nil
	}
	n.send = notify.Start(o, targets...)
	return n
}

// redacting makes every later post and warning pass through r, and
// registers the GitHub token with it so it is never written.
func (n *notifier) redacting(r *transport.Redactor) {
	if n == nil {
		return
	}
	n.redact = r
	r.Add(n.secrets...)
}

func (n *notifier) post(m live.Message) {
	if n == nil {
		return
	}
	m.Text = n.redact.String(m.Text)
	fields := make(map[string]any, len(m.Fields))
	for k, v := range m.Fields {
		if s, ok := v.(string); ok {
			v = n.redact.String(s)
		}
		fields[k] = v
	}
	m.Fields = fields
	n.send.Post(m)
}

// finish waits for the queued posts (at most notifyDrain) and returns
// what was lost, one warning per target, for the summary. Later calls
// return nothing.
func (n *notifier) finish() []string {
	if n == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), notifyDrain)
	defer cancel()
	out := append(n.warnings, n.send.Close(ctx)...)
	n.warnings = nil
	for i, w := range out {
		out[i] = n.redact.String(w)
	}
	return out
}

// close sends what is queued and stops; finish also says what was lost.
func (n *notifier) close() { n.finish() }

// githubTarget is the run's pull-request comment: one per recipe on the
// pull request, found again by the next run of the recipe.
func githubTarget(cfg config.Run, token string) *notify.GitHub {
	g := cfg.Notify.GitHub
	return &notify.GitHub{API: g.API, Repo: g.Repo, PR: g.PR, Token: token, Title: "headroom: " + cfg.Recipe.Name, Key: cfg.Recipe.Name}
}

// LinkUploadedReport points the run's pull-request comment at the report
// it uploaded (upload.json in runDir says where, and whether it went),
// instead of at the local run directory. It does nothing without a
// notify.github section, a token or an upload that went through, and
// returns what went wrong as a warning, "" when nothing did. env looks up
// the token's variable (os.LookupEnv).
func LinkUploadedReport(ctx context.Context, cfg config.Run, runDir string, env func(string) (string, bool)) string {
	gc := cfg.Notify.GitHub
	if gc == nil || runDir == "" {
		return ""
	}
	var rec uploadRecord
	b, err := os.ReadFile(filepath.Join(runDir, "upload.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Error != "" || rec.URL == "" {
		return ""
	}
	token, ok := env(orEnv(gc.TokenEnv, "GITHUB_TOKEN"))
	if !ok || token == "" {
		return ""
	}
	url := rec.URL
	if _, err := os.Stat(filepath.Join(runDir, "report.html")); err == nil {
		url = strings.TrimSuffix(url, "/") + "/report.html"
	}
	ctx, cancel := context.WithTimeout(ctx, notifyDrain)
	defer cancel()
	if err := githubTarget(cfg, token).Relink(ctx, url); err != nil {
		red := new(transport.Redactor)
		red.Add(token)
		return red.String(fmt.Sprintf("notify: GitHub PR %s#%d: the comment was not pointed at the uploaded report %s: %v", gc.Repo, gc.PR, url, err))
	}
	return ""
}

func stepMessage(recipe string, s sweep.StepResult) live.Message {
	text := fmt.Sprintf("%s: step %d, %d sessions: %s", recipe, s.Index+1, s.Sessions, s.Judged.Verdict)
	fields := map[string]any{"recipe": recipe, "step": s.Index + 1, "sessions": s.Sessions, "verdict": s.Judged.Verdict}
	for _, p := range s.Judged.Parts {
		text += fmt.Sprintf("; %s %s %s", p.Name, p.Verdict, partValue(p))
		fields[p.Name] = map[string]any{"verdict": p.Verdict, "value": p.Value}
	}
	return live.Message{Text: text, Event: "step", Fields: fields}
}

// partValue is a part's value and interval in the unit and precision the
// reports' step table uses: TTFT in seconds to 2 places, interactivity in
// tokens/s per user to 1, and every other part (errors, tool calls under
// load) a share of turns in percent to 1.
func partValue(p verdict.Part) string {
	digits, scale, unit := 1, 100.0, "%"
	switch p.Name {
	case verdict.PartTTFT:
		digits, scale, unit = 2, 1, " s"
	case verdict.PartInteractivity:
		digits, scale, unit = 1, 1, " tok/s/user"
	}
	v := p.Value
	if math.IsNaN(v.Center) {
		return "no data"
	}
	f := func(x float64) string {
		if math.IsInf(x, 1) {
			return "inf"
		}
		return strconv.FormatFloat(x*scale, 'f', digits, 64)
	}
	if unit == "%" {
		return fmt.Sprintf("%s (%s-%s)%%", f(v.Center), f(v.Lo), f(v.Hi))
	}
	return fmt.Sprintf("%s (%s-%s)%s", f(v.Center), f(v.Lo), f(v.Hi), unit)
}

// lastWindow is the last whole window of samples: what the running
// figures are read from; false before two samples span one.
func lastWindow(samples []signal.Sample, window time.Duration) (signal.Window, bool) {
	if len(samples) < 2 {
		return signal.Window{}, false
	}
	end := samples[len(samples)-1].At
	ws := signal.Windows(samples, max(0, end-window), end, window)
	if len(ws) == 0 {
		return signal.Window{}, false
	}
	return ws[len(ws)-1], true
}

// lastWindowP90s are the running P90s the live view shows: the last
// window's TTFT and interactivity, 0 when not known yet.
func lastWindowP90s(samples []signal.Sample, window time.Duration) (ttft, inter float64) {
	w, ok := lastWindow(samples, window)
	if !ok {
		return 0, 0
	}
	return windowP90s(w)
}

// windowP90s are a window's P90 TTFT and interactivity, 0 when it has none.
func windowP90s(w signal.Window) (ttft, inter float64) {
	if h, ok := w.Hist[signal.TTFT]; ok {
		if v, _, _, ok := h.Quantile(0.9); ok {
			ttft = v
		}
	}
	if h, ok := w.Hist[signal.TPOT]; ok {
		if v, _, _, ok := h.Quantile(0.9); ok && v > 0 {
			inter = 1 / v
		}
	}
	return ttft, inter
}

// windowErrorShare is the running error share the live metrics show: of
// the requests the server ended in a window (the last one), the
// share that ended in an error status, an abort or a failure (the judge
// divides by planned turns instead, which counts unsent and unreached turns
// too, and reads the whole step). NaN when no request ended in it or the
// server reports no outcome counters.
func windowErrorShare(w signal.Window) float64 {
	errs, seen := 0.0, false
	for _, c := range []string{signal.HTTP4xx, signal.HTTP5xx, signal.RequestsAborted, signal.RequestsFailed} {
		if v, ok := w.Counter[c]; ok {
			errs, seen = errs+v, true
		}
	}
	okN, hasOK := w.Counter[signal.RequestsOK]
	if !seen || !hasOK || errs+okN <= 0 {
		return math.NaN()
	}
	return errs / (errs + okN)
}

// nanIfZero marks an unknown running value (0) as missing for telemetry.
func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}
