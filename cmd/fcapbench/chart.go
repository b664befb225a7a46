package main

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"iter"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A small raster canvas for the report's charts: rectangles, lines and
// text in basicfont's 7x13 face (drawn 2x for titles). Nothing here
// knows about benchmarks.

var (
	white     = color.RGBA{255, 255, 255, 255}
	ink       = color.RGBA{30, 30, 30, 255}
	gridColor = color.RGBA{215, 215, 215, 255}
	faint     = color.RGBA{110, 110, 110, 255}
)

// fcapPalette and redisPalette keep fcap in blues and greens and Redis in
// warm colours, so a reader tells the systems apart at a glance; a
// target's second variant (Redis's one-call check, fcap's Record load) is
// a lighter shade of its colour.
var (
	fcapPalette  = []color.RGBA{{31, 119, 180, 255}, {23, 160, 190, 255}, {44, 160, 44, 255}, {0, 0, 128, 255}}
	redisPalette = []color.RGBA{{214, 39, 40, 255}, {255, 127, 14, 255}, {148, 103, 189, 255}, {140, 86, 75, 255},
		{188, 189, 34, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {255, 20, 147, 255}}
	otherColor = color.RGBA{90, 90, 90, 255}
)

const (
	glyphW = 7  // basicfont.Face7x13 advance
	glyphH = 13 // and height
)

type canvas struct {
	img *image.RGBA
}

func newCanvas(w, h int) *canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	return &canvas{img: img}
}

// rect fills [x0,x1) x [y0,y1).
func (c *canvas) rect(x0, y0, x1, y1 int, col color.RGBA) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), image.NewUniform(col), image.Point{}, draw.Src)
}

// line draws from (x0,y0) to (x1,y1) with a square pen of the given
// width (Bresenham).
func (c *canvas) line(x0, y0, x1, y1 int, col color.RGBA, width int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	lo := -(width - 1) / 2
	for {
		for i := lo; i < lo+width; i++ {
			for j := lo; j < lo+width; j++ {
				c.img.SetRGBA(x0+i, y0+j, col)
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

// dashedH draws a dashed horizontal line.
func (c *canvas) dashedH(x0, x1, y int, col color.RGBA) {
	for x := x0; x < x1; x += 8 {
		c.line(x, y, min(x+4, x1), y, col, 1)
	}
}

// text draws s with its top-left corner at (x, y), scaled up by scale.
func (c *canvas) text(x, y int, s string, col color.RGBA, scale int) {
	if s == "" {
		return
	}
	for px, py := range inked(s) {
		for i := range scale {
			for j := range scale {
				c.img.SetRGBA(x+px*scale+i, y+py*scale+j, col)
			}
		}
	}
}

// textUp draws s rotated a quarter turn counter-clockwise, its baseline
// on the right, starting at the bottom (x, y): a y axis's title.
func (c *canvas) textUp(x, y int, s string, col color.RGBA) {
	for px, py := range inked(s) {
		c.img.SetRGBA(x+py, y-px, col)
	}
}

// inked renders s in the 7x13 font and yields the pixels it inks, from
// its top-left corner.
func inked(s string) iter.Seq2[int, int] {
	return func(yield func(px, py int) bool) {
		w := textWidth(s, 1)
		src := image.NewAlpha(image.Rect(0, 0, w, glyphH))
		d := font.Drawer{Dst: src, Src: image.Opaque, Face: basicfont.Face7x13, Dot: fixed.P(0, basicfont.Face7x13.Ascent)}
		d.DrawString(s)
		for py := 0; py < glyphH; py++ {
			for px := 0; px < w; px++ {
				if src.AlphaAt(px, py).A >= 128 && !yield(px, py) {
					return
				}
			}
		}
	}
}

// wrapText breaks s at spaces into at most maxLines lines of at most
// width characters (the last line is cut if it must be).
func wrapText(s string, width, maxLines int) []string {
	var lines []string
	for len(s) > width && len(lines) < maxLines-1 {
		cut := strings.LastIndexByte(s[:width+1], ' ')
		if cut <= 0 {
			cut = width
		}
		lines = append(lines, s[:cut])
		s = strings.TrimLeft(s[cut:], " ")
	}
	if len(s) > width {
		s = s[:width]
	}
	return append(lines, s)
}

// textWidth is the width of s drawn at scale.
func textWidth(s string, scale int) int { return len(s) * glyphW * scale }

func (c *canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// palette hands out stable colours per target, fcap's from fcapPalette
// and Redis's from redisPalette, in order of first appearance.
type palette struct {
	of            map[string]color.RGBA
	nFcap, nRedis int
}

func newPalette() *palette { return &palette{of: map[string]color.RGBA{}} }

// color is the target's colour, lighter for a second variant.
func (p *palette) color(target, kind, variant string) color.RGBA {
	c, ok := p.of[target]
	if !ok {
		c = otherColor
		switch {
		case kind == "fcap":
			c = fcapPalette[p.nFcap%len(fcapPalette)]
			p.nFcap++
		case isRedisKind(kind):
			c = redisPalette[p.nRedis%len(redisPalette)]
			p.nRedis++
		}
		p.of[target] = c
	}
	switch variant {
	case "lua", "mget", "record":
		return lighten(c, 0.5)
	}
	return c
}

// lighten mixes c with white.
func lighten(c color.RGBA, f float64) color.RGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*f) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 255}
}

// niceStep is a round tick spacing giving about n ticks up to max.
func niceStep(max float64, n int) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
