package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SegmentReport is what VerifySegments found in one segment file.
type SegmentReport struct {
	Path    string
	Records int64
	Bytes   int64 // of good records
	Damaged int64 // bytes from the first record that does not decode to the end
	Err     error // why those bytes are damaged
}

// VerifySegments reads every segment in dir, oldest first, and reports
// its good records and damaged bytes. Unlike Replay it changes nothing.
func VerifySegments(dir string) ([]SegmentReport, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("wal: %w", err)
	}
	var ids []uint64
	for _, e := range ents {
		if id, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), segmentExt), 10, 64); err == nil && strings.HasSuffix(e.Name(), segmentExt) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []SegmentReport
	for _, id := range ids {
		path := filepath.Join(dir, fmt.Sprintf("%020d%s", id, segmentExt))
		b, err := os.ReadFile(path)
		if err != nil {
			return out, fmt.Errorf("wal: %w", err)
		}
		r := SegmentReport{Path: path}
		good, err := Scan(b, func([]byte) { r.Records++ })
		r.Bytes, r.Damaged, r.Err = int64(good), int64(len(b)-good), err
		out = append(out, r)
	}
	return out, nil
}

// VerifySnapshot checks one snapshot whole and returns its record count.
func VerifySnapshot(path string) (uint64, error) {
	return readSnapshot(path, nil)
}
