package partition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds a synthetic operation of viewer "v" from call to ret (ms).
func op(client int, call, ret int64, result string) Op {
	return Op{Viewer: "v", Side: "n1", Client: client, Call: call * 1e6, Return: ret * 1e6, Result: result}
}

func TestCheckerOnSyntheticHistories(t *testing.T) {
	cases := []struct {
		name    string
		ops     []Op
		want    porcupine.CheckResult
		granted int
	}{{
		name: "five sequential grants then refusals",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(0, 8, 9, Granted), op(0, 10, 11, Refused),
			op(1, 12, 13, Refused),
		},
		want: porcupine.Ok, granted: 5,
	}, {
		name: "concurrent racers, a refusal overlapping the fifth grant",
		ops: []Op{
			op(0, 0, 10, Granted), op(1, 0, 10, Granted), op(2, 0, 10, Granted),
			op(0, 11, 20, Granted), op(1, 11, 30, Refused), op(2, 11, 25, Granted),
			op(0, 31, 32, Refused),
		},
		want: porcupine.Ok, granted: 5,
	}, {
		name: "six grants",
		ops: []Op{
			op(0, 0, 1, Granted), op(1, 0, 1, Granted), op(2, 0, 1, Granted),
			op(0, 2, 3, Granted), op(1, 2, 3, Granted), op(2, 2, 3, Granted),
		},
		want: porcupine.Illegal, granted: 6,
	}, {
		name: "a refusal before any room was taken",
		ops: []Op{
			op(0, 0, 1, Refused), op(1, 2, 3, Granted),
		},
		want: porcupine.Illegal, granted: 1,
	}, {
		name: "refused after only four grants that all returned before it",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(1, 10, 11, Refused),
		},
		want: porcupine.Illegal, granted: 4,
	}, {
		name: "an unknown outcome that took the fifth slot explains the refusal",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(2, 8, 9, Unknown), op(1, 10, 11, Refused),
		},
		want: porcupine.Ok, granted: 4,
	}, {
		name: "an unknown outcome that did not take effect",
		ops: []Op{
			op(2, 0, 1, Unknown), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(0, 8, 9, Granted), op(0, 10, 11, Granted),
			op(1, 12, 13, Refused),
		},
		want: porcupine.Ok, granted: 5,
	}, {
		name: "an unknown outcome called after the refusal cannot explain it",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(1, 10, 11, Refused), op(2, 12, 13, Unknown),
		},
		want: porcupine.Illegal, granted: 4,
	}, {
		name: "unknown outcomes never excuse a sixth grant",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(0, 8, 9, Granted), op(1, 8, 9, Unknown),
			op(0, 10, 11, Granted),
		},
		want: porcupine.Illegal, granted: 6,
	}, {
		// The starve nemesis: a grant answered too late (unknown), a
		// refusal that counted it, then the client's Undo of it, then
		// a fifth acknowledged grant in the slot it freed.
		name: "a late grant given back explains a refusal and a fifth grant after it",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(2, 8, 9, Unknown), op(1, 10, 11, Refused),
			op(-1, 12, 13, GivenBack), op(0, 14, 15, Granted),
		},
		want: porcupine.Ok, granted: 5,
	}, {
		name: "without its give-back the same history is not linearizable",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(0, 6, 7, Granted), op(2, 8, 9, Unknown), op(1, 10, 11, Refused),
			op(0, 14, 15, Granted),
		},
		want: porcupine.Illegal, granted: 5,
	}, {
		name: "a give-back with no grant in effect",
		ops: []Op{
			op(-1, 0, 1, GivenBack), op(0, 2, 3, Granted),
		},
		want: porcupine.Illegal, granted: 1,
	}, {
		name: "a give-back frees one slot, not two",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(2, 6, 7, Unknown), op(3, 6, 7, Unknown), op(1, 10, 11, Refused),
			op(-1, 12, 13, GivenBack), op(0, 14, 15, Granted), op(0, 16, 17, Granted),
		},
		want: porcupine.Illegal, granted: 5,
	}, {
		name: "only a grant nobody was told of is given back",
		ops: []Op{
			op(0, 0, 1, Granted), op(-1, 2, 3, GivenBack),
		},
		want: porcupine.Illegal, granted: 1,
	}, {
		name: "two give-backs free two slots",
		ops: []Op{
			op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
			op(2, 6, 7, Unknown), op(3, 6, 7, Unknown), op(1, 10, 11, Refused),
			op(-1, 12, 13, GivenBack), op(-1, 12, 13, GivenBack), op(0, 14, 15, Granted), op(0, 16, 17, Granted),
		},
		want: porcupine.Ok, granted: 5,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vc := CheckViewer("v", c.ops, 10*time.Second)
			if vc.Linearizable != c.want {
				t.Errorf("linearizable = %s, want %s", vc.Linearizable, c.want)
			}
			if vc.Granted != c.granted {
				t.Errorf("granted = %d, want %d", vc.Granted, c.granted)
			}
			if vc.OverGranted() != (c.granted > Limit) {
				t.Errorf("over-granted = %v with %d grants", vc.OverGranted(), c.granted)
			}
		})
	}
}

func TestCheckAllGroupsByViewer(t *testing.T) {
	var ops []Op
	// Viewer a: five grants (fine); viewer b: six (over); each alone is
	// judged, so a's history is not blamed for b's grants.
	for i := range 5 {
		ops = append(ops, Op{Viewer: "a", Call: int64(i) * 10, Return: int64(i)*10 + 1, Result: Granted})
	}
	for i := range 6 {
		ops = append(ops, Op{Viewer: "b", Call: int64(i) * 10, Return: int64(i)*10 + 1, Result: Granted})
	}
	got := CheckAll(ops, 10*time.Second)
	if len(got) != 2 || got[0].Viewer != "a" || got[1].Viewer != "b" {
		t.Fatalf("viewers %+v", got)
	}
	if got[0].Linearizable != porcupine.Ok || got[0].OverGranted() {
		t.Errorf("a: %+v", got[0])
	}
	if got[1].Linearizable != porcupine.Illegal || !got[1].OverGranted() {
		t.Errorf("b: %+v", got[1])
	}
}

func TestReadOps(t *testing.T) {
	in := `{"viewer":"v","side":"n1","client":1,"call":10,"return":20,"result":"granted"}

{"viewer":"v","side":"n2","client":0,"call":15,"return":25,"result":"unknown","err":"fail-closed"}
`
	ops, err := ReadOps(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Result != Granted || ops[1].Side != "n2" || ops[1].Err != "fail-closed" {
		t.Fatalf("ops %+v", ops)
	}
	if _, err := ReadOps(strings.NewReader(`{"viewer":"v","result":"maybe"}`)); err == nil {
		t.Error("a result that is not granted, refused or unknown was accepted")
	}
	if _, err := ReadOps(strings.NewReader(`{"viewer":`)); err == nil {
		t.Error("a torn line was accepted")
	}
}

// An over-granted viewer is judged without the search, however many
// unknown outcomes would make the search long.
func TestCheckerOverGrantedWithManyUnknowns(t *testing.T) {
	var ops []Op
	for i := range 40 {
		ops = append(ops, op(i%8, int64(i), 1000, Unknown))
	}
	for i := range 6 {
		ops = append(ops, op(8+i, int64(100+i), int64(101+i), Granted))
	}
	for i := range 40 {
		ops = append(ops, op(14+i%8, int64(200+i), int64(201+i), Refused))
	}
	// The search alone runs out of this time here (Unknown).
	vc := CheckViewer("v", ops, 20*time.Second)
	if vc.Linearizable != porcupine.Illegal || !vc.OverGranted() {
		t.Fatalf("got %+v", vc)
	}
}

// Unknown outcomes called after every answered call returned cannot
// change the verdict, whichever it is.
func TestCheckerLateUnknowns(t *testing.T) {
	five := []Op{
		op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted),
		op(0, 6, 7, Granted), op(0, 8, 9, Granted),
	}
	late := []Op{op(1, 20, 21, Unknown), op(2, 22, 23, Unknown), op(3, 30, 31, Unknown)}
	if vc := CheckViewer("v", append(append([]Op{}, five...), late...), 10*time.Second); vc.Linearizable != porcupine.Ok {
		t.Errorf("five grants then late unknowns: %s", vc.Linearizable)
	}
	bad := append(append([]Op{}, five[:4]...), op(1, 10, 11, Refused))
	if vc := CheckViewer("v", append(bad, late...), 10*time.Second); vc.Linearizable != porcupine.Illegal {
		t.Errorf("four grants, a refusal, then late unknowns: %s", vc.Linearizable)
	}
}

func TestVisualizeWritesTheDrawing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.html")
	ops := []Op{op(0, 0, 1, Refused), op(1, 2, 3, Granted), op(2, 2, 5, Unknown)}
	if err := Visualize(ops, path, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `allow -\u003e refused`) {
		t.Errorf("the drawing does not describe the operations: %d bytes", len(b))
	}
}

// Many unanswered calls beside an illegal history: the checker still
// reaches a verdict (only Limit-g unknowns can matter).
func TestCheckerManyUnknowns(t *testing.T) {
	base := []Op{op(0, 0, 1, Granted), op(0, 2, 3, Granted), op(0, 4, 5, Granted)}
	var unknowns []Op
	for i := range 60 {
		unknowns = append(unknowns, op(10+i%16, int64(6+i), 10_000, Unknown))
	}
	// Two unknowns called before the refusal can explain it.
	ok := append(append(append([]Op{}, base...), unknowns...), op(1, 100, 101, Refused))
	if vc := CheckViewer("v", ok, 20*time.Second); vc.Linearizable != porcupine.Ok {
		t.Errorf("refusal after 3 grants and 60 unknowns: %s", vc.Linearizable)
	}
	// A refusal called before any unknown, after only 3 grants: illegal
	// whatever the unknowns did.
	bad := append(append(append([]Op{}, base...), op(1, 5, 6, Refused)), unknowns[1:]...)
	bad = append(bad, op(2, 200, 201, Refused))
	if vc := CheckViewer("v", bad, 20*time.Second); vc.Linearizable != porcupine.Illegal {
		t.Errorf("early refusal with 60 unknowns after it: %s", vc.Linearizable)
	}
}
