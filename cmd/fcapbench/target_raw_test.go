package main

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
)

func TestIDsNameEveryViewerWithoutOneStringEach(t *testing.T) {
	w := workload{Viewers: 1001, Campaigns: 3}
	x := newIDs(&w)
	if x.viewerCount() != 1001 {
		t.Fatalf("%d viewers, want 1001", x.viewerCount())
	}
	for _, i := range []int{0, 1, 9, 10, 999, 1000} {
		if got, want := x.viewer(i), "viewer-"+strconv.Itoa(i); got != want {
			t.Errorf("viewer(%d) = %q, want %q", i, got, want)
		}
	}
	if x.campaigns[2] != "campaign-2" {
		t.Errorf("campaign 2 is %q", x.campaigns[2])
	}
	padded := newIDsNamed(&w, func(b []byte, i int) []byte { return append(b, strconv.Itoa(i+100)...) })
	if padded.viewer(0) != "100" || padded.viewer(1000) != "1100" {
		t.Errorf("named viewers %q, %q", padded.viewer(0), padded.viewer(1000))
	}
}

// The raw target writes a real fcap request: a node decodes it as the
// workload's check.
func TestRawTargetFramesDecodeAsTheWorkloadsCheck(t *testing.T) {
	s := startEcho(t) // somewhere to connect: no request is sent
	w := workload{Kind: "check", Viewers: 10, Campaigns: 50, Candidates: 20, Zipf: 1.1, ZipfV: 1, Limit: 5, Window: 1000, Mode: "soft"}
	tgt, err := newRawTarget(s.Addr(), &w, newIDs(&w), targetOpts{timeout: 10 * time.Second, conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if tgt.Name() != "raw" {
		t.Errorf("name %q", tgt.Name())
	}
	hdr, body, err := proto.NewReader(bytes.NewReader(tgt.check), proto.DefaultMaxFrame).Next()
	if err != nil || hdr.Type != proto.TypeCheck {
		t.Fatalf("check frame: %v, type %v", err, hdr.Type)
	}
	var chk proto.Check
	if err := proto.Decode(body, &chk); err != nil {
		t.Fatal(err)
	}
	if chk.Viewer != "viewer-9" || len(chk.Table.Caps) != 20 || len(chk.Table.Ends) != 20 || chk.HasNow {
		t.Errorf("decoded check: viewer %q, %d caps, %d candidates, has now %v", chk.Viewer, len(chk.Table.Caps), len(chk.Table.Ends), chk.HasNow)
	}
	hdr, body, err = proto.NewReader(bytes.NewReader(tgt.allow), proto.DefaultMaxFrame).Next()
	if err != nil || hdr.Type != proto.TypeAllow {
		t.Fatalf("allow frame: %v, type %v", err, hdr.Type)
	}
	var alw proto.Allow
	if err := proto.Decode(body, &alw); err != nil || len(alw.Caps) != 1 {
		t.Fatalf("decoded allow: %v, %d caps", err, len(alw.Caps))
	}
}
