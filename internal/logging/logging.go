// Package logging builds the logger fcap's daemons (fcapd, fcapingest)
// configure with --log-level and --log-format, so both take the same
// values and refuse the same mistakes.
package logging

import (
	"fmt"
	"io"
	"log/slog"
)

// New returns a logger writing to w at level (debug, info, warn or error)
// in format (text or json), or an error naming the flag that is wrong.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}
