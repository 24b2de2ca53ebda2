package report

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumPath finds Debian's headless-capable Chromium.
func chromiumPath() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshot renders a page in headless Chromium, 1280 px wide, and decodes
// the PNG. Chromium is kept off the network.
func screenshot(t *testing.T, page string, height int) image.Image {
	t.Helper()
	return screenshotW(t, page, 1280, height)
}

// screenshotW is screenshot at another window width.
func screenshotW(t *testing.T, page string, width, height int) image.Image {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed, so the rendered page cannot be checked: apt-get install -y chromium")
	}
	tmp := t.TempDir()
	shot := filepath.Join(tmp, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--screenshot="+shot,
		"--window-size="+itoa(width)+","+itoa(height), "file://"+page)
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium failed: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v\n%s", err, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if keep := os.Getenv("HEADROOM_KEEP_SCREENSHOTS"); keep != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(filepath.Join(keep, filepath.Base(filepath.Dir(page))+"-"+t.Name()+"-"+itoa(width)+".png"), b, 0o644)
	}
	return img
}

// near reports whether c is within tol of the hex colour on every channel.
func near(c color.Color, hex string, tol int) bool {
	var r0, g0, b0 int
	for i, p := range []*int{&r0, &g0, &b0} {
		v := 0
		for _, ch := range hex[1+2*i : 3+2*i] {
			v *= 16
			switch {
			case ch >= '0' && ch <= '9':
				v += int(ch - '0')
			default:
				v += int(ch-'a') + 10
			}
		}
		*p = v
	}
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y int) bool { return abs(int(x>>8)-y) <= tol }
	return d(r, r0) && d(g, g0) && d(b, b0)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestRenderedReportIsLegible(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed, so the rendered page cannot be checked: apt-get install -y chromium")
	}
	d := synthRun(t, "r0", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, d.File("report.html"), 2000)
	bnd := img.Bounds()
	if bnd.Dx() != 1280 || bnd.Dy() != 2000 {
		t.Fatalf("screenshot is %v, want 1280x2000", bnd.Size())
	}

	// not blank: a fair share of the page is drawn, in many colours
	inked, colours := 0, map[color.RGBA]bool{}
	for y := bnd.Min.Y; y < bnd.Max.Y; y += 2 {
		for x := bnd.Min.X; x < bnd.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 < 235 || g>>8 < 235 || b>>8 < 235 {
				inked++
			}
			if len(colours) < 1000 {
				colours[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}] = true
			}
		}
	}
	if share := float64(inked) / float64(bnd.Dx()*bnd.Dy()/4); share < 0.05 || len(colours) < 30 {
		t.Errorf("the page looks blank: %.1f%% inked, %d colours", share*100, len(colours))
	}

	// the title: dark text in the top-left corner
	dark := 0
	for y := 10; y < 75; y++ {
		for x := 20; x < 700; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 < 90 && g>>8 < 90 && b>>8 < 90 {
				dark++
			}
		}
	}
	if dark < 300 {
		t.Errorf("the title area has %d dark pixels: is the <h1> drawn?", dark)
	}

	// the TTFT chart, the first with a band: its top edge is the first row
	// mostly in the band colour, well across the page, with the bar's line
	// drawn right on it
	bandTop, bandWidth := -1, 0
	for y := 0; y < bnd.Dy() && bandTop < 0; y++ {
		n := 0
		for x := 0; x < bnd.Dx(); x++ {
			if near(img.At(x, y), colBand, 4) {
				n++
			}
		}
		if n >= 300 {
			bandTop, bandWidth = y, n
		}
	}
	if bandTop < 0 {
		t.Fatalf("no row has the bar band's colour %s: the TTFT chart's band is not drawn", colBand)
	}
	t.Logf("TTFT band starts at y=%d, %d px wide", bandTop, bandWidth)
	if bandTop < 300 || bandTop > 1000 {
		t.Errorf("the TTFT band starts at y=%d, want it in the first screen below the headline", bandTop)
	}
	if bandWidth < 500 {
		t.Errorf("the band is %d px wide at 1280 px: the chart is too small to read", bandWidth)
	}
	// 5.3 s of a 0-10 s axis: the band (below the bar) is about half the plot tall
	bandRows := 0
	for y := bandTop; y < bandTop+400 && y < bnd.Dy(); y++ {
		if near(img.At(40+bnd.Dx()/8, y), colBand, 4) {
			bandRows++
		}
	}
	if bandRows < 100 {
		t.Errorf("the band is %d px tall at x=%d: want the region below the bar filled", bandRows, 40+bnd.Dx()/8)
	}
	line := 0
	for y := max(0, bandTop-6); y < bandTop+2; y++ {
		for x := 0; x < bnd.Dx(); x++ {
			if near(img.At(x, y), colBarLine, 40) {
				line++
			}
		}
	}
	if line < 300 {
		t.Errorf("%d pixels of the bar's line (%s) at the band's top edge, want a line across the chart", line, colBarLine)
	}
	// the failing steps' red squares sit above the bar in the same chart
	red := 0
	for y := max(0, bandTop-250); y < bandTop; y++ {
		for x := 0; x < bnd.Dx(); x++ {
			if near(img.At(x, y), colFail, 30) {
				red++
			}
		}
	}
	if red < 60 {
		t.Errorf("%d red pixels above the TTFT bar: the failing steps' markers are not drawn", red)
	}
}

func TestRenderedComparisonIsLegible(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed, so the rendered page cannot be checked: apt-get install -y chromium")
	}
	dirs := []*Dir{
		synthRun(t, "today", 2, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true),
		synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true),
	}
	_, page, err := Compare(dirs)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "compare.html")
	if err := os.WriteFile(p, page, 0o644); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, p, 4000) // the bars come after the table and the three overlays
	// the bars of both charts: long runs of the curve colour
	rows := 0
	for y := 0; y < img.Bounds().Dy(); y++ {
		n := 0
		for x := 0; x < img.Bounds().Dx(); x++ {
			if near(img.At(x, y), colCurve, 6) {
				n++
			}
		}
		if n >= 100 {
			rows++
		}
	}
	// 2 charts x 2 recipes x 26 px bars
	if rows < 4*20 {
		t.Errorf("%d rows carry a bar of the comparison charts, want about %d", rows, 4*26)
	}
}

// scrollWidth loads a copy of the page in headless Chromium at the given
// window width, with a script added to the copy (the page has none) that
// reports how wide the document lays out and which elements stick out of
// the window or spill out of their own box.
func scrollWidth(t *testing.T, page string, width int) (int, string) {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed, so the page's width cannot be checked: apt-get install -y chromium")
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const probe = `<script>(function(){var w=document.documentElement.clientWidth,bad=[];` +
		`document.querySelectorAll("main *").forEach(function(e){var r=e.getBoundingClientRect();` +
		`var spills=e instanceof HTMLElement&&e.clientWidth>0&&e.scrollWidth>e.clientWidth+1&&getComputedStyle(e).overflowX==="visible";` +
		`if((r.right>w+0.5||spills)&&!e.closest(".scroll,.chart")){bad.push(e.tagName+(e.id?"#"+e.id:"")+(e.className&&e.className.baseVal===undefined?"."+e.className:""))}});` +
		`document.body.setAttribute("data-probe",document.documentElement.scrollWidth+"|"+bad.slice(0,8).join(","));})();</script></body>`
	tmp := t.TempDir()
	copyPath := filepath.Join(tmp, "page.html")
	if err := os.WriteFile(copyPath, []byte(strings.Replace(string(b), "</body>", probe, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--window-size="+itoa(width)+",1000", "--dump-dom", "file://"+copyPath)
	cmd.Env = append(os.Environ(), "HOME="+tmp)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium failed: %v", err)
	}
	m := regexp.MustCompile(`data-probe="([0-9]+)\|([^"]*)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the probe did not run: %.300s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, string(m[2])
}

// TestPagesFit700Pixels: at 700 px the headline's five cards, the tables
// and the run section's long paths pushed report.html past the window;
// nothing but a table or chart in its own scroll box may be wider now.
func TestPagesFit700Pixels(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed, so the page's width cannot be checked: apt-get install -y chromium")
	}
	// the default simulated run's summary, with its cost per million tokens
	s := summaryOf(simLadder(), 8)
	s.Recipe.Name = "a-recipe-with-a-rather-long-name-for-a-narrow-window"
	tokens := 0.31
	s.Cost.USDPerMillionTokens, s.Cost.FromStep = &tokens, 8
	d, err := NewDir(t.TempDir(), s.Recipe.Name, fixedTime)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteJSON("summary.json", s); err != nil {
		t.Fatal(err)
	}
	if err := Render(d); err != nil {
		t.Fatal(err)
	}
	_, cmpPage, err := Compare([]*Dir{d, synthRun(t, "bigger", 4, Mix{Heavy: 0.5, Light: 0.5}, ladder, ladderCapacity, 15, true)})
	if err != nil {
		t.Fatal(err)
	}
	cmp := filepath.Join(t.TempDir(), "compare.html")
	if err := os.WriteFile(cmp, cmpPage, 0o644); err != nil {
		t.Fatal(err)
	}
	// the charts are drawn again for a narrow window, where the wide
	// drawing's text would shrink past reading
	for _, p := range []string{read(t, d.File("report.html")), string(cmpPage)} {
		if n := strings.Count(p, `<div class="chart narrow"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 760 `); n < 2 {
			t.Errorf("%d charts drawn 760 wide for a narrow window, want at least the TTFT and interactivity charts", n)
		}
	}
	for _, p := range []string{d.File("report.html"), cmp} {
		w, bad := scrollWidth(t, p, 700)
		if w > 700 || bad != "" {
			t.Errorf("%s lays out %d px wide in a 700 px window; sticking out: %s", filepath.Base(p), w, bad)
		}
	}
	if keep := os.Getenv("HEADROOM_KEEP_SCREENSHOTS"); keep != "" {
		screenshotW(t, d.File("report.html"), 700, 3000)
	}
}
