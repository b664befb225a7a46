package proto

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestEncodedCaps: a Check sending its caps as EncodedCaps puts the same
// bytes on the wire as one sending them in Table.Caps, and a cap's Form
// is a key for it: equal for equal caps, different for caps that differ
// in any field.
func TestEncodedCaps(t *testing.T) {
	near := fcap.Cap{Scope: "campaign", ID: "c-1", Limit: 5, Window: 24 * time.Hour}
	variants := []fcap.Cap{near}
	for _, change := range []func(c *fcap.Cap){
		func(c *fcap.Cap) { c.Scope = "creative" },
		func(c *fcap.Cap) { c.ID = "c-2" },
		func(c *fcap.Cap) { c.Scope, c.ID = "campaignc", "-1" }, // the same bytes, split elsewhere
		func(c *fcap.Cap) { c.Limit = 6 },
		func(c *fcap.Cap) { c.Window += time.Millisecond },
		func(c *fcap.Cap) { c.Algorithm = fcap.Fixed },
		func(c *fcap.Cap) { c.Mode = fcap.Strict },
	} {
		c := near
		change(&c)
		variants = append(variants, c)
	}
	long := fcap.Cap{Scope: strings.Repeat("s", 300), ID: strings.Repeat("i", 70_000-MaxStringLen), Limit: fcap.MaxLimit, Window: fcap.Millis(fcap.MaxTime)}
	for _, table := range []fcap.CheckTable{
		benchTable(),
		{Caps: append(append(manyCaps(40), variants...), near, long, capCampaign, capAdv, capZero, capOdd, capMaxStr), Refs: []uint16{0, 48, 49}, Ends: []uint32{1, 3}},
		{},
	} {
		var enc EncodedCaps
		for i := range table.Caps {
			if err := enc.Append(&table.Caps[i]); err != nil {
				t.Fatalf("cap %d: %v", i, err)
			}
		}
		if enc.Len() != len(table.Caps) {
			t.Fatalf("Len %d, want %d", enc.Len(), len(table.Caps))
		}
		_, want := frameOf(t, 7, &Check{Viewer: "v", Now: 5, HasNow: true, Table: table, Budget: 4500})
		sent := table
		sent.Caps = nil
		_, got := frameOf(t, 7, &Check{Viewer: "v", Now: 5, HasNow: true, Table: sent, Encoded: &enc, Budget: 4500})
		if !bytes.Equal(got, want) {
			t.Fatalf("%d caps: Encoded sends\n% x\nTable.Caps sends\n% x", len(table.Caps), got, want)
		}
		for i := range table.Caps {
			for j := range table.Caps {
				if equal := bytes.Equal(enc.Form(i), enc.Form(j)); equal != (table.Caps[i] == table.Caps[j]) {
					t.Fatalf("caps %d and %d: forms equal %v, caps %+v and %+v", i, j, equal, table.Caps[i], table.Caps[j])
				}
			}
		}
	}
}

// TestEncodedCapsRefusesLongStrings: a cap AppendFrame would refuse in
// Table.Caps is refused by Append, and the list is left as it was.
func TestEncodedCapsRefusesLongStrings(t *testing.T) {
	var enc EncodedCaps
	if err := enc.Append(&capCreative); err != nil {
		t.Fatal(err)
	}
	for _, c := range []fcap.Cap{
		{Scope: strings.Repeat("s", MaxStringLen+1), ID: "c", Limit: 1, Window: time.Millisecond},
		{Scope: "campaign", ID: strings.Repeat("i", MaxStringLen+1), Limit: 1, Window: time.Millisecond},
	} {
		if err := enc.Append(&c); err == nil || !strings.Contains(err.Error(), "limit 65536") {
			t.Fatalf("Append of a cap with a %d-byte string = %v, want a refusal", max(len(c.Scope), len(c.ID)), err)
		}
		if _, err := AppendFrame(nil, 1, &Check{Viewer: "v", Table: fcap.CheckTable{Caps: []fcap.Cap{c}, Refs: []uint16{0}, Ends: []uint32{1}}}); err == nil {
			t.Fatal("AppendFrame accepts the cap Append refuses")
		}
	}
	if enc.Len() != 1 || !bytes.Equal(enc.Form(0), appendCap(nil, &capCreative, capCreative.WindowMillis())) {
		t.Fatalf("the list changed: %d caps", enc.Len())
	}
}

// TestCapsRefusePartialMilliseconds: the wire carries a window in
// milliseconds, so a window with a fraction of one is refused with
// fcap.ErrBadWindow by every way a cap is encoded, never rounded to
// another window; the list is left as it was.
func TestCapsRefusePartialMilliseconds(t *testing.T) {
	var enc EncodedCaps
	if err := enc.Append(&capCreative); err != nil {
		t.Fatal(err)
	}
	for _, w := range []time.Duration{time.Hour + 500*time.Microsecond, 999 * time.Microsecond, time.Nanosecond, -1500 * time.Microsecond, 3_600_000} {
		c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: w}
		check := func(how string, err error) {
			t.Helper()
			if !errors.Is(err, fcap.ErrBadWindow) || !strings.Contains(err.Error(), w.String()+" is not a whole number of milliseconds") {
				t.Errorf("%s of a window of %v = %v, want fcap.ErrBadWindow naming it", how, w, err)
			}
		}
		check("Append", enc.Append(&c))
		_, err := AppendCapForm(nil, &c)
		check("AppendCapForm", err)
		_, err = AppendFrame(nil, 1, &Check{Viewer: "v", Table: fcap.CheckTable{Caps: []fcap.Cap{c}, Refs: []uint16{0}, Ends: []uint32{1}}})
		check("AppendFrame of a Check", err)
		_, err = AppendFrame(nil, 1, &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative, c}})
		check("AppendFrame of an Allow", err)
	}
	if enc.Len() != 1 || !bytes.Equal(enc.Form(0), appendCap(nil, &capCreative, capCreative.WindowMillis())) {
		t.Fatalf("the list changed: %d caps", enc.Len())
	}
}
