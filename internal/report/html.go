package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// pageCSS styles every page: readable at 1280 px, printable, no web fonts.
const pageCSS = `
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: #1f2328; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif;
  -webkit-print-color-adjust: exact; print-color-adjust: exact; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 30px; margin: 0 0 4px; line-height: 1.2; }
h2 { font-size: 22px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid #d0d7de; }
h3 { font-size: 18px; margin: 0 0 4px; }
.sub { color: #424a53; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: 1.35fr 1.1fr 1.25fr 1fr 1fr; gap: 12px; margin: 8px 0 14px; }
.card { border: 1px solid #8c959f; border-radius: 8px; padding: 10px 14px; background: #f6f8fa; }
.card .k { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: #424a53; font-weight: 600; }
.card .v { font-size: 26px; font-weight: 700; line-height: 1.25; }
.card .d { font-size: 14px; color: #424a53; }
.barline { background: #f6f8fa; border-left: 5px solid #1a7f37; padding: 8px 12px; margin: 0 0 8px; }
figure { margin: 22px 0 0; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; width: 100%; height: auto; border: 1px solid #d0d7de; border-radius: 6px; background: #fff; }
figcaption { font-size: 15px; color: #424a53; margin-top: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 15px; margin: 6px 0; }
th, td { border: 1px solid #d0d7de; padding: 5px 8px; text-align: right; vertical-align: top; }
th { background: #eaeef2; text-align: center; }
td.l, th.l { text-align: left; }
tr { break-inside: avoid; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 12px; font-weight: 700; white-space: nowrap; border: 1px solid; }
.v-pass { background: #dafbe1; color: #0f5323; border-color: #1a7f37; }
.v-too_close { background: #fff8c5; color: #6b4200; border-color: #9a6700; }
.v-fail { background: #ffebe9; color: #8c0b1f; border-color: #cf222e; }
.v-no_data { background: #eaeef2; color: #32383f; border-color: #6e7781; }
.v-none { background: #fff; color: #424a53; border-color: #8c959f; }
ul.plain { padding-left: 22px; }
.warn li { margin: 2px 0; }
.note { color: #424a53; font-size: 15px; }
code { font-size: 14px; background: #f6f8fa; padding: 0 4px; border-radius: 4px; }
footer { margin-top: 36px; color: #57606a; font-size: 13px; }
@media print {
  main { max-width: none; padding: 0; }
  body { font-size: 11pt; }
  h2 { break-after: avoid; }
}
`

// verdictBadge is a verdict as a coloured badge that also says it in words
// with a symbol, so it reads in grey print and to colour-blind readers.
func verdictBadge(v verdict.Verdict) string {
	sym := map[verdict.Verdict]string{verdict.Pass: "✓", verdict.TooClose: "≈", verdict.Fail: "✗", verdict.NoData: "?"}[v]
	if sym == "" {
		return fmt.Sprintf(`<span class="badge v-none">%s</span>`, esc(string(v)))
	}
	return fmt.Sprintf(`<span class="badge v-%s">%s %s</span>`, v, sym, esc(verdictWords(v)))
}

// HTML renders report.html: one self-contained page (inline SVG and CSS, no
// script, nothing fetched) with the headline, the charts and the tables.
func HTML(r Run) []byte {
	s := r.Summary
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	w("<title>headroom report: %s</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", esc(s.Recipe.Name), pageCSS)
	w("<header>\n<h1>headroom report: %s</h1>\n", esc(s.Recipe.Name))
	w(`<p class="sub">%s on %d node(s) × %d GPU(s) at $%.2f per GPU-hour · model <code>%s</code>%s%s</p>`+"\n",
		esc(s.Recipe.Engine), s.Recipe.Nodes, s.Recipe.GPUsPerNode, s.Recipe.USDPerGPUHour, esc(s.Recipe.Model),
		optional(" · started ", s.Started), optional(" · mix: ", mixWords(s.Mix)))
	w("</header>\n")
	if r.Partial {
		w(`<p class="barline" style="border-color:#cf222e"><strong>Partial report:</strong> summary.json is missing, so this page is rebuilt from steps.jsonl; cost per session-hour and post-flight are not known.</p>` + "\n")
	}

	// headline
	w(`<section class="cards" aria-label="headline">` + "\n")
	capV, capD := capacityWords(s.Capacity)
	card(&b, "Capacity at the bar", capV, capD)
	card(&b, "Limited by", esc(limitedBy(s.Capacity.LimitedBy)), limitWords(s.Capacity))
	if s.Target != nil {
		card(&b, fmt.Sprintf("Target: %d sessions", s.Target.Sessions), verdictBadge(s.Target.Verdict), "the capacity interval against the target")
	} else {
		card(&b, "Target", `<span class="badge v-none">none set</span>`, "no sweep.target in the run file")
	}
	sh, shD := sessionHourWords(s.Cost)
	card(&b, "$ per session-hour", sh, shD)
	mt, mtD := millionTokenWords(s.Cost)
	card(&b, "$ per million tokens", mt, mtD)
	w("</section>\n")
	w(`<p class="barline"><strong>The bar:</strong> P90 TTFT ≤ %s s; P90 interactivity ≥ %s tokens/s per user; errors &lt; %s%%. `,
		num(s.Bar.TTFTP90), num(s.Bar.InteractivityP90), num(s.Bar.ErrorRate*100))
	w("Every value is judged from the server's own metrics over the step's judged time, with a 95%% bootstrap interval; an interval that touches the bar reads <em>too close</em>.")
	if s.StopReason != "" {
		w(" <strong>Stopped:</strong> %s.", esc(s.StopReason))
	}
	if s.Capacity.Note != "" {
		w(" <strong>Note:</strong> %s.", esc(strings.TrimSuffix(s.Capacity.Note, ".")))
	}
	w("</p>\n")

	// the bar's parts against sessions
	w("<h2>The bar against concurrent sessions</h2>\n")
	captions := map[string]string{
		"ttft":          "Lower is better. Green band: values within the bar. Each mark is a step's P90 from the server's histogram, shaped and coloured by this part's verdict; the whisker is its 95% interval; ▲ is where the line leaves the bar; the blue dashed line and shade are the run's capacity and its interval.",
		"interactivity": "Higher is better: the tokens per second per user that 90% of streams beat. Green band: values within the bar.",
		"errors":        "Share of turns that failed, counting the turns a failed conversation never sent. Green band: below the bar.",
	}
	for _, m := range stepMetrics(s) {
		w(`<figure id="chart-%s">`+"\n<h3>%s against concurrent sessions</h3>\n%s<figcaption>%s</figcaption>\n</figure>\n",
			m.id, esc(m.title), stepChart(s, m), esc(captions[m.id]))
	}

	w("<h2>The engine over time</h2>\n")
	b.WriteString(`<figure id="chart-kv">` + "\n<h3>KV cache use over time</h3>\n" + kvChart(r) +
		"<figcaption>Share of the KV cache in use at each scrape. A cache that stays full means requests queue or get preempted: the sweep stops there.</figcaption>\n</figure>\n")
	b.WriteString(`<figure id="chart-queue">` + "\n<h3>Requests running and waiting over time</h3>\n" + queueChart(r) +
		"<figcaption>Requests the engine is running (solid) and holding in its queue (dashed). A waiting line that keeps growing within a step means the step is past what the engine can serve.</figcaption>\n</figure>\n")

	// verdicts
	w("<h2>Verdicts per step</h2>\n")
	b.WriteString(`<table id="verdicts"><thead><tr><th>sessions</th><th class="l">verdict</th><th>P90 TTFT s (95% interval)</th><th>P90 tokens/s per user (95% interval)</th><th>errors % (95% interval)</th><th>turns</th><th>in flight per session</th><th>cache hit</th><th class="l">why</th></tr></thead><tbody>` + "\n")
	for _, st := range s.Steps {
		hit := esc(st.CacheHit())
		why := "within the bar"
		if st.Verdict != verdict.Pass {
			why = strings.TrimPrefix(stepMessage(st), fmt.Sprintf("%d sessions: %s", st.Sessions, verdictWords(st.Verdict)))
			why = strings.Trim(why, " ()")
			if why == "" && len(st.Missing) > 0 {
				why = "missing: " + strings.Join(st.Missing, ", ")
			}
		}
		w("<tr><td>%d</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%.2f</td><td>%s</td><td class=\"l\">%s</td></tr>\n",
			st.Sessions, verdictBadge(st.Verdict), esc(fmtCI(st.TTFTP90, 2, 1)), esc(fmtCI(st.InteractivityP90, 1, 1)), esc(fmtCI(st.ErrorRate, 2, 100)),
			st.Load.Planned, st.Load.InFlightPerSession, hit, esc(why))
	}
	w("</tbody></table>\n")

	w("<h2>Missing signals</h2>\n")
	if len(s.Missing) == 0 {
		w(`<p id="missing">None: every signal the bar wanted was reported by the server.</p>` + "\n")
	} else {
		w(`<p>The bar wanted these signals and the server did not report them; a part without its signal reads <em>no data</em>, never pass.</p><ul id="missing" class="plain">`)
		for _, m := range s.Missing {
			w("<li><code>%s</code></li>", esc(m))
		}
		w("</ul>\n")
	}

	w("<h2>Warnings and client-side cross-checks</h2>\n")
	if s.Error != "" {
		w(`<p id="run-error" class="warn"><b>The run ended in an error:</b> %s</p>`+"\n", esc(s.Error))
	}
	if len(s.Warnings) == 0 {
		w(`<p id="warnings">No warnings.</p>` + "\n")
	} else {
		w(`<ul id="warnings" class="plain warn">`)
		for _, x := range s.Warnings {
			w("<li>%s</li>", esc(x))
		}
		w("</ul>\n")
	}
	w(`<p class="note">What the client saw, kept only to cross-check the server; the verdicts above use the server's numbers.</p>` + "\n")
	w(`<table id="crosschecks"><thead><tr><th>sessions</th><th>turns sent</th><th>errors seen by the client</th><th>client P90 TTFT s</th><th>server P90 TTFT s</th><th>prompt tokens served vs planned</th></tr></thead><tbody>` + "\n")
	for _, st := range s.Steps {
		w("<tr><td>%d</td><td>%d</td><td>%d</td><td>%.2f</td><td>%s</td><td>%+.2f%%</td></tr>\n",
			st.Sessions, st.Load.Sent, st.Load.ClientErrors, st.Load.ClientTTFTP90, esc(num2(st.TTFTP90.Center)), st.Load.PromptDrift*100)
	}
	w("</tbody></table>\n")

	w("<h2>Parts of each verdict</h2>\n")
	b.WriteString(`<table id="parts"><thead><tr><th>sessions</th><th class="l">part</th><th class="l">verdict</th><th>value</th><th>95% interval</th><th>bar</th><th>margin</th><th class="l">source</th></tr></thead><tbody>` + "\n")
	for _, st := range s.Steps {
		for _, p := range st.Parts {
			w("<tr><td>%d</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%s</td><td>%s–%s</td><td>%s</td><td>%s</td><td class=\"l\">%s</td></tr>\n",
				st.Sessions, esc(p.Name), verdictBadge(p.Verdict), num(p.Value.Center), num(p.Value.Lo), num(p.Value.Hi), num(p.Bar), signed(p.Margin), esc(p.Source))
		}
	}
	w("</tbody></table>\n")

	w("<h2>Run</h2>\n<ul class=\"plain\">\n")
	w("<li>stopped: %s</li>\n", esc(orDash(s.StopReason)))
	w("<li>post-flight: idle %v after %.0f s", s.PostFlight.Idle, s.PostFlight.WaitedS)
	if s.PostFlight.Detail != "" {
		w(" (%s)", esc(s.PostFlight.Detail))
	}
	w("</li>\n<li>%.0f s of wall time at time scale %g</li>\n", s.WallS, s.TimeScale)
	w("<li>endpoint: <code>%s</code></li>\n<li>run directory: <code>%s</code></li>\n", esc(s.Recipe.Endpoint), esc(s.RunDir))
	for _, k := range sortedKeys(s.Versions) {
		w("<li>%s: <code>%s</code></li>\n", esc(k), esc(s.Versions[k]))
	}
	w("</ul>\n")
	w("<footer>Written by headroom from summary.json and metrics.jsonl. This page loads nothing from the network and runs no script.</footer>\n")
	w("</main>\n</body>\n</html>\n")
	return []byte(b.String())
}

func card(b *strings.Builder, key, value, detail string) {
	fmt.Fprintf(b, `<div class="card"><div class="k">%s</div><div class="v">%s</div><div class="d">%s</div></div>`+"\n", esc(key), value, detail)
}

// capacityWords is the capacity headline (HTML) and its interval line.
func capacityWords(c sweep.Capacity) (string, string) {
	switch {
	case c.AtLeast:
		return fmt.Sprintf("≥ %s sessions", num1(c.Sessions)), "every step passed; the ceiling was not reached"
	case c.BelowFirst:
		return "below the first step", fmt.Sprintf("95%% interval %s–%s", num1(c.Lo), hiWords(c))
	case c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data"):
		return "no data", esc(c.Note + " " + c.LimitedBy)
	}
	return fmt.Sprintf("%s sessions", num1(c.Sessions)), fmt.Sprintf("95%% interval %s–%s", num1(c.Lo), hiWords(c))
}

func limitWords(c sweep.Capacity) string {
	switch c.LimitedBy {
	case "ttft":
		return "P90 time to first token crossed first"
	case "interactivity":
		return "P90 tokens/s per user crossed first"
	case "errors":
		return "the error rate crossed first"
	case "tool_calls":
		return "tool calls under load failed their schema"
	case "not reached":
		return "no part of the bar was crossed"
	}
	if strings.HasPrefix(c.LimitedBy, "no data") {
		return "the sweep ended on a step without data (" + c.LimitedBy + ")"
	}
	return ""
}

func sessionHourWords(c sweep.Cost) (string, string) {
	if c.USDPerSessionHour == nil {
		return "n/a", fmt.Sprintf("no step held the bar; the recipe costs $%.2f/hour", c.USDPerHour)
	}
	prefix := "$"
	if c.AtMost {
		prefix = "≤ $"
	}
	d := fmt.Sprintf("at $%.2f/hour", c.USDPerHour)
	if c.USDPerSessionHourLo != nil && c.USDPerSessionHourHi != nil && !c.AtMost {
		d = fmt.Sprintf("95%% interval $%.2f–$%.2f; ", *c.USDPerSessionHourLo, *c.USDPerSessionHourHi) + d
	}
	return fmt.Sprintf("%s%.2f", prefix, *c.USDPerSessionHour), d
}

func millionTokenWords(c sweep.Cost) (string, string) {
	if c.USDPerMillionTokens == nil {
		return "n/a", "no step passed"
	}
	return fmt.Sprintf("$%.3f", *c.USDPerMillionTokens), fmt.Sprintf("at the last passing step, %d sessions", c.FromStep)
}

func mixWords(m *Mix) string {
	if m == nil {
		return ""
	}
	if k := m.Kind(); k != MixMixed {
		return k
	}
	return fmt.Sprintf("heavy %g, light %g", m.Heavy, m.Light)
}

func optional(prefix, v string) string {
	if v == "" {
		return ""
	}
	return prefix + esc(v)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func num2(v float64) string {
	if math.IsNaN(v) {
		return "no data"
	}
	return fmt.Sprintf("%.2f", v)
}

func signed(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return num(v)
	}
	return fmt.Sprintf("%+.4g", v)
}
