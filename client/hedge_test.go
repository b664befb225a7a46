package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// pairFakes starts an owner and a backup owner of every viewer (two
// fake nodes serving the same topology, R=2), each answering checks with
// its own handler, and counts the checks each receives.
type pairFakes struct {
	owner, backup             *fakeNode
	ownerChecks, backupChecks atomic.Int64
}

func startPair(t *testing.T, owner, backup func(*proto.Check) *proto.CheckResult) *pairFakes {
	t.Helper()
	pf := &pairFakes{}
	handler := func(n *atomic.Int64, h func(*proto.Check) *proto.CheckResult) func(proto.Header, []byte) proto.Message {
		return checkHandler(t, n, h)
	}
	pf.owner = startFake(t, handler(&pf.ownerChecks, owner))
	pf.backup = startFake(t, handler(&pf.backupChecks, backup))
	topo := pf.topology(3, 0, 1)
	for _, f := range []*fakeNode{pf.owner, pf.backup} {
		f.mu.Lock()
		f.topo = topo
		f.mu.Unlock()
	}
	return pf
}

// topology is the pair's topology at epoch: of every partition, member
// first (0: the owner fake, 1: the backup fake) is the owner, the other
// the backup.
func (pf *pairFakes) topology(epoch uint64, first, second uint16) func() *proto.Topology {
	const partitions = 7
	owners := make([]uint16, 0, 2*partitions)
	for range partitions {
		owners = append(owners, first, second)
	}
	return func() *proto.Topology {
		return &proto.Topology{Epoch: epoch, Partitions: partitions, Replicas: 2, Owners: owners,
			Members: []proto.Member{
				{Name: "a-owner", Addr: pf.owner.addr(), State: 2, Incarnation: 1},
				{Name: "b-backup", Addr: pf.backup.addr(), State: 2, Incarnation: 1},
			}}
	}
}

// checkHandler is a fake node's handler that counts the checks it is
// sent in n (if not nil) and answers each with h's answer (nil: none).
func checkHandler(t *testing.T, n *atomic.Int64, h func(*proto.Check) *proto.CheckResult) func(proto.Header, []byte) proto.Message {
	return func(hdr proto.Header, body []byte) proto.Message {
		if hdr.Type != proto.TypeCheck {
			return nil
		}
		var m proto.Check
		if err := proto.Decode(body, &m); err != nil {
			t.Errorf("decode: %v", err)
			return nil
		}
		if n != nil {
			n.Add(1)
		}
		if r := h(&m); r != nil {
			return r
		}
		return nil
	}
}

// answerAfter is a node that answers every check with answer(m, stale)
// after d.
func answerAfter(d time.Duration, stale bool) func(*proto.Check) *proto.CheckResult {
	return func(m *proto.Check) *proto.CheckResult {
		time.Sleep(d)
		return answer(m, stale)
	}
}

// answer is a check answer of one allowed verdict per candidate.
func answer(m *proto.Check, stale bool) *proto.CheckResult {
	r := &proto.CheckResult{Epoch: 3, Stale: stale}
	for range m.Table.Ends {
		r.Verdicts = append(r.Verdicts, fcap.Verdict{Allowed: true, Remaining: 5, Blocking: -1})
	}
	return r
}

// pairClient is a client of the pair, ready with connections to both
// nodes, whose calls have the given Timeout (0: newClient's generous one).
func pairClient(t *testing.T, pf *pairFakes, timeout time.Duration) *client.Client {
	t.Helper()
	c := newClient(t, func(cfg *client.Config) {
		if timeout > 0 {
			cfg.Timeout = timeout
		}
	}, pf.owner.addr())
	readyPair(t, c)
	return c
}

// checkViewer checks viewer-1's candidates and returns the verdicts; an
// error fails the test.
func checkViewer(t *testing.T, c *client.Client, cands ...fcap.Candidate) []client.Verdict {
	t.Helper()
	return tracedCheck(t, c, nil, cands...)
}

// tracedCheck is checkViewer filling in tr, unless it is nil.
func tracedCheck(t *testing.T, c *client.Client, tr *client.CallTrace, cands ...fcap.Candidate) []client.Verdict {
	t.Helper()
	ctx := context.Background()
	if tr != nil {
		ctx = client.WithCallTrace(ctx, tr)
	}
	res, err := c.Check(ctx, "viewer-1", cands)
	if err != nil {
		t.Fatal(err)
	}
	return res.Verdicts
}

// readyPair waits until the client holds connections to both nodes.
func readyPair(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for c.Ring() == nil || c.Ring().Replicas() < 2 {
		if ctx.Err() != nil {
			t.Fatal("the client never learnt the two-node topology")
		}
		time.Sleep(time.Millisecond)
	}
}

var (
	softCand   = fcap.Candidate{Caps: []fcap.Cap{{Scope: "campaign", ID: "c1", Limit: 10, Window: time.Minute}}}
	strictCand = fcap.Candidate{Caps: []fcap.Cap{{Scope: "campaign", ID: "c2", Limit: 10, Window: time.Minute, Mode: fcap.Strict}}}
)

// TestHedgeBackupAnswersForSlowOwner: an owner that does not answer
// leaves a soft check to the backup owner's answer, marked stale (even
// when the backup does not say so), long before the deadline.
func TestHedgeBackupAnswersForSlowOwner(t *testing.T) {
	release := make(chan struct{})
	pf := startPair(t, func(m *proto.Check) *proto.CheckResult {
		<-release // until the test ends
		return nil
	}, func(m *proto.Check) *proto.CheckResult {
		if !m.Backup {
			t.Error("the backup was asked without Backup set")
		}
		return answer(m, false)
	})
	defer close(release)
	c := pairClient(t, pf, 0)
	var tr client.CallTrace
	v := tracedCheck(t, c, &tr, softCand)[0]
	if v.Failed() || !v.Allowed || !v.Stale {
		t.Fatalf("verdict %+v, want the backup's allowed verdict marked stale", v)
	}
	if !tr.Backup || tr.Node != pf.backup.addr() || tr.Read.IsZero() {
		t.Errorf("the trace names %q (backup %v, read at %v), want the backup %s, which answered", tr.Node, tr.Backup, tr.Read, pf.backup.addr())
	}
	if s := c.Stats(); s.HedgesSent != 1 || s.HedgesWon != 1 || s.BackupReads != 1 {
		t.Errorf("hedges sent %d, won %d, backup reads %d; want 1, 1, 1", s.HedgesSent, s.HedgesWon, s.BackupReads)
	}
}

// slowBudget is the Timeout of the tests whose owner answers late but in
// time, at slowAnswer: 70% of the budget, past the three fifths where the
// old client gave up, and 900 ms before the deadline, so a busy machine's
// scheduling delays do not turn an answer in time into a late one.
const (
	slowBudget = 3 * time.Second
	slowAnswer = slowBudget * 7 / 10
)

// TestHedgeOwnerStillWins: after the hedge went to a backup that is
// silent, the owner's request is still in flight, and its answer at 70%
// of the budget is taken (the old client abandoned it at three fifths).
func TestHedgeOwnerStillWins(t *testing.T) {
	release := make(chan struct{})
	pf := startPair(t, answerAfter(slowAnswer, false), func(m *proto.Check) *proto.CheckResult {
		<-release
		return nil
	})
	defer close(release)
	c := pairClient(t, pf, slowBudget)
	var tr client.CallTrace
	if v := tracedCheck(t, c, &tr, softCand)[0]; v.Failed() || v.Stale || !v.Allowed {
		t.Fatalf("verdict %+v, want the owner's", v)
	}
	if tr.Backup || tr.Node != pf.owner.addr() {
		t.Errorf("the trace names %q (backup %v), want the owner %s, which answered", tr.Node, tr.Backup, pf.owner.addr())
	}
	if s := c.Stats(); s.HedgesSent != 1 || s.HedgesCancelled != 1 {
		t.Errorf("hedges sent %d, cancelled %d; want 1, 1", s.HedgesSent, s.HedgesCancelled)
	}
}

// TestSlowOwnerWithoutBackupAnswers: a one-node cluster's slow answer, at
// 70% of the budget, is the verdict: nobody else could answer, so the
// client waits for the owner until the deadline.
func TestSlowOwnerWithoutBackupAnswers(t *testing.T) {
	f := startFake(t, checkHandler(t, nil, answerAfter(slowAnswer, false)))
	c := newClient(t, func(cfg *client.Config) { cfg.Timeout = slowBudget }, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if v := checkViewer(t, c, softCand)[0]; v.Failed() || v.Stale || !v.Allowed {
		t.Fatalf("verdict %+v, want the owner's", v)
	}
}

// TestHedgeBudgetCapsExtraRequests: with an owner always slower than the
// hedge delay, the backup receives no more checks than the budget allows
// (the 10 a client starts with, then 5% of the checks), where the old
// client sent every one of them.
func TestHedgeBudgetCapsExtraRequests(t *testing.T) {
	// The owner answers every check after 40 ms, always past the hedge
	// delay (a quarter of the 100 ms budget until one is learnt). The
	// bound is on the requests the backup receives, and a backup is also
	// asked outside the budget when the owner's connection has been
	// silent for three fifths of the budget before and after a request
	// (taken for stalled): with the owner's answers at most 40 ms apart,
	// only a scheduling stall of over 60 ms on a busy machine could look
	// like that, where a 40 ms budget left 24 ms and counted such a
	// failover against the hedges.
	pf := startPair(t, answerAfter(40*time.Millisecond, false), answerAfter(0, true))
	c := pairClient(t, pf, 100*time.Millisecond)
	const checks = 60
	for i := range checks {
		if _, err := c.Check(context.Background(), "viewer-1", []fcap.Candidate{softCand}); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	allowed := int64(10 + checks*5/100)
	got := pf.backupChecks.Load()
	if got < 1 || got > allowed {
		t.Errorf("the backup received %d checks of %d, want 1 to %d", got, checks, allowed)
	}
	if s := c.Stats(); s.HedgesSent > allowed {
		t.Errorf("%d hedges sent, want at most %d", s.HedgesSent, allowed)
	}
}

// TestStrictCandidateNeverReadsBackup: a check of strict candidates goes
// to the owner alone, however slow it is.
func TestStrictCandidateNeverReadsBackup(t *testing.T) {
	pf := startPair(t, answerAfter(slowAnswer, false), answerAfter(0, true))
	c := pairClient(t, pf, slowBudget)
	for i, v := range checkViewer(t, c, strictCand, strictCand) {
		if v.Failed() || v.Stale || !v.Allowed {
			t.Errorf("verdict %d: %+v, want the owner's", i, v)
		}
	}
	if n := pf.backupChecks.Load(); n != 0 {
		t.Errorf("the backup received %d checks, want none", n)
	}
}
