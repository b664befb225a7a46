package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
)

// bar is one horizontal bar: a series and its value.
type bar struct {
	label string
	value float64
	col   color.RGBA
	note  string // printed after the value
}

// barPanel is one group of bars sharing a scale.
type barPanel struct {
	title string
	bars  []bar
}

const (
	barWidth  = 1000 // image width
	barH      = 20
	barGap    = 8
	barMargin = 16
)

// drawBars draws panels of horizontal bars under a title, each panel on
// its own scale from zero, and writes the PNG.
func drawBars(path, title, subtitle string, panels []barPanel) error {
	labelW := 0
	for _, p := range panels {
		for _, b := range p.bars {
			labelW = max(labelW, textWidth(b.label, 1))
		}
	}
	left := barMargin + labelW + 10
	right := barWidth - 170 // room for the value
	h := barMargin + 3*glyphH + 24
	for _, p := range panels {
		h += glyphH + 12 + len(p.bars)*(barH+barGap) + glyphH + 26
	}
	c := newCanvas(barWidth, h)
	c.text(barMargin, barMargin, title, ink, 2)
	c.text(barMargin, barMargin+2*glyphH+6, subtitle, faint, 1)
	y := barMargin + 3*glyphH + 24
	for _, p := range panels {
		c.text(barMargin, y, p.title, ink, 1)
		y += glyphH + 12
		top := y
		hi := 0.0
		for _, b := range p.bars {
			hi = math.Max(hi, b.value)
		}
		step := niceStep(hi, 5)
		scaleMax := math.Ceil(hi/step) * step
		if scaleMax <= 0 {
			scaleMax = 1
		}
		xOf := func(v float64) int { return left + int(float64(right-left)*v/scaleMax) }
		bottom := top + len(p.bars)*(barH+barGap)
		for v := 0.0; v <= scaleMax*1.0001; v += step {
			x := xOf(v)
			c.line(x, top-4, x, bottom, gridColor, 1)
			lbl := fmtNum(v)
			c.text(x-textWidth(lbl, 1)/2, bottom+4, lbl, faint, 1)
		}
		for _, b := range p.bars {
			c.text(left-10-textWidth(b.label, 1), y+(barH-glyphH)/2, b.label, ink, 1)
			x1 := xOf(b.value)
			if b.value > 0 && x1 == left {
				x1 = left + 1
			}
			c.rect(left, y, x1, y+barH, b.col)
			val := fmtNum(b.value)
			if b.note != "" {
				val += " " + b.note
			}
			c.text(x1+6, y+(barH-glyphH)/2, val, ink, 1)
			y += barH + barGap
		}
		c.line(left, top-4, left, bottom, ink, 1)
		y = bottom + glyphH + 26
	}
	return c.save(path)
}

// fmtNum prints a rate or size compactly: 950, 62.4k, 2.81M.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZero(fmt.Sprintf("%.2f", v/1e9)) + "G"
	case a >= 1e6:
		return trimZero(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e4:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 1e3:
		return trimZero(fmt.Sprintf("%.2f", v/1e3)) + "k"
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return trimZero(fmt.Sprintf("%.1f", v))
}

// trimZero drops a fraction's trailing zeros: 2.50 -> 2.5, 3.00 -> 3.
func trimZero(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func fmtFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
