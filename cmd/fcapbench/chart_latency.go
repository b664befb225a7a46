package main

import (
	"image/color"
	"math"
)

// curve is one series of a latency chart: latency (microseconds) at each
// percentile.
type curve struct {
	label string
	col   color.RGBA
	pts   [][2]float64 // (percentile, microseconds), percentile ascending
	note  string       // after the label in the legend
}

const (
	latW, latPlotH                     = 1000, 520
	latLeft, latRight, latTop, latBott = 84, 24, 86, 56
	latMaxPct                          = 99.99 // the x axis ends here
	latMinPct                          = 10    // curves start here (the minimum says little)
	legendRowH                         = 18
)

// pctX places a percentile on the x axis: log10(100/(100-p)), so 90, 99,
// 99.9 and 99.99 are evenly spaced, as the tail deserves.
func pctX(p float64) float64 { return math.Log10(100 / (100 - p)) }

// drawLatency draws latency-by-percentile curves on log-log axes, with
// the legend in two columns under the plot, and writes the PNG. goalUS >
// 0 draws a dashed line at that latency.
func drawLatency(path, title, subtitle string, curves []curve, goalUS float64) error {
	x0, x1 := latLeft, latW-latRight
	// Legend in two columns when every entry fits in half the width.
	cols, colW := 2, (x1-x0)/2
	for _, cv := range curves {
		if 32+textWidth(cv.label+"  "+cv.note, 1)+12 > colW {
			cols, colW = 1, x1-x0
		}
	}
	rows := (len(curves) + cols - 1) / cols
	c := newCanvas(latW, latTop+latPlotH+latBott+rows*legendRowH+12)
	c.text(latLeft, 12, title, ink, 2)
	for i, line := range wrapText(subtitle, (latW-latLeft-latRight)/glyphW, 2) {
		c.text(latLeft, 12+2*glyphH+6+i*(glyphH+3), line, faint, 1)
	}
	y0, y1 := latTop, latTop+latPlotH // y0 top
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cv := range curves {
		for _, pt := range cv.pts {
			if pt[0] < latMinPct || pt[0] > latMaxPct || pt[1] <= 0 {
				continue
			}
			lo, hi = math.Min(lo, pt[1]), math.Max(hi, pt[1])
		}
	}
	if goalUS > 0 {
		lo, hi = math.Min(lo, goalUS), math.Max(hi, goalUS)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	dLo, dHi := math.Floor(math.Log10(math.Max(lo, 1))), math.Ceil(math.Log10(math.Max(hi, 1)))
	if dHi <= dLo {
		dHi = dLo + 1
	}
	tMax := pctX(latMaxPct)
	px := func(p float64) int { return x0 + int(float64(x1-x0)*pctX(p)/tMax) }
	py := func(us float64) int {
		f := (math.Log10(math.Max(us, 1)) - dLo) / (dHi - dLo)
		return y1 - int(float64(y1-y0)*f)
	}
	// Grid: decades, with 2x and 5x between, labelled when there are few
	// decades.
	for d := dLo; d <= dHi; d++ {
		v := math.Pow(10, d)
		y := py(v)
		c.line(x0, y, x1, y, gridColor, 1)
		lbl := fmtLatency(v)
		c.text(x0-8-textWidth(lbl, 1), y-glyphH/2, lbl, faint, 1)
		if d == dHi {
			break
		}
		for _, m := range []float64{2, 5} {
			ym := py(m * v)
			c.dashedH(x0, x1, ym, gridColor)
			if dHi-dLo <= 3 {
				lbl := fmtLatency(m * v)
				c.text(x0-8-textWidth(lbl, 1), ym-glyphH/2, lbl, faint, 1)
			}
		}
	}
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99} {
		x := px(p)
		c.line(x, y0, x, y1, gridColor, 1)
		lbl := fmtPct(p)
		c.text(x-textWidth(lbl, 1)/2, y1+6, lbl, faint, 1)
	}
	c.text((x0+x1)/2-textWidth("percentile (log scale of 1/(100-p))", 1)/2, y1+24, "percentile (log scale of 1/(100-p))", ink, 1)
	c.textUp(12, (y0+y1)/2+textWidth("latency", 1)/2, "latency", ink)
	c.line(x0, y0, x0, y1, ink, 1)
	c.line(x0, y1, x1, y1, ink, 1)
	if goalUS > 0 {
		y := py(goalUS)
		for x := x0; x < x1; x += 12 {
			c.line(x, y, min(x+6, x1), y, ink, 1)
		}
		lbl := "goal: p99 < " + fmtLatency(goalUS)
		c.text(x1-textWidth(lbl, 1)-4, y-glyphH-3, lbl, ink, 1)
	}
	for _, cv := range curves {
		var lx, ly int
		first := true
		for _, pt := range cv.pts {
			if pt[0] < latMinPct {
				continue
			}
			if pt[0] > latMaxPct {
				break
			}
			x, y := px(pt[0]), py(pt[1])
			if !first {
				c.line(lx, ly, x, y, cv.col, 2)
			}
			lx, ly, first = x, y, false
		}
	}
	// Legend under the axis title.
	for i, cv := range curves {
		x := x0 + (i%cols)*colW
		y := y1 + latBott + (i/cols)*legendRowH
		c.rect(x, y+5, x+24, y+9, cv.col)
		c.text(x+32, y, cv.label+"  "+cv.note, ink, 1)
	}
	return c.save(path)
}

// fmtLatency prints microseconds for an axis or a table: 250us, 1.5ms, 2s.
func fmtLatency(us float64) string {
	switch {
	case us >= 1e6:
		return trimZero(fmtFloat(us/1e6, 2)) + "s"
	case us >= 1e3:
		return trimZero(fmtFloat(us/1e3, 2)) + "ms"
	}
	return trimZero(fmtFloat(us, 1)) + "us"
}

func fmtPct(p float64) string {
	if p == 0 {
		return "0"
	}
	return trimZero(fmtFloat(p, 3))
}
