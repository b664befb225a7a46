package proto

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
)

// A case is a message that must survive a round trip. want is what
// decoding gives when that differs from msg (an ignored time, a clamped
// verdict); nil means msg itself.
type testCase struct {
	name string
	msg  Message
	want Message
}

func (c testCase) expected() Message {
	if c.want != nil {
		return c.want
	}
	return c.msg
}

var (
	capCreative = fcap.Cap{Scope: "creative", ID: "cr-1", Limit: 3, Window: time.Hour}
	capCampaign = fcap.Cap{Scope: "campaign", ID: "кампания-42", Limit: 10, Window: 24 * time.Hour, Algorithm: fcap.Buckets, Mode: fcap.Strict}
	// capAdv, capOdd and capMaxStr carry the longest windows, either way,
	// that a time.Duration holds in whole milliseconds (2^63 ns): the
	// wire's window of fcap.MaxTime milliseconds decodes to the longest.
	capAdv    = fcap.Cap{Scope: "advertiser", ID: "adv-🎯", Limit: fcap.MaxLimit, Window: fcap.Millis(fcap.MaxTime), Algorithm: fcap.Fixed}
	capZero   = fcap.Cap{}
	capOdd    = fcap.Cap{Scope: strings.Repeat("s", 32), ID: strings.Repeat("i", 256), Limit: -1, Window: fcap.Millis(math.MinInt64), Algorithm: 255, Mode: 255}
	capMaxStr = fcap.Cap{Scope: "creative", ID: strings.Repeat("m", MaxStringLen), Limit: math.MaxInt64, Window: fcap.Millis(math.MaxInt64)}
)

// manyCaps returns n distinct caps.
func manyCaps(n int) []fcap.Cap {
	caps := make([]fcap.Cap, n)
	for i := range caps {
		caps[i] = fcap.Cap{Scope: "creative", ID: fmt.Sprintf("creative-%d", i), Limit: int64(1 + i%100), Window: time.Duration(i+1) * time.Second, Algorithm: fcap.Algorithm(i % 3), Mode: fcap.Mode(i % 2)}
	}
	return caps
}

// benchTable returns the check of an ad request: 100 candidates, each
// with its creative, campaign and advertiser cap: 100 creatives, 50
// campaigns, 10 advertisers, 160 distinct caps.
func benchTable() fcap.CheckTable {
	var t fcap.CheckTable
	for i := range 100 {
		t.Caps = append(t.Caps, fcap.Cap{Scope: "creative", ID: fmt.Sprintf("creative-%06d", i), Limit: 3, Window: time.Hour})
	}
	for i := range 50 {
		t.Caps = append(t.Caps, fcap.Cap{Scope: "campaign", ID: fmt.Sprintf("campaign-%05d", i), Limit: 10, Window: 24 * time.Hour, Algorithm: fcap.Buckets})
	}
	for i := range 10 {
		t.Caps = append(t.Caps, fcap.Cap{Scope: "advertiser", ID: fmt.Sprintf("advertiser-%04d", i), Limit: 50, Window: 7 * 24 * time.Hour, Mode: fcap.Strict})
	}
	for i := range 100 {
		t.Refs = append(t.Refs, uint16(i), uint16(100+i/2), uint16(150+i/10))
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
	}
	return t
}

func testCases() []testCase {
	table := fcap.CheckTable{
		Caps: []fcap.Cap{capCreative, capCampaign, capAdv},
		Refs: []uint16{0, 1, 2, 1, 2, 2},
		Ends: []uint32{3, 5, 6},
	}
	wide := fcap.CheckTable{Caps: manyCaps(40)}
	for i := range 40 {
		wide.Refs = append(wide.Refs, uint16(i), uint16(39-i))
		wide.Ends = append(wide.Ends, uint32(len(wide.Refs)))
	}
	members := []Member{
		{Name: "node-a", Addr: "10.0.0.1:7400", HTTPAddr: "10.0.0.1:7401", State: 1, Incarnation: 1},
		{Name: "nœud-b", Addr: "[::1]:7400", State: 2, Incarnation: math.MaxInt64},
		{Name: "node-c", Addr: "10.0.0.3:7400", HTTPAddr: "", State: 255, Incarnation: -1},
	}
	items := make([]RecordItem, 32)
	for i := range items {
		items[i] = RecordItem{
			Viewer:     fmt.Sprintf("viewer-%d", i%5),
			Impression: fcap.Impression{ID: fmt.Sprintf("imp-%d", i), Time: int64(i) * 1000, Caps: []fcap.Cap{capCreative, capCampaign, capAdv}[:1+i%3], Reservation: uint64(i % 2)},
			HasTime:    i%4 != 0,
		}
		if !items[i].HasTime {
			items[i].Impression.Time = 0
		}
	}
	return []testCase{
		{name: "ping", msg: &Ping{}},
		{name: "ping/from-a-node", msg: &Ping{From: "n2", FromEpoch: 0xfeed}},
		{name: "pong", msg: &Pong{Epoch: 1234, Name: "node-a"}},
		{name: "pong/absent", msg: &Pong{Epoch: 1234, Name: "node-a", Absent: true}},
		{name: "pong/zero", msg: &Pong{}},
		{name: "pong/max", msg: &Pong{Epoch: math.MaxUint64, Name: "ノード"}},
		{name: "topology-request", msg: &TopologyRequest{}},
		{name: "topology-request/region-link", msg: &TopologyRequest{Region: "eu", Regions: []string{"ap", "eu", "us"}}},
		{name: "topology", msg: &Topology{Epoch: 7, Partitions: 3, Replicas: 2, Members: members, Owners: []uint16{0, 1, 1, 2, NoOwner, NoOwner}}},
		{name: "topology/empty", msg: &Topology{}},
		{name: "topology/no-owners", msg: &Topology{Epoch: 1, Partitions: 271, Replicas: 1, Members: members[:1], Owners: repeat16(NoOwner, 271)}},
		{name: "topology/members-only", msg: &Topology{Epoch: math.MaxUint64, Members: members}},
		{name: "check", msg: &Check{Viewer: "viewer-1", Now: 1_700_000_000_000, HasNow: true, Table: table}},
		{name: "check/tick-0", msg: &Check{Viewer: "v", Now: 0, HasNow: true, Table: table}},
		{name: "check/no-now", msg: &Check{Viewer: "v", Table: table}},
		{name: "check/now-ignored", msg: &Check{Viewer: "v", Now: 42, Table: table}, want: &Check{Viewer: "v", Table: table}},
		{name: "check/max-int64", msg: &Check{Viewer: "v", Now: math.MaxInt64, HasNow: true, Table: table}},
		{name: "check/negative-now", msg: &Check{Viewer: "v", Now: math.MinInt64, HasNow: true, Table: table}},
		{name: "check/empty", msg: &Check{}},
		{name: "check/unicode", msg: &Check{Viewer: "зритель-日本-🎯", HasNow: true, Now: 1, Table: fcap.CheckTable{Caps: []fcap.Cap{capAdv}, Refs: []uint16{0}, Ends: []uint32{1}}}},
		{name: "check/wide", msg: &Check{Viewer: "v", HasNow: true, Now: 5, Table: wide}},
		{name: "check/budget", msg: &Check{Viewer: "v", Table: table, Backup: true, Budget: 4500 * time.Microsecond}},
		{name: "check/budget-rounds-up", msg: &Check{Viewer: "v", Table: table, Budget: 1}, want: &Check{Viewer: "v", Table: table, Budget: time.Microsecond}},
		{name: "check/odd-caps", msg: &Check{Viewer: "v", Table: fcap.CheckTable{Caps: []fcap.Cap{capZero, capOdd, capMaxStr}, Refs: []uint16{0, 65535}, Ends: []uint32{1, math.MaxUint32}}}},
		{name: "check/backup", msg: &Check{Viewer: "v", Table: table, Backup: true}},
		{name: "check/bench", msg: &Check{Viewer: "viewer-1234567890", Now: 1_700_000_000_000, HasNow: true, Table: benchTable()}},
		{name: "check-result", msg: &CheckResult{Epoch: 9, Now: 1_700_000_000_000, Verdicts: []fcap.Verdict{
			{Allowed: true, Remaining: 2, Blocking: -1},
			{Allowed: false, Remaining: 0, Blocking: 0},
			{Allowed: true, Remaining: fcap.MaxLimit, Blocking: -1},
			{Remaining: 0, Blocking: 254},
			{Remaining: 0, Blocking: 255},
			{Remaining: 1, Blocking: 256},
			{Remaining: 0, Blocking: maxBlocking},
		}}},
		{name: "check-result/empty", msg: &CheckResult{}},
		{name: "check-result/stale", msg: &CheckResult{Epoch: 3, Now: 7, Verdicts: []fcap.Verdict{{Allowed: true, Remaining: 1, Blocking: -1}}, Left: []uint16{1}, Stale: true}},
		{name: "check-result/left", msg: &CheckResult{Epoch: 2, Now: 7, Verdicts: []fcap.Verdict{{Allowed: true, Remaining: 2, Blocking: -1}}, Left: []uint16{2, 0, fcap.MaxLimit}}},
		{name: "check-result/clamped",
			msg:  &CheckResult{Now: 0, Verdicts: []fcap.Verdict{{Allowed: true, Remaining: 70000, Blocking: -1}, {Remaining: -3, Blocking: 1}}},
			want: &CheckResult{Now: 0, Verdicts: []fcap.Verdict{{Allowed: true, Remaining: 65535, Blocking: -1}, {Remaining: 0, Blocking: 1}}}},
		{name: "check-result/many", msg: &CheckResult{Epoch: 1, Now: 5, Verdicts: manyVerdicts(100)}},
		{name: "allow", msg: &Allow{Viewer: "viewer-1", Now: 1000, HasNow: true, Caps: []fcap.Cap{capCreative, capCampaign, capAdv}}},
		{name: "allow/tick-0", msg: &Allow{Viewer: "v", Now: 0, HasNow: true, Caps: []fcap.Cap{capCreative}}},
		{name: "allow/no-now", msg: &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}}},
		{name: "allow/now-ignored", msg: &Allow{Viewer: "v", Now: -5, Caps: []fcap.Cap{capCreative}}, want: &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}}},
		{name: "allow/empty", msg: &Allow{}},
		{name: "allow/backup", msg: &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}, Backup: true}},
		{name: "allow/budget", msg: &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}, Budget: 5 * time.Millisecond}},
		{name: "allow/max-budget", msg: &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}, Budget: MaxBudget}},
		{name: "allow/budget-clamped", msg: &Allow{Viewer: "v", Budget: time.Hour}, want: &Allow{Viewer: "v", Budget: MaxBudget}},
		{name: "allow/negative-budget", msg: &Allow{Viewer: "v", Budget: -time.Second}, want: &Allow{Viewer: "v"}},
		{name: "allow/max-caps", msg: &Allow{Viewer: "v", Now: math.MaxInt64, HasNow: true, Caps: manyCaps(MaxCapsPerMessage)}},
		{name: "allow-result", msg: &AllowResult{Epoch: 3, Now: 1000, Verdict: fcap.Verdict{Allowed: true, Remaining: 2, Blocking: -1}}},
		{name: "allow-result/denied", msg: &AllowResult{Epoch: math.MaxUint64, Now: 0, Verdict: fcap.Verdict{Blocking: 2}}},
		{name: "allow-result/grant", msg: &AllowResult{Epoch: 3, Now: 1000, Verdict: fcap.Verdict{Allowed: true, Remaining: 2, Blocking: -1}, Grant: math.MaxUint64}},
		{name: "allow-result/odd", msg: &AllowResult{Now: math.MinInt64, Verdict: fcap.Verdict{Allowed: true, Remaining: math.MaxInt64, Blocking: math.MinInt64}}},
		{name: "record", msg: &Record{Items: items}},
		{name: "record/one", msg: &Record{Items: []RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "imp", Time: 0, Caps: []fcap.Cap{capCreative}, Reservation: math.MaxUint64}, HasTime: true}}}},
		{name: "record/time-ignored",
			msg:  &Record{Items: []RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "imp", Time: 99, Caps: []fcap.Cap{capCreative}}}}},
			want: &Record{Items: []RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "imp", Caps: []fcap.Cap{capCreative}}}}}},
		{name: "record/empty", msg: &Record{}},
		{name: "record/backup", msg: &Record{Items: []RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "imp", Caps: []fcap.Cap{capCreative}}}}, Backup: true}},
		{name: "record/empty-item", msg: &Record{Items: []RecordItem{{}}}},
		{name: "record-result", msg: &RecordResult{Epoch: 4, Results: []ItemResult{{Status: fcap.Recorded}, {Status: fcap.Duplicate}, {Status: fcap.Stale}, {Code: CodeNotOwner}, {Code: 0xFFFF}}}},
		{name: "record-result/empty", msg: &RecordResult{}},
		{name: "reserve", msg: &Reserve{Viewer: "viewer-1", Now: 1000, HasNow: true, TTL: 30_000, Caps: []fcap.Cap{capCreative, capAdv}}},
		{name: "reserve/no-now", msg: &Reserve{Viewer: "v", TTL: 1, Caps: []fcap.Cap{capCreative}}},
		{name: "reserve/budget", msg: &Reserve{Viewer: "v", TTL: 1, Caps: []fcap.Cap{capCreative}, Budget: 1234567 * time.Microsecond}},
		{name: "reserve/tick-0", msg: &Reserve{Viewer: "v", HasNow: true, TTL: math.MaxInt64, Caps: []fcap.Cap{capCreative}}},
		{name: "reserve-result", msg: &ReserveResult{Epoch: 5, Now: 1000, Verdict: fcap.Verdict{Allowed: true, Remaining: 0, Blocking: -1}, ID: math.MaxUint64}},
		{name: "reserve-result/denied", msg: &ReserveResult{Epoch: 5, Now: 1000, Verdict: fcap.Verdict{Blocking: 1}}},
		{name: "release", msg: &Release{Viewer: "viewer-1", ID: 0xDEADBEEFCAFE}},
		{name: "release/zero", msg: &Release{}},
		{name: "release-result", msg: &ReleaseResult{Epoch: 12}},
		{name: "undo", msg: &Undo{Viewer: "viewer-1", Grant: 0x9e3779b97f4a7c15}},
		{name: "undo-result", msg: &UndoResult{Epoch: 12, Undone: true}},
		{name: "undo-result/nothing", msg: &UndoResult{Epoch: 12}},
		{name: "erase", msg: &Erase{Viewer: "viewer-1"}},
		{name: "erase-result", msg: &EraseResult{Epoch: 12, Devices: 2}},
		{name: "void", msg: &Void{Viewer: "viewer-1", Impression: fcap.Impression{ID: "imp-9", Time: 1_700_000_000_000, Caps: []fcap.Cap{{Scope: "campaign", ID: "c1", Limit: 3, Window: time.Hour}}}}},
		{name: "void-result", msg: &VoidResult{Epoch: 12, Voided: true}},
		{name: "pull", msg: &Pull{From: "node-1", Keys: []uint64{1, math.MaxUint64}}},
		{name: "pull/empty", msg: &Pull{}},
		{name: "pull-result", msg: &PullResult{From: "node-2", HighWater: 1_700_000_000_000, States: []byte{1, 2, 3}, Left: 7}},
		{name: "region-merge", msg: &RegionMerge{Region: "eu-west-1", HighWater: 1_700_000_000_000, States: []byte{1, 2, 3, 4, 5}}},
		{name: "region-merge/empty", msg: &RegionMerge{}},
		{name: "region-merge-result", msg: &RegionMergeResult{Epoch: 7, Applied: 31, Refused: []uint64{1, math.MaxUint64}}},
		{name: "region-merge-result/empty", msg: &RegionMergeResult{}},
		{name: "share-ask", msg: &ShareAsk{Region: "eu", Regions: []string{"ap", "eu", "us"}, Viewer: "viewer-1", Cap: fcap.Cap{Scope: "campaign", ID: "c1", Limit: 5, Window: time.Hour, Mode: fcap.Strict}, Transfer: math.MaxUint64}},
		{name: "share-ask/empty", msg: &ShareAsk{}},
		{name: "share-give", msg: &ShareGive{Epoch: 7, Given: true}},
		{name: "share-give/refused", msg: &ShareGive{Epoch: 7}},
		{name: "region-digest", msg: &RegionDigest{Origin: "eu", Now: 1_700_000_000_000, Partitions: 271, Partition: 270, Slices: 4, Slice: 3, Keys: []uint64{1, math.MaxUint64}}},
		{name: "region-digest/whole", msg: &RegionDigest{Origin: "eu", Partitions: 1}},
		{name: "region-digest-result", msg: &RegionDigestResult{Epoch: 7, Digests: []ViewerDigest{{Key: 1, Sum: math.MaxUint64}, {Key: math.MaxUint64, Sum: 1}}, Truncated: true}},
		{name: "region-digest-result/empty", msg: &RegionDigestResult{}},
		{name: "replicate", msg: &Replicate{From: "node-1", Epoch: 7, HighWater: 1_700_000_000_000, States: []byte{1, 2, 3, 4, 5}, Done: []uint32{0, 270}, Handoff: []uint32{3}}},
		{name: "replicate/empty", msg: &Replicate{}},
		{name: "replicate/copied", msg: &Replicate{From: "node-1", Epoch: 7, Copied: []uint32{4, 270}}},
		{name: "replicate-result", msg: &ReplicateResult{Epoch: 7, Applied: 31, Refused: 2}},
		{name: "status-request", msg: &StatusRequest{}},
		{name: "status", msg: &Status{Name: "n1", Epoch: 9, State: 2, Viewers: 1, Keys: 2, Bytes: 3, Primaries: 4, Backups: 5, Syncing: 6, Handing: 7, ReplicationQueue: 8, UnderReplicated: 9, Members: 10, Requests: 11, LagMillis: 12, JoinError: "not joined: 10.0.0.9:7946: connection refused",
			Authority: true, QuorumMembers: 3, QuorumConfirmed: 2, Claimed: 4, Failed: []FailedMember{{Name: "n3", Addr: "10.0.0.3:7700", SinceMillis: 1_700_000_000_000}}, Replicas: 2, Drifting: 3,
			Departed: []DepartedMember{{Name: "n4", AtMillis: 1_700_000_001_000}, {Name: "n5", AtMillis: 1_700_000_000_500, Forgotten: true}},
			Version:  "v1.2.0", UptimeMillis: 3_600_000, MemoryLimit: 4 << 30, RecentMillis: 60_000, RecentRequests: 1200, RecentErrors: 3, P99Nanos: 250_000, P99Over: true}},
		{name: "status/regions", msg: &Status{Name: "n1", Epoch: 9, State: 2, Members: 3, Version: "v1.3.0",
			Regions: []RegionStatus{{Name: "us-east", Reachable: true, LagMillis: 40, Queue: 12, Lent: 3, Borrowed: 1 << 40}, {Name: "ap", LagMillis: 600_000, Queue: 1 << 20}}}},
		{name: "status/retired-region", msg: &Status{Name: "n1", Epoch: 9, State: 2, Members: 3, Version: "v1.3.0",
			Regions: []RegionStatus{{Name: "eu", Reachable: true}, {Name: "ap", Retired: true, RetiredAtMillis: 1_700_000_000_000}}}},
		{name: "retire-region", msg: &RetireRegion{Region: "ap", Force: true}},
		{name: "retire-region-result", msg: &RetireRegionResult{AtMillis: 1_700_000_000_000, New: true}},
		{name: "forget", msg: &Forget{Node: "n3"}},
		{name: "forget-result", msg: &ForgetResult{Failed: 1}},
		{name: "drain", msg: &Drain{TimeoutMillis: 30000}},
		{name: "drain-result", msg: &DrainResult{Partitions: 90}},
		{name: "sync-request", msg: &SyncRequest{From: "n2", Partitions: []uint32{1, 2, 270}, Handoffs: []uint32{5}}},
		{name: "sync-request/no-handoffs", msg: &SyncRequest{From: "n2", Partitions: []uint32{1}}},
		{name: "sync-request/relays", msg: &SyncRequest{From: "n2", Handoffs: []uint32{5}, Relays: []uint32{5, 9}}},
		{name: "sync-request/copies", msg: &SyncRequest{From: "n2", Copies: []uint32{3, 7}}},
		{name: "sync-result", msg: &SyncResult{Pushing: []uint32{2}}},
		{name: "inspect", msg: &Inspect{Viewer: "viewer-1"}},
		{name: "viewer-state", msg: &ViewerState{Found: true, Primary: true, Reservations: 1, RememberedIDs: 3, Keys: []KeyInfo{
			{Hash: 0xFEEDFACE, Algorithm: 0, Window: 3_600_000, Limit: 3, Values: []int64{1000, 2000}},
			{Hash: 7, Algorithm: 2, Window: 86_400_000, Limit: 10, Bucket: 20_000, Values: []int64{4}},
		}}},
		{name: "viewer-state/not-found", msg: &ViewerState{}},
		{name: "viewer-state/identity", msg: &ViewerState{Found: true, LinkedTo: "person-1", Devices: []string{"phone", "tv"}}},
		{name: "verify", msg: &Verify{Now: 1_700_000_000_000, Partitions: []uint32{0, 17, 270}, Viewers: true, Log: true}},
		{name: "verify/all", msg: &Verify{}},
		{name: "verify/slice", msg: &Verify{Now: 5, Partitions: []uint32{3}, Viewers: true, Slices: 4, Slice: 3}},
		{name: "verify-result", msg: &VerifyResult{Node: "n1", Epoch: 42, Logged: true, LogError: "", Changed: 3,
			Partitions: []PartitionDigest{{Partition: 17, Held: true, Viewers: 2, Sum: math.MaxUint64, LogViewers: 2, LogSum: 5}},
			Viewers:    []ViewerDigest{{Key: 0xDEADBEEF, Sum: 1, Log: 0}}, Truncated: true}},
		{name: "verify-result/empty", msg: &VerifyResult{}},
		{name: "link", msg: &Link{Device: "phone-1", Viewer: "person-1"}},
		{name: "link-result", msg: &LinkResult{Epoch: 3, Merged: 12}},
		{name: "unlink", msg: &Unlink{Device: "phone-1"}},
		{name: "unlink-result", msg: &UnlinkResult{Epoch: 3, Viewer: "person-1"}},
		{name: "resolve", msg: &Resolve{Devices: []string{"phone-1", "tv-2"}, Backup: true}},
		{name: "resolve-result", msg: &ResolveResult{Epoch: 3, Viewers: []string{"person-1", ""}}},
		{name: "link-device", msg: &LinkDevice{Device: "phone-1", Viewer: "person-1", At: 1_700_000_000_000, Unlink: true}},
		{name: "link-device-result", msg: &LinkDeviceResult{State: []byte{1, 2, 3}}},
		{name: "error", msg: &Error{Code: CodeNotOwner, Message: "viewer moved", Epoch: 1234}},
		{name: "error/empty", msg: &Error{}},
		{name: "error/unknown-code", msg: &Error{Code: 0xFFFF, Message: "from the future ✨"}},
	}
}

func repeat16(v uint16, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func manyVerdicts(n int) []fcap.Verdict {
	vs := make([]fcap.Verdict, n)
	for i := range vs {
		if i%3 == 0 {
			vs[i] = fcap.Verdict{Allowed: true, Remaining: int64(i), Blocking: -1}
		} else {
			vs[i] = fcap.Verdict{Blocking: i % 3}
		}
	}
	return vs
}

// sameValue is reflect.DeepEqual, except that a nil slice equals an
// empty one: Decode into a fresh message leaves an empty list nil, into
// a reused one empty.
func sameValue(a, b any) bool { return same(reflect.ValueOf(a), reflect.ValueOf(b)) }

func same(a, b reflect.Value) bool {
	if a.Kind() != b.Kind() || a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return same(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !same(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !same(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
}

// wireForm restates, independently of the encoder, the layout each
// message's documentation gives, as the values a generic msgpack decoder
// should find: integers as int64 (uint64 past MaxInt64), strings,
// bools, nil, []byte for bins and []any for arrays.
func failedWire(fs []FailedMember) []any {
	out := []any{}
	for _, f := range fs {
		out = append(out, []any{f.Name, f.Addr, f.SinceMillis})
	}
	return out
}

func departedWire(ds []DepartedMember) []any {
	out := []any{}
	for _, d := range ds {
		out = append(out, []any{d.Name, d.AtMillis, d.Forgotten})
	}
	return out
}

func wireForm(m Message) []any {
	switch m := m.(type) {
	case *Ping:
		if m.From != "" {
			return []any{m.From, u(m.FromEpoch)}
		}
		return []any{}
	case *TopologyRequest:
		if m.Region == "" && len(m.Regions) == 0 {
			return []any{}
		}
		regions := []any{}
		for _, r := range m.Regions {
			regions = append(regions, r)
		}
		return []any{m.Region, regions}
	case *Pong:
		if m.Absent {
			return []any{u(m.Epoch), m.Name, true}
		}
		return []any{u(m.Epoch), m.Name}
	case *Topology:
		members := []any{}
		for _, mb := range m.Members {
			members = append(members, []any{mb.Name, mb.Addr, mb.HTTPAddr, int64(mb.State), mb.Incarnation})
		}
		return []any{u(m.Epoch), int64(m.Partitions), int64(m.Replicas), members, le16(m.Owners)}
	case *Check:
		return []any{m.Viewer, optTime(m.Now, m.HasNow), capsForm(m.Table.Caps), le16(m.Table.Refs), le32(m.Table.Ends), m.Backup, budgetForm(m.Budget)}
	case *CheckResult:
		packed := []byte{}
		for _, v := range m.Verdicts {
			rem := uint16(min(max(v.Remaining, 0), 65535))
			b := v.Blocking + 1
			flags := byte(0)
			if v.Allowed {
				flags |= 1
			}
			if b >= 256 {
				flags |= 2
			}
			packed = append(packed, byte(rem), byte(rem>>8), byte(b), flags)
		}
		return []any{u(m.Epoch), m.Now, packed, le16(m.Left), m.Stale}
	case *Allow:
		return []any{m.Viewer, optTime(m.Now, m.HasNow), capsForm(m.Caps), budgetForm(m.Budget), m.Backup}
	case *AllowResult:
		if m.Grant != 0 {
			return []any{u(m.Epoch), m.Now, verdictForm(m.Verdict), u(m.Grant)}
		}
		return []any{u(m.Epoch), m.Now, verdictForm(m.Verdict)}
	case *Undo:
		return []any{m.Viewer, u(m.Grant)}
	case *UndoResult:
		return []any{u(m.Epoch), m.Undone}
	case *Erase:
		return []any{m.Viewer}
	case *EraseResult:
		return []any{u(m.Epoch), u(m.Devices)}
	case *Void:
		return []any{m.Viewer, m.Impression.ID, m.Impression.Time, capsForm(m.Impression.Caps)}
	case *VoidResult:
		return []any{u(m.Epoch), m.Voided}
	case *Pull:
		keys := []any{}
		for _, k := range m.Keys {
			keys = append(keys, u(k))
		}
		return []any{m.From, keys}
	case *PullResult:
		states := m.States
		if states == nil {
			states = []byte{}
		}
		return []any{m.From, m.HighWater, states, u(m.Left)}
	case *RegionMerge:
		states := m.States
		if states == nil {
			states = []byte{}
		}
		return []any{m.Region, m.HighWater, states}
	case *ShareAsk:
		regions := []any{}
		for _, r := range m.Regions {
			regions = append(regions, r)
		}
		return []any{m.Region, regions, m.Viewer, capsForm([]fcap.Cap{m.Cap})[0], u(m.Transfer)}
	case *ShareGive:
		return []any{u(m.Epoch), m.Given}
	case *RegionDigest:
		keys := []byte{}
		for _, k := range m.Keys {
			keys = binary.LittleEndian.AppendUint64(keys, k)
		}
		return []any{m.Origin, m.Now, u(uint64(m.Partitions)), u(uint64(m.Partition)), u(uint64(m.Slices)), u(uint64(m.Slice)), keys}
	case *RegionDigestResult:
		pairs := []byte{}
		for _, v := range m.Digests {
			pairs = binary.LittleEndian.AppendUint64(pairs, v.Key)
			pairs = binary.LittleEndian.AppendUint64(pairs, v.Sum)
		}
		return []any{u(m.Epoch), pairs, m.Truncated}
	case *RegionMergeResult:
		refused := []byte{}
		for _, k := range m.Refused {
			refused = binary.LittleEndian.AppendUint64(refused, k)
		}
		return []any{u(m.Epoch), u(m.Applied), refused}
	case *Reserve:
		return []any{m.Viewer, optTime(m.Now, m.HasNow), m.TTL, capsForm(m.Caps), budgetForm(m.Budget)}
	case *ReserveResult:
		return []any{u(m.Epoch), m.Now, verdictForm(m.Verdict), u(m.ID)}
	case *Release:
		return []any{m.Viewer, u(m.ID)}
	case *ReleaseResult:
		return []any{u(m.Epoch)}
	case *Replicate:
		done := []byte{}
		for _, p := range m.Done {
			done = append(done, byte(p), byte(p>>8), byte(p>>16), byte(p>>24))
		}
		st := m.States
		if st == nil {
			st = []byte{}
		}
		handoff := []byte{}
		for _, p := range m.Handoff {
			handoff = append(handoff, byte(p), byte(p>>8), byte(p>>16), byte(p>>24))
		}
		if len(m.Copied) > 0 {
			return []any{m.From, u(m.Epoch), m.HighWater, st, done, handoff, le32(m.Copied)}
		}
		return []any{m.From, u(m.Epoch), m.HighWater, st, done, handoff}
	case *ReplicateResult:
		return []any{u(m.Epoch), u(m.Applied), u(m.Refused)}
	case *StatusRequest:
		return []any{}
	case *Inspect:
		return []any{m.Viewer}
	case *Verify:
		if m.Slices > 1 {
			return []any{m.Now, le32(m.Partitions), m.Viewers, m.Log, u(uint64(m.Slices)), u(uint64(m.Slice))}
		}
		return []any{m.Now, le32(m.Partitions), m.Viewers, m.Log}
	case *Link:
		return []any{m.Device, m.Viewer}
	case *LinkResult:
		return []any{u(m.Epoch), u(m.Merged)}
	case *Unlink:
		return []any{m.Device}
	case *UnlinkResult:
		return []any{u(m.Epoch), m.Viewer}
	case *Resolve:
		ds := []any{}
		for _, d := range m.Devices {
			ds = append(ds, d)
		}
		return []any{ds, m.Backup}
	case *ResolveResult:
		vs := []any{}
		for _, v := range m.Viewers {
			vs = append(vs, v)
		}
		return []any{u(m.Epoch), vs}
	case *LinkDevice:
		return []any{m.Device, m.Viewer, m.At, m.Unlink}
	case *LinkDeviceResult:
		return []any{m.State}
	case *VerifyResult:
		parts := []any{}
		for _, p := range m.Partitions {
			parts = append(parts, []any{u(uint64(p.Partition)), p.Held, u(p.Viewers), u(p.Sum), u(p.LogViewers), u(p.LogSum)})
		}
		viewers := []any{}
		for _, v := range m.Viewers {
			viewers = append(viewers, []any{u(v.Key), u(v.Sum), u(v.Log)})
		}
		return []any{m.Node, u(m.Epoch), m.Logged, m.LogError, u(m.Changed), parts, viewers, m.Truncated}
	case *ViewerState:
		keys := []any{}
		for _, k := range m.Keys {
			vals := []any{}
			for _, v := range k.Values {
				vals = append(vals, v)
			}
			keys = append(keys, []any{u(k.Hash), int64(k.Algorithm), k.Window, k.Limit, k.Bucket, vals})
		}
		devs := []any{}
		for _, d := range m.Devices {
			devs = append(devs, d)
		}
		return []any{m.Found, m.Primary, u(m.Reservations), u(m.RememberedIDs), keys, m.LinkedTo, devs}
	case *Status:
		form := []any{m.Name, u(m.Epoch), int64(m.State), u(m.Viewers), u(m.Keys), u(m.Bytes), u(m.Primaries), u(m.Backups), u(m.Syncing), u(m.Handing), u(m.ReplicationQueue), u(m.UnderReplicated), u(m.Members), u(m.Requests), u(m.LagMillis), m.JoinError,
			m.Authority, u(m.QuorumMembers), u(m.QuorumConfirmed), u(m.Claimed), failedWire(m.Failed), u(m.Replicas), u(m.Drifting), departedWire(m.Departed),
			m.Version, u(m.UptimeMillis), u(m.MemoryLimit), u(m.RecentMillis), u(m.RecentRequests), u(m.RecentErrors), u(m.P99Nanos), m.P99Over}
		if len(m.Regions) > 0 {
			rs := []any{}
			for _, r := range m.Regions {
				f := []any{r.Name, r.Reachable, u(r.LagMillis), u(r.Queue), u(r.Lent), u(r.Borrowed)}
				if r.Retired {
					f = append(f, r.RetiredAtMillis)
				}
				rs = append(rs, f)
			}
			form = append(form, rs)
		}
		return form
	case *RetireRegion:
		return []any{m.Region, m.Force}
	case *RetireRegionResult:
		return []any{m.AtMillis, m.New}
	case *Forget:
		return []any{m.Node}
	case *ForgetResult:
		return []any{u(m.Failed)}
	case *Drain:
		return []any{m.TimeoutMillis}
	case *DrainResult:
		return []any{u(m.Partitions)}
	case *SyncRequest:
		if len(m.Copies) > 0 {
			return []any{m.From, le32(m.Partitions), le32(m.Handoffs), le32(m.Relays), le32(m.Copies)}
		}
		if len(m.Relays) > 0 {
			return []any{m.From, le32(m.Partitions), le32(m.Handoffs), le32(m.Relays)}
		}
		return []any{m.From, le32(m.Partitions), le32(m.Handoffs)}
	case *SyncResult:
		return []any{le32(m.Pushing)}
	case *Record:
		items := []any{}
		for _, it := range m.Items {
			imp := it.Impression
			items = append(items, []any{it.Viewer, imp.ID, optTime(imp.Time, it.HasTime), capsForm(imp.Caps), u(imp.Reservation)})
		}
		return []any{items, m.Backup}
	case *RecordResult:
		results := []any{}
		for _, r := range m.Results {
			results = append(results, []any{int64(r.Status), int64(r.Code)})
		}
		return []any{u(m.Epoch), results}
	case *Error:
		return []any{int64(m.Code), m.Message, u(m.Epoch)}
	}
	panic(fmt.Sprintf("wireForm: %T", m))
}

func u(v uint64) any {
	if v > math.MaxInt64 {
		return v
	}
	return int64(v)
}

// budgetForm is a budget as it travels: whole microseconds, rounded up.
func budgetForm(b time.Duration) any {
	return int64((b + time.Microsecond - 1) / time.Microsecond)
}

func optTime(t int64, ok bool) any {
	if !ok {
		return nil
	}
	return t
}

func capsForm(caps []fcap.Cap) []any {
	out := []any{}
	for _, c := range caps {
		out = append(out, []any{c.Scope, c.ID, c.Limit, c.WindowMillis(), int64(c.Algorithm), int64(c.Mode)})
	}
	return out
}

func verdictForm(v fcap.Verdict) []any {
	return []any{v.Allowed, v.Remaining, int64(v.Blocking)}
}

func le16(vs []uint16) []byte {
	b := []byte{}
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func le32(vs []uint32) []byte {
	b := []byte{}
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

// normalize turns what msgpack's generic decoding returns into
// wireForm's terms: every integer type to int64 (uint64 past MaxInt64
// stays uint64).
func normalize(v any) any {
	switch v := v.(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return u(v)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = normalize(v[i])
		}
		return out
	case []byte:
		if v == nil {
			return []byte{}
		}
	}
	return v
}
