// Command pngcheck fails unless a screenshot is a real page: a PNG of the
// expected size, under 1 MiB, with enough distinct colors to hold the ring
// picture.
//
//	go run ./scripts/pngcheck FILE.png WIDTH HEIGHT
package main

import (
	"fmt"
	"image/png"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: pngcheck FILE.png WIDTH HEIGHT")
		os.Exit(2)
	}
	w, _ := strconv.Atoi(os.Args[2])
	h, _ := strconv.Atoi(os.Args[3])
	if err := check(os.Args[1], w, h); err != nil {
		fmt.Fprintln(os.Stderr, "pngcheck:", err)
		os.Exit(1)
	}
}

// maxBytes bounds the screenshot's file: the README embeds it, and the
// repository keeps every version.
const maxBytes = 1 << 20

func check(path string, w, h int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() > maxBytes {
		return fmt.Errorf("%s is %d bytes, over %d: the README embeds it", path, st.Size(), maxBytes)
	}
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	b := img.Bounds()
	if b.Dx() != w || b.Dy() != h {
		return fmt.Errorf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
	colors := map[uint32]int{}
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[(r>>11)<<10|(g>>11)<<5|bl>>11]++
		}
	}
	// The three members' colors must each cover a good part of the ring.
	big := 0
	for _, n := range colors {
		if n > 500 {
			big++
		}
	}
	if big < 4 { // background + 3 members
		return fmt.Errorf("%s looks blank: only %d colors cover more than a few pixels", path, big)
	}
	fmt.Printf("%s: %dx%d, %d colors, %d large areas\n", path, b.Dx(), b.Dy(), len(colors), big)
	return nil
}
