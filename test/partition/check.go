package partition

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// capState is one viewer's strict cap in the model: the grants in
// effect, and how many of them came from Allows whose caller never
// heard the answer (Unknown): only those can be given back.
type capState struct{ granted, late int }

// capModel is the sequential specification of one viewer's strict cap
// whose window outlasts the test: an Allow is granted iff fewer than
// Limit grants are in effect, and refused iff Limit are.
//
// An Allow with no answer (Unknown) may or may not have taken effect.
// It enters the history with a return time of +infinity, so the checker
// may linearize it at any point after its call, and its step always
// succeeds: granted if there is room, else refused. Taking the grant
// whenever there is room loses nothing: a history where the call had no
// effect linearizes it after every other operation instead, where its
// outcome changes nothing that was observed.
//
// A grant whose answer reached the client after its call gave up is
// given back by the client (an Undo, client/undo.go): GivenBack takes
// one such grant out of effect, and is only possible while one is in
// effect.
var capModel = porcupine.Model{
	Init: func() any { return capState{} },
	Step: func(state, _, output any) (bool, any) {
		s := state.(capState)
		switch output.(string) {
		case Granted:
			return s.granted < Limit, capState{s.granted + 1, s.late}
		case Refused:
			return s.granted >= Limit, s
		case GivenBack:
			return s.late > 0, capState{s.granted - 1, s.late - 1}
		default: // Unknown
			if s.granted < Limit {
				return true, capState{s.granted + 1, s.late + 1}
			}
			return true, s
		}
	},
	DescribeOperation: func(_, output any) string {
		if output.(string) == GivenBack {
			return "undo -> given back"
		}
		return "allow -> " + output.(string)
	},
	DescribeState: func(state any) string {
		s := state.(capState)
		return "granted " + strconv.Itoa(s.granted) + " (" + strconv.Itoa(s.late) + " unanswered)"
	},
}

// ViewerCheck is what the checker found in one viewer's history.
type ViewerCheck struct {
	Viewer                               string
	Granted, Refused, Unknown, GivenBack int
	// Linearizable is porcupine's verdict: Ok, Illegal, or Unknown
	// (the search timed out).
	Linearizable  porcupine.CheckResult
	GrantedBySide map[string]int // grants acknowledged to each side's driver
}

// OverGranted reports whether the viewer was granted more than Limit.
func (v ViewerCheck) OverGranted() bool { return v.Granted > Limit }

// CheckViewer checks one viewer's strict history for linearizability,
// giving the search at most timeout.
func CheckViewer(viewer string, ops []Op, timeout time.Duration) ViewerCheck {
	vc := ViewerCheck{Viewer: viewer, GrantedBySide: map[string]int{}}
	for _, op := range ops {
		switch op.Result {
		case Granted:
			vc.Granted++
			vc.GrantedBySide[op.Side]++
		case Refused:
			vc.Refused++
		case GivenBack:
			vc.GivenBack++
		default:
			vc.Unknown++
		}
	}
	if vc.OverGranted() {
		// Every grant needs a count below Limit and raises it: no order
		// of the calls holds more than Limit grants. Saying so without
		// the search spares an exhaustive one (the search only stops
		// early on a history it can order).
		vc.Linearizable = porcupine.Illegal
		return vc
	}
	vc.Linearizable = porcupine.CheckOperationsTimeout(capModel, history(ops), timeout)
	return vc
}

// Visualize writes porcupine's drawing of one viewer's history (the
// longest orders it found) to an HTML file at path.
func Visualize(ops []Op, path string, timeout time.Duration) error {
	_, info := porcupine.CheckOperationsVerbose(capModel, history(ops), timeout)
	return porcupine.VisualizePath(capModel, info, path)
}

// history turns one viewer's Ops into porcupine's operations, leaving
// out the unknown outcomes that cannot change the verdict, so that the
// search stays small however many calls went unanswered.
//
// An unknown outcome only ever adds a grant where there is room, and
// unknowns differ only in their call times (their returns are all
// infinite). At most Limit-g+u of them can take effect, g being the
// answered grants and u the grants given back (each frees a slot), and
// an earlier call can stand wherever a later one could: so only the
// Limit-g+u earliest unknowns are kept. Of those, one
// called after every answered call returned goes too: it can always be
// placed last, where it changes nothing that was observed.
func history(ops []Op) []porcupine.Operation {
	lastKnown := int64(math.MinInt64) // the last return of an answered call
	grants, givenBack := 0, 0
	var unknown []Op
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		switch op.Result {
		case Unknown:
			unknown = append(unknown, op)
			continue
		case Granted:
			grants++
		case GivenBack:
			givenBack++
		}
		lastKnown = max(lastKnown, op.Return)
		hist = append(hist, porcupine.Operation{ClientId: op.Client, Call: op.Call, Output: op.Result, Return: op.Return})
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Call < unknown[j].Call })
	for _, op := range unknown[:min(len(unknown), max(0, Limit-grants+givenBack))] {
		if op.Call <= lastKnown {
			hist = append(hist, porcupine.Operation{ClientId: op.Client, Call: op.Call, Output: op.Result, Return: math.MaxInt64})
		}
	}
	return hist
}

// ByViewer groups a history by viewer, viewers sorted.
func ByViewer(ops []Op) (viewers []string, by map[string][]Op) {
	by = map[string][]Op{}
	for _, op := range ops {
		if _, ok := by[op.Viewer]; !ok {
			viewers = append(viewers, op.Viewer)
		}
		by[op.Viewer] = append(by[op.Viewer], op)
	}
	sort.Strings(viewers)
	return viewers, by
}

// CheckAll checks every viewer of a history, each with at most timeout.
func CheckAll(ops []Op, timeout time.Duration) []ViewerCheck {
	viewers, by := ByViewer(ops)
	out := make([]ViewerCheck, 0, len(viewers))
	for _, v := range viewers {
		out = append(out, CheckViewer(v, by[v], timeout))
	}
	return out
}
