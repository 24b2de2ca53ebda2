package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/headroom-bench/headroom/internal/sweep"
	"github.com/headroom-bench/headroom/internal/verdict"
)

// pageCSS styles every page: readable from 700 px to 1280 px wide,
// printable, no web fonts. Tables scroll sideways inside their box when a
// narrow window cannot hold them; the page itself never does.
const pageCSS = `
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: #1f2328; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Liberation Sans", sans-serif;
  -webkit-print-color-adjust: exact; print-color-adjust: exact; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 30px; margin: 0 0 4px; line-height: 1.2; overflow-wrap: anywhere; }
h2 { font-size: 22px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid #d0d7de; }
h3 { font-size: 18px; margin: 0 0 4px; }
.sub { color: #424a53; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px; margin: 8px 0 14px; }
.card { border: 1px solid #8c959f; border-radius: 8px; padding: 10px 14px; background: #f6f8fa; min-width: 0; }
.card .k { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: #424a53; font-weight: 600; }
.card .v { font-size: 26px; font-weight: 700; line-height: 1.25; overflow-wrap: anywhere; }
.card .badge { white-space: normal; }
.card .d { font-size: 14px; color: #424a53; }
.barline { background: #f6f8fa; border-left: 5px solid #1a7f37; padding: 8px 12px; margin: 0 0 8px; }
figure { margin: 22px 0 0; break-inside: avoid; page-break-inside: avoid; min-width: 0; }
figure .chart { overflow-x: auto; }
figure .chart.narrow { display: none; }
figure svg { display: block; width: 100%; height: auto; border: 1px solid #d0d7de; border-radius: 6px; background: #fff; }
figcaption { font-size: 15px; color: #424a53; margin-top: 6px; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 0 18px; }
.scroll { overflow-x: auto; margin: 6px 0; }
table { border-collapse: collapse; width: 100%; font-size: 15px; margin: 0; }
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
.warn li { margin: 2px 0; overflow-wrap: anywhere; }
.note { color: #424a53; font-size: 15px; }
dl.fields { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 18px; margin: 8px 0; }
dl.fields dt { font-weight: 600; color: #424a53; }
dl.fields dd { margin: 0; overflow-wrap: anywhere; }
code { font-size: 14px; background: #f6f8fa; padding: 0 4px; border-radius: 4px; overflow-wrap: anywhere; }
footer { margin-top: 36px; color: #57606a; font-size: 13px; }
@media (max-width: 760px) {
  main { padding: 16px 12px 40px; }
  h1 { font-size: 24px; }
  h2 { font-size: 20px; }
  .card .v { font-size: 22px; }
  .pair { grid-template-columns: minmax(0, 1fr); }
  figure .chart.wide { display: none; }
  figure .chart.narrow { display: block; }
  table { font-size: 14px; }
  dl.fields { grid-template-columns: minmax(0, 1fr); gap: 0; }
  dl.fields dd { margin-bottom: 6px; }
}
@media print {
  main { max-width: none; padding: 0; }
  body { font-size: 11pt; }
  h2 { break-after: avoid; }
  figure .chart.wide { display: block; }
  figure .chart.narrow { display: none; }
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
func HTML(r Run) []byte { return page(r, runFigures(r)) }

func writeFigure(b *strings.Builder, f figure) {
	fmt.Fprintf(b, "<figure id=\"%s\">\n<h3>%s</h3>\n", f.id, esc(f.title))
	if f.narrow == "" {
		fmt.Fprintf(b, "<div class=\"chart\">%s</div>", f.svg)
	} else {
		fmt.Fprintf(b, "<div class=\"chart wide\">%s</div><div class=\"chart narrow\">%s</div>", f.svg, f.narrow)
	}
	fmt.Fprintf(b, "<figcaption>%s</figcaption>\n</figure>\n", esc(f.caption))
}

func page(r Run, figs figureSet) []byte {
	s := r.Summary
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	w("<title>headroom report: %s</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", esc(s.Recipe.Name), pageCSS)
	w("<header>\n<h1>headroom report: %s</h1>\n", esc(s.Recipe.Name))
	w(`<p class="sub">%s %s · model <code>%s</code>%s%s</p>`+"\n",
		esc(s.Recipe.Engine), esc(hardwarePhrase(s.Recipe, "×")), esc(s.Recipe.Model),
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
		why := "the capacity interval against the target"
		if s.Target.Blocked != "" {
			why = "blocked: " + esc(s.Target.Blocked)
		}
		card(&b, fmt.Sprintf("Target: %d sessions", s.Target.Sessions), verdictBadge(s.Target.Verdict), why)
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
	if len(s.Mixes) > 0 {
		w("<h2>Capacity on each mix</h2>\n")
		writeMixTable(&b, s, true)
	}

	w("<h2>The bar against concurrent sessions</h2>\n")
	for _, f := range figs.bar {
		writeFigure(&b, f)
	}
	if len(figs.mixes) > 0 {
		w("<h2>Each mix's ladder</h2>\n<p class=\"note\">The same chart for each mix the run swept, side by side, as the reference report sets its light-only figure beside today's mix.</p>\n<div class=\"pair\">\n")
		for _, f := range figs.mixes {
			writeFigure(&b, f)
		}
		w("</div>\n")
	}
	if len(figs.tiers) > 0 {
		w("<h2>Requests in flight per session, by tier</h2>\n")
		if line := tierFinding(r.Tiers); line != "" {
			w(`<p id="tier-finding">%s</p>`+"\n", esc(line))
		}
		for _, f := range figs.tiers {
			writeFigure(&b, f)
		}
		writeTierTable(&b, r.Tiers, true)
	}

	w("<h2>The engine over time</h2>\n")
	for _, f := range figs.engine {
		writeFigure(&b, f)
	}

	// verdicts
	w("<h2>Verdicts per step</h2>\n")
	b.WriteString(`<div class="scroll"><table id="verdicts"><thead><tr><th>sessions</th><th class="l">verdict</th><th>P90 TTFT s (95% interval)</th><th>P90 tokens/s per user (95% interval)</th><th>errors % (95% interval)</th><th>turns</th><th>in flight per session</th><th>cache hit</th><th class="l">why</th></tr></thead><tbody>` + "\n")
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
			st.Sessions, verdictBadge(st.Verdict), esc(fmtCI(st.TTFTP90, 2, 1)), esc(interactivityCell(st)), esc(fmtCI(st.ErrorRate, 2, 100)),
			st.Load.Planned, st.Load.InFlightPerSession, hit, esc(why))
	}
	w("</tbody></table></div>\n")
	if note := derivedNote(s.Steps); note != "" {
		w(`<p class="note" id="derived">%s</p>`+"\n", esc(note))
	}

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
	if ws := warningsOf(r); len(ws) == 0 {
		w(`<p id="warnings">No warnings.</p>` + "\n")
	} else {
		w(`<ul id="warnings" class="plain warn">`)
		for _, x := range ws {
			w("<li>%s</li>", esc(x))
		}
		w("</ul>\n")
	}
	if s.OverContext != nil {
		w(`<p class="note">Turns over the served context:</p><ul id="over-context" class="plain warn">`)
		for _, l := range s.OverContext.Lines() {
			w("<li>%s</li>", esc(l))
		}
		w("</ul>\n")
	}
	w(`<p class="note">What the client saw, kept only to cross-check the server; the verdicts above use the server's numbers.</p>` + "\n")
	w(`<div class="scroll"><table id="crosschecks"><thead><tr><th>sessions</th><th>turns sent</th><th>errors seen by the client</th><th>client P90 TTFT s</th><th>server P90 TTFT s</th><th>prompt tokens served vs planned</th></tr></thead><tbody>` + "\n")
	for _, st := range s.Steps {
		w("<tr><td>%d</td><td>%d</td><td>%d</td><td>%.2f</td><td>%s</td><td>%+.2f%%</td></tr>\n",
			st.Sessions, st.Load.Sent, st.Load.ClientErrors, st.Load.ClientTTFTP90, esc(num2(st.TTFTP90.Center)), st.Load.PromptDrift*100)
	}
	w("</tbody></table></div>\n")

	w("<h2>Parts of each verdict</h2>\n")
	b.WriteString(`<div class="scroll"><table id="parts"><thead><tr><th>sessions</th><th class="l">part</th><th class="l">verdict</th><th>value</th><th>95% interval</th><th>bar</th><th>margin</th><th class="l">source</th></tr></thead><tbody>` + "\n")
	for _, st := range s.Steps {
		for _, p := range st.Parts {
			w("<tr><td>%d</td><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">%s</td></tr>\n",
				st.Sessions, esc(p.Name), verdictBadge(p.Verdict), esc(partValue(p)), esc(partInterval(p)), esc(partBar(p)), esc(partMargin(p)), esc(p.Source))
		}
	}
	w("</tbody></table></div>\n")

	w("<h2>Run</h2>\n<dl class=\"fields\" id=\"run\">\n")
	for _, f := range runFields(s) {
		w("<dt>%s</dt><dd>%s</dd>\n", esc(f.label), f.html)
	}
	w("</dl>\n")
	w("<footer>Written by headroom from summary.json, metrics.jsonl and records.jsonl. This page loads nothing from the network and runs no script.</footer>\n")
	w("</main>\n</body>\n</html>\n")
	return []byte(b.String())
}

// field is one labelled line of the run section.
type field struct {
	label, text, html string
}

// runFields are the run section's fields, each with its label, as text
// (report.md) and HTML.
func runFields(s Summary) []field {
	var out []field
	add := func(label, text string, code bool) {
		h := esc(text)
		if code {
			h = "<code>" + h + "</code>"
		}
		out = append(out, field{label, text, h})
	}
	add("Stopped", orDash(s.StopReason), false)
	pf := fmt.Sprintf("idle %v after %.0f s", s.PostFlight.Idle, s.PostFlight.WaitedS)
	if s.PostFlight.Detail != "" {
		pf += " (" + s.PostFlight.Detail + ")"
	}
	add("Post-flight", pf, false)
	add("Started", orDash(s.Started), false)
	add("Wall time", fmt.Sprintf("%.0f s", s.WallS), false)
	add("Time scale", timeScaleField(s.TimeScale), false)
	add("Endpoint", orDash(s.Recipe.Endpoint), true)
	add("Model", orDash(s.Recipe.Model), true)
	add("Run directory", orDash(s.RunDir), true)
	for _, p := range s.Phases {
		d := p.Status + fmt.Sprintf(" in %.1f s", p.TookS)
		if p.Detail != "" {
			d += ": " + p.Detail
		}
		add("Phase: "+p.Name, d, false)
	}
	for _, k := range sortedKeys(s.Versions) {
		add("Version: "+k, s.Versions[k], true)
	}
	if s.Error != "" {
		add("Error", s.Error, false)
	}
	return out
}

// writeMixTable is the capacity of each mix a run swept, as HTML or Markdown.
func writeMixTable(b *strings.Builder, s Summary, html bool) {
	type row struct {
		label string
		c     sweep.Capacity
		steps []Step
		t     *sweep.TargetVerdict
	}
	rows := []row{{s.mainMixLabel(), s.Capacity, s.Steps, s.Target}}
	for _, m := range s.Mixes {
		rows = append(rows, row{m.Label(), m.Capacity, m.Steps, m.Target})
	}
	head := []string{"mix", "capacity at the bar (95% interval)", "limited by", "target", "steps run"}
	if html {
		b.WriteString(`<div class="scroll"><table id="mixes"><thead><tr>`)
		for i, h := range head {
			cls := ""
			if i == 0 || i == 2 {
				cls = ` class="l"`
			}
			fmt.Fprintf(b, "<th%s>%s</th>", cls, esc(h))
		}
		b.WriteString("</tr></thead><tbody>\n")
	} else {
		b.WriteString("| " + strings.Join(head, " | ") + " |\n|---|---|---|---|---|\n")
	}
	for _, r := range rows {
		capV, capD := capacityWords(r.c)
		target := "–"
		if r.t != nil {
			target = fmt.Sprintf("%d sessions: %s", r.t.Sessions, verdictWords(r.t.Verdict))
		}
		var ss []string
		for _, st := range r.steps {
			ss = append(ss, fmt.Sprint(st.Sessions))
		}
		capCell := capV + " (" + capD + ")"
		if capV == "no data" { // its detail is the note, already escaped for a card
			capCell = "not measured: " + strings.TrimSuffix(r.c.Note, ".")
		}
		cells := []string{r.label, capCell, limitedBy(r.c.LimitedBy), target, strings.Join(ss, ", ")}
		if html {
			fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td></tr>\n", esc(cells[0]), esc(cells[1]), esc(cells[2]), esc(cells[3]), esc(cells[4]))
		} else {
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	if html {
		b.WriteString("</tbody></table></div>\n")
	}
}

// writeTierTable is each step's requests in flight per session by tier.
func writeTierTable(b *strings.Builder, ts []StepTiers, html bool) {
	names := tierNames(ts)
	head := []string{"sessions"}
	for _, n := range names {
		head = append(head, n+" sessions", n+" requests (subagent)", n+" in flight per session")
	}
	if html {
		b.WriteString(`<div class="scroll"><table id="tiers"><thead><tr>`)
		for _, h := range head {
			fmt.Fprintf(b, "<th>%s</th>", esc(h))
		}
		b.WriteString("</tr></thead><tbody>\n")
	} else {
		b.WriteString("| " + strings.Join(head, " | ") + " |\n|" + strings.Repeat("---|", len(head)) + "\n")
	}
	for _, st := range ts {
		cells := []string{fmt.Sprint(st.Sessions)}
		for _, n := range names {
			c := []string{"0", "0", "–"}
			for _, t := range st.Tiers {
				if t.Tier == n {
					c = []string{fmt.Sprint(t.Sessions), fmt.Sprintf("%d (%d)", t.Requests, t.SubagentRequests), num2(t.InFlightPerSession)}
				}
			}
			cells = append(cells, c...)
		}
		if html {
			b.WriteString("<tr>")
			for _, c := range cells {
				fmt.Fprintf(b, "<td>%s</td>", esc(c))
			}
			b.WriteString("</tr>\n")
		} else {
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	if html {
		b.WriteString("</tbody></table></div>\n")
	}
}

func card(b *strings.Builder, key, value, detail string) {
	fmt.Fprintf(b, `<div class="card"><div class="k">%s</div><div class="v">%s</div><div class="d">%s</div></div>`+"\n", esc(key), value, detail)
}

// capacityWords is the capacity headline (HTML) and its interval line.
func capacityWords(c sweep.Capacity) (string, string) {
	switch {
	case c.AtLeast && len(c.TooClose) > 0:
		return fmt.Sprintf("≥ %s sessions", num1(c.Sessions)), esc(c.Note)
	case c.AtLeast:
		return fmt.Sprintf("≥ %s sessions", num1(c.Sessions)), "every step passed; the ceiling was not reached"
	case c.Sessions == 0 && strings.HasPrefix(c.LimitedBy, "no data"):
		return "no data", esc(c.Note + " " + c.LimitedBy)
	case c.BelowFirst && c.NotEstablished:
		return "below the first step", esc(c.Note)
	case c.BelowFirst:
		return "below the first step", fmt.Sprintf("95%% interval %s–%s", num1(c.Lo), hiWords(c))
	case c.NotEstablished:
		return "not established", esc(c.Note)
	}
	return fmt.Sprintf("%s sessions", num1(c.Sessions)), fmt.Sprintf("95%% interval %s–%s", num1(c.Lo), hiWords(c)) + esc(c.BracketWords())
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
	if c.USDPerHour == 0 {
		return "not priced", "--gpus and --usd-per-gpu-hour give the GPUs and the price of a GPU-hour"
	}
	if c.USDPerSessionHour == nil {
		d := fmt.Sprintf("no step held the bar; the recipe costs $%.2f/hour", c.USDPerHour)
		if c.USDPerSessionHourAtLeast != nil {
			d = fmt.Sprintf("no step held the bar: at least $%.2f, with no upper end; the recipe costs $%.2f/hour", *c.USDPerSessionHourAtLeast, c.USDPerHour)
		}
		return "n/a", d
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
	if c.USDPerHour == 0 {
		return "not priced", "no price per GPU-hour was given"
	}
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
