// Package ingest drives fcapingest and real fcapd processes against a
// Kafka protocol implementation in the test process (kfake): what only
// real processes show, a kill -9 of the ingester or of a node.
package ingest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

// deadline bounds every wait of these tests: race-built nodes on a busy
// 2-core machine, a group rebalance after a kill, a node declared dead.
const deadline = 120 * time.Second

// kafka is a kfake cluster in the test process and a producer.
type kafka struct {
	t       testing.TB
	brokers []string
	prod    *kgo.Client
	adm     *kadm.Client
	// commits logs every offset commit the cluster received: who
	// committed what, for the post-mortem of a miscount.
	commits *cluster.LogBuffer
}

func startKafka(t *testing.T, partitions int32, topics ...string) *kafka {
	t.Helper()
	return startKafkaB(t, partitions, topics...)
}

func startKafkaB(t testing.TB, partitions int32, topics ...string) *kafka {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &kafka{t: t, brokers: c.ListenAddrs(), commits: &cluster.LogBuffer{}}
	start := time.Now()
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		var parts []string
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, fmt.Sprintf("%d:%d", p.Partition, p.Offset))
			}
		}
		fmt.Fprintf(k.commits, "%8.3fs member %s generation %d: %s\n", time.Since(start).Seconds(), r.MemberID, r.Generation, strings.Join(parts, " "))
		return nil, nil, false // observed, handled as usual
	})
	k.prod, err = kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.prod.Close)
	k.adm = kadm.NewClient(k.prod)
	return k
}

func (k *kafka) produce(recs ...*kgo.Record) {
	k.t.Helper()
	if err := k.produceErr(recs...); err != nil {
		k.t.Fatal(err)
	}
}

// produceErr is produce for a goroutine other than the test's.
func (k *kafka) produceErr(recs ...*kgo.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return k.prod.ProduceSync(ctx, recs...).FirstErr()
}

// caughtUp reports whether the group committed every partition of topic
// to its end, and says where it is when not.
func (k *kafka) caughtUp(group, topic string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	committed, err := k.adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, err.Error()
	}
	ok, where := true, []string{}
	ends.Each(func(e kadm.ListedOffset) {
		c, found := committed.Lookup(e.Topic, e.Partition)
		at := int64(-1)
		if found && c.Err == nil {
			at = c.At
		}
		if e.Err != nil || at != e.Offset { // an end not listed is not reached
			ok = false
		}
		where = append(where, fmt.Sprintf("%d:%d/%d", e.Partition, at, e.Offset))
	})
	return ok, strings.Join(where, " ")
}

// committedAny reports whether the group committed anything past the
// start of topic.
func (k *kafka) committedAny(group string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, err := k.adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	any := false
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At > 0 {
			any = true
		}
	})
	return any
}

// impression is one impression as the JSON decoder reads it.
type impression struct {
	ID     string    `json:"id"`
	Viewer string    `json:"viewer"`
	Time   int64     `json:"time"`
	Caps   []jsonCap `json:"caps"`
}

type jsonCap struct {
	Scope  string `json:"scope"`
	ID     string `json:"id"`
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
	Mode   string `json:"mode,omitempty"`
}

// capLimit is every test cap's limit: far above any count, so a count is
// capLimit minus what a check says remains.
const capLimit = fcap.MaxLimit

func (i impression) record(topic string, partition int32, ts time.Time) *kgo.Record {
	b, _ := json.Marshal(i)
	return &kgo.Record{Topic: topic, Partition: partition, Timestamp: ts, Key: []byte(i.Viewer), Value: b}
}

// counts reads every viewer's count of the cap from the cluster, asking
// again while an answer is a fail-open, fail-closed or stale verdict
// (the cluster still settling after a kill).
func counts(t testing.TB, c *client.Client, viewers []string, caps []fcap.Cap) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, v := range viewers {
		cluster.Eventually(t, deadline, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := c.Check(ctx, v, []fcap.Candidate{{Caps: caps}})
			if err != nil || res.Verdicts[0].Failed() || res.Verdicts[0].Stale {
				return false
			}
			out[v] = capLimit - res.Verdicts[0].Remaining
			return true
		}, "no answer from the owner of %s", v)
	}
	return out
}

// ingester is one fcapingest process.
type ingester struct {
	t    *testing.T
	args []string
	cmd  *exec.Cmd
	http string
	logs *cluster.LogBuffer
	done chan struct{}
}

// startIngester starts fcapingest with the flags and waits for its ready
// line; the process is killed when the test ends.
func startIngester(t *testing.T, args ...string) *ingester {
	t.Helper()
	in := &ingester{t: t, args: args, logs: &cluster.LogBuffer{}, done: make(chan struct{})}
	in.cmd = exec.Command(cluster.Tool(t, "fcapingest"), append([]string{"--http", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stderr, err := in.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.kill)
	ready := make(chan string, 1)
	go func() {
		defer close(in.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			in.logs.Write(append(line, '\n'))
			var l struct{ Msg, HTTP string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "fcapingest ready" {
				ready <- l.HTTP
			}
		}
		in.cmd.Wait()
	}()
	select {
	case in.http = <-ready:
	case <-in.done:
		t.Fatalf("fcapingest exited before it was ready:\n%s", in.logs.String())
	case <-time.After(deadline):
		t.Fatalf("fcapingest not ready:\n%s", in.logs.String())
	}
	return in
}

// kill sends SIGKILL and waits for the process to go.
func (in *ingester) kill() {
	in.cmd.Process.Kill()
	<-in.done
}

// stop sends SIGTERM and waits for a clean exit.
func (in *ingester) stop() {
	in.t.Helper()
	in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(deadline):
		in.kill()
		in.t.Fatalf("fcapingest did not stop on SIGTERM:\n%s", in.logs.String())
	}
	if code := in.cmd.ProcessState.ExitCode(); code != 0 {
		in.t.Fatalf("fcapingest exited with %d:\n%s", code, in.logs.String())
	}
}

// metric returns one sample of the ingester's /metrics ("name" or
// `name{label="value"}`; a bare name sums every labelled sample of it),
// 0 when absent or unreachable.
func (in *ingester) metric(key string) float64 {
	samples, err := cluster.Scrape(in.http)
	if err != nil {
		return 0
	}
	if strings.Contains(key, "{") {
		return samples[key]
	}
	total := 0.0
	for k, v := range samples {
		if k == key || strings.HasPrefix(k, key+"{") && strings.HasSuffix(k, "}") {
			total += v
		}
	}
	return total
}

// startOne starts a cluster of one node (no seeds: it forms alone) and
// waits until it is ready.
func startOne(t testing.TB) []*cluster.Node {
	t.Helper()
	nodes := []*cluster.Node{cluster.Start(t, "n1", cluster.Options{})}
	cluster.WaitActive(t, nodes, 1)
	return nodes
}
