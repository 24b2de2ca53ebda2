package recommend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"text/tabwriter"
)

// statusWords is how each status reads in the table.
var statusWords = map[string]string{
	Holds:       "holds the target",
	NeedsWindow: "needs a GPU window",
	DoesNotHold: "does not hold the target",
	Failed:      "simulation failed",
	Skipped:     "skipped",
}

// Headline is the search in a line: the space, the target, how many
// candidates held it.
func (r Result) Headline() string {
	simulated := len(r.Candidates) - r.Counts[Skipped]
	return fmt.Sprintf("%d candidates from %s (%d simulated, %d skipped) in %.0f s: %d hold the target of %d sessions, %d need a GPU window, %d do not hold it",
		len(r.Candidates), r.Space, simulated, r.Counts[Skipped], r.WallS, r.Counts[Holds], r.Target, r.Counts[NeedsWindow], r.Counts[DoesNotHold])
}

// BarLine is the bar every candidate was judged against.
func (r Result) BarLine() string {
	return fmt.Sprintf("bar: P90 TTFT <= %s s, P90 interactivity >= %s tokens/s per user, errors < %s%%",
		num(r.Bar.TTFTP90), num(r.Bar.InteractivityP90), num(100*r.Bar.ErrorRate))
}

// Table is the result as a text table with a line of reasons under it for
// every candidate not plainly ranked.
func (r Result) Table() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "headroom recommend: %s\n%s\n", r.Headline(), r.BarLine())
	fmt.Fprintf(&b, "every candidate simulated on the virtual clock with the adaptive sweep: the figures are the model's, to be verified in a GPU window\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\tcandidate\tGPUs\t$/hour\tcapacity (95% CI)\ttarget\t$/session-hour (95% CI)\t$/M tokens\tsteps\tmodelled min\tverdict")
	for _, c := range r.Candidates {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rankText(c), c.Label, intOrDash(c.GPUs, c.Status),
			moneyOrDash(c.USDPerHour, c.Status), capacityText(c), targetText(c), costText(c), tokensText(c),
			intOrDash(c.Steps, c.Status), minutesText(c), verdictText(c))
	}
	tw.Flush()
	var why []string
	for _, c := range r.Candidates {
		if c.Reason != "" {
			why = append(why, fmt.Sprintf("  candidate %d (%s): %s: %s", c.Index, c.Label, statusWords[c.Status], c.Reason))
		}
	}
	if len(why) > 0 {
		fmt.Fprintf(&b, "\nwhy:\n%s\n", strings.Join(why, "\n"))
	}
	return b.String()
}

// JSON is the result as indented JSON.
func (r Result) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func rankText(c Ranked) string {
	if c.Rank > 0 {
		return fmt.Sprint(c.Rank)
	}
	return "-"
}

func intOrDash(v int, status string) string {
	if status == Skipped && v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func moneyOrDash(v float64, status string) string {
	if status == Skipped && v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func capacityText(c Ranked) string {
	switch {
	case c.Capacity == nil:
		return "-"
	case c.AtLeast:
		return ">= " + num(c.Capacity.Center)
	case c.BelowFirst:
		return fmt.Sprintf("< %d (first step)", c.FirstStep)
	case c.NotEstablished:
		return fmt.Sprintf("not established (0-%s)", num(c.Capacity.Hi))
	}
	hi := num(c.Capacity.Hi)
	if c.HiOpen {
		hi = ">=" + hi // the top of the interval was not measured
	}
	return fmt.Sprintf("%s (%s-%s)", num(c.Capacity.Center), num(c.Capacity.Lo), hi)
}

func targetText(c Ranked) string {
	if c.TargetVerdict == "" {
		return "-"
	}
	return string(c.TargetVerdict)
}

func costText(c Ranked) string {
	iv := c.USDPerSessionHour
	switch {
	case iv == nil:
		return "-"
	case c.AtLeast:
		return "<= " + fmt.Sprintf("%.2f", iv.Center)
	}
	return fmt.Sprintf("%.2f (%s-%s)", iv.Center, money(iv.Lo), money(iv.Hi))
}

func money(v float64) string {
	if v > 1e300 {
		return "inf"
	}
	return fmt.Sprintf("%.2f", v)
}

func tokensText(c Ranked) string {
	if c.USDPerMillionTokens == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *c.USDPerMillionTokens)
}

func minutesText(c Ranked) string {
	if c.Steps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", c.ModelledMin)
}

func verdictText(c Ranked) string {
	w := statusWords[c.Status]
	if len(c.TooCloseWith) > 0 {
		w += "; too close to call with " + ranks(c.TooCloseWith)
	}
	return w
}

// HTML is the result as one self-contained page: inline CSS, no script,
// nothing fetched.
func (r Result) HTML() []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := html.EscapeString
	w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	w("<title>headroom recommend: %s</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", e(r.Space), pageCSS)
	w("<header>\n<h1>headroom recommend: %s</h1>\n<p class=\"sub\">%s</p>\n</header>\n", e(r.Space), e(r.Headline()))
	w("<p class=\"barline\"><strong>Target:</strong> %d concurrent sessions. <strong>The %s.</strong> ", r.Target, e(r.BarLine()))
	w("Every candidate was simulated on the virtual clock with the adaptive sweep and judged by the same verdict, interval and capacity code as a real run; the figures are the model's, to be verified in a GPU window. ")
	w("Candidates that hold the target are ranked by $ per session-hour; two neighbours whose cost intervals overlap are <em>too close to call</em>.</p>\n")
	w("<div class=\"scroll\"><table>\n<thead><tr><th>rank</th><th class=\"l\">candidate</th><th>GPUs</th><th>$/hour</th><th>capacity (95%% CI)</th><th>target</th><th>$/session-hour (95%% CI)</th><th>$/M tokens</th><th>steps</th><th>modelled min</th><th class=\"l\">verdict</th></tr></thead>\n<tbody>\n")
	for _, c := range r.Candidates {
		w("<tr><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\"><span class=\"badge s-%s\">%s</span>",
			rankText(c), settingsHTML(c), intOrDash(c.GPUs, c.Status), moneyOrDash(c.USDPerHour, c.Status), e(capacityText(c)),
			e(targetText(c)), e(costText(c)), tokensText(c), intOrDash(c.Steps, c.Status), minutesText(c), c.Status, e(statusWords[c.Status]))
		if len(c.TooCloseWith) > 0 {
			w(" <span class=\"badge s-close\">≈ too close to call with %s</span>", e(ranks(c.TooCloseWith)))
		}
		if c.Reason != "" && c.Status != Holds { // a ranked one's reason is its badge
			w("<div class=\"note\">%s</div>", e(c.Reason))
		}
		w("</td></tr>\n")
	}
	w("</tbody>\n</table></div>\n")
	w("<p class=\"note\"><em>modelled min</em> is the modelled time the run took to its last step: about the GPU window a real sweep of the candidate needs, rollout aside. Each candidate's run directory holds its full report.</p>\n")
	w("<footer>headroom recommend · %s · base %s</footer>\n</main>\n</body>\n</html>\n", e(r.Space), e(r.Base))
	return []byte(b.String())
}

func settingsHTML(c Ranked) string {
	var parts []string
	for _, s := range c.Settings {
		parts = append(parts, fmt.Sprintf("%s=<code>%s</code>", html.EscapeString(s.Axis), html.EscapeString(s.Value)))
	}
	return fmt.Sprintf("#%d ", c.Index) + strings.Join(parts, " ")
}

// pageCSS styles the page as headroom's reports are styled: readable from
// 700 px to 1280 px wide, printable, no web fonts.
const pageCSS = `
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: #1f2328; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif;
  -webkit-print-color-adjust: exact; print-color-adjust: exact; }
main { max-width: 1280px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 28px; margin: 0 0 4px; line-height: 1.2; overflow-wrap: anywhere; }
.sub { color: #424a53; margin: 0 0 18px; }
.barline { background: #f6f8fa; border-left: 5px solid #1a7f37; padding: 8px 12px; margin: 0 0 12px; }
.scroll { overflow-x: auto; margin: 6px 0; }
table { border-collapse: collapse; width: 100%; font-size: 15px; }
th, td { border: 1px solid #d0d7de; padding: 5px 8px; text-align: right; vertical-align: top; }
th { background: #eaeef2; text-align: center; }
td { white-space: nowrap; }
td.l, th.l { text-align: left; white-space: normal; }
tr { break-inside: avoid; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 12px; font-weight: 700; white-space: nowrap; border: 1px solid; }
.s-holds { background: #dafbe1; color: #0f5323; border-color: #1a7f37; }
.s-close, .s-needs_gpu_window { background: #fff8c5; color: #6b4200; border-color: #9a6700; }
.s-does_not_hold, .s-error { background: #ffebe9; color: #8c0b1f; border-color: #cf222e; }
.s-skipped { background: #eaeef2; color: #32383f; border-color: #6e7781; }
.note { color: #424a53; font-size: 14px; overflow-wrap: anywhere; }
code { font-size: 14px; background: #f6f8fa; padding: 0 4px; border-radius: 4px; }
footer { margin-top: 36px; color: #57606a; font-size: 13px; }
@media print { main { max-width: none; padding: 0; } body { font-size: 11pt; } }
`
