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

// TestBackupAnswerWithNewerEpochRefreshes: the owner dies and the ring
// moves on (the backup owns every viewer now, a newer epoch). The backup's
// answers to the failover carry that epoch: the client fetches the new
// topology at once and asks the new owner as the owner, rather than keep
// trying the dead one first and reading a backup's copy until its
// RefreshInterval (an hour here) runs out.
func TestBackupAnswerWithNewerEpochRefreshes(t *testing.T) {
	var epoch atomic.Uint64
	epoch.Store(3)
	var asOwner atomic.Int64 // checks the backup got as the viewer's owner
	backup := func(m *proto.Check) *proto.CheckResult {
		if !m.Backup {
			asOwner.Add(1)
		}
		r := answer(m, m.Backup)
		r.Epoch = epoch.Load()
		return r
	}
	pf := startPair(t, answerAfter(0, false), backup)
	c := newClient(t, func(cfg *client.Config) { cfg.RefreshInterval = time.Hour }, pf.owner.addr())
	readyPair(t, c)
	checkViewer(t, c, softCand)

	// The owner dies; the backup's ring (epoch 4) names it the owner of
	// every partition.
	pf.owner.close()
	pf.backup.mu.Lock()
	pf.backup.topo = pf.topology(4, 1, 0)
	pf.backup.mu.Unlock()
	epoch.Store(4)

	deadline := time.Now().Add(20 * time.Second)
	for asOwner.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the client still asks the dead owner first (%d checks at the backup, none as the owner)", pf.backupChecks.Load())
		}
		if _, err := c.Check(context.Background(), "viewer-1", []fcap.Candidate{softCand}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
