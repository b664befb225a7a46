// Package statuspage serves a node's status page: the cluster as the node
// sees it, in one self-contained HTML page (no scripts, no external
// assets) that reloads itself, under a one-line verdict (verdict.go).
// Each member's figures come from its own Status over the data plane:
// its version and uptime, memory against its limit, the p99 and errors of
// its recent requests (serving.go); request rates are the change since
// the previous page load.
package statuspage

import (
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Source is what the page reads of its node.
type Source interface {
	// Name is the node's member name.
	Name() string
	// Ring is the ring the node routes by.
	Ring() *ring.Ring
	// Status is the node's own status, as it answers a StatusRequest.
	Status() *proto.Status
	// Counters are the node's cumulative event counts.
	Counters() Counters
}

// Counters are a node's cumulative counts of the events that make ad
// servers fall back.
type Counters struct {
	APICalls       int64 // JSON API calls
	APIFailOpen    int64 // JSON API calls answered by the failure policy as open
	SyncRefusals   int64 // requests refused while their partition was arriving
	BackupReads    int64 // checks answered as a backup (the owner was unreachable)
	StrictFailures int64 // strict writes refused: a backup did not acknowledge
}

// StatusFunc asks the member at addr for its status.
type StatusFunc func(ctx context.Context, addr string) (*proto.Status, error)

// Page is a node's status page, an http.Handler for "GET /".
type Page struct {
	src      Source
	statusOf StatusFunc
	log      *slog.Logger

	mu   sync.Mutex
	last map[string]pageSample // guarded by mu

	recent recentEvents
}

// New returns the status page of the node src describes; statusOf asks
// the other members for theirs.
func New(src Source, statusOf StatusFunc, log *slog.Logger) *Page {
	return &Page{src: src, statusOf: statusOf, log: log, last: map[string]pageSample{}}
}

type pageMember struct {
	Name, Addr, State, Color string
	Reachable                bool
	Err                      string
	Primaries, Backups       int
	Keys, Viewers            uint64
	Rate                     string // requests/s since the previous page
	Syncing, UnderRepl       uint64
	Queue                    uint64
	Lag                      string
	Self                     bool
	// RingPrimaries is how many partitions the ring picture colors for
	// it (its primaries in this node's ring), and Share that as a percentage.
	RingPrimaries int
	Share         string
	// Strict says whether it may grant strict writes ("yes 2/3", or "NO
	// 1/3": members confirming its ring of the member set).
	Strict    string
	NoStrict  bool
	Claimed   uint64
	Failed    bool   // a failed member: vanished without a drain
	FailedFor string // since when, for a failed member
	JoinError string // why it joined none of its seeds
	serving          // version, uptime, memory against its limit, recent p99 and errors
}

type pageArc struct {
	Path, Color, Title string
}

type pageData struct {
	Self, Epoch          string
	Partitions, Replicas int
	Members              []pageMember
	Arcs                 []pageArc
	Unowned              int // partitions the ring picture shows grey
	// The fail-over chart's time axis: a label every two minutes.
	Ticks []pageTick
	// Endpoints lists everything the HTTP address serves, for the footer.
	Endpoints             []Endpoint
	BackupReads, Syncing  uint64
	APIFailOpen, APICalls int64
	Generated             string
	// Recent fail-overs: one bar per step, newest right.
	Bars                []pageBar
	RecentTotal         int64
	RecentSpan          string
	RecentAPI, RecentSR int64
	RecentBR, RecentSF  int64

	// RingMembers is how many members this node's ring has.
	RingMembers int
	// Verdict is the line at the top: "healthy" or "degraded: ..."
	// (verdict.go).
	Verdict string
	Healthy bool
	// The verdict's thresholds, for the note under the table.
	ErrorLimit, P99Limit, MemoryWarn string

	// Regions are this node's links to its peer regions (empty on a node
	// of a single region: the panel is not drawn).
	Regions []pageRegion
}

// pageRegion is one peer region as this node's link sees it.
type pageRegion struct {
	Name      string
	Reachable bool
	Lag       string
	LagBad    bool // over regionLagWarn: soft caps overshoot by what the lag lets through
	Queue     uint64
}

// regionLagWarn is the lag the regions panel marks (the alert
// FcapRegionLag fires at 30 s held for 10 minutes).
const regionLagWarn = 30 * time.Second

// regions turns the node's Status into the regions panel.
func regions(st *proto.Status) []pageRegion {
	var out []pageRegion
	for _, r := range st.Regions {
		lag := time.Duration(r.LagMillis) * time.Millisecond
		out = append(out, pageRegion{Name: r.Name, Reachable: r.Reachable, Lag: lag.String(), LagBad: lag > regionLagWarn, Queue: r.Queue})
	}
	return out
}

type pageTick struct {
	X      float64
	Label  string
	Anchor string // the end labels stay inside the chart
}

// Endpoint is one route of a node's HTTP address.
type Endpoint struct{ Method, Path, What string }

// Endpoints is everything a node's HTTP address may serve, in the
// footer's order. A test keeps it in step with the routes.
var Endpoints = []Endpoint{
	{"GET", "/", "this page"},
	{"GET", "/metrics", "Prometheus metrics"},
	{"GET", "/healthz", "alive"},
	{"GET", "/readyz", "ready to serve (503 and the reason otherwise)"},
	{"POST", "/v1/check", "JSON API"},
	{"POST", "/v1/allow", "JSON API"},
	{"POST", "/v1/record", "JSON API"},
	{"POST", "/v1/reserve", "JSON API"},
	{"POST", "/v1/release", "JSON API"},
	{"POST", "/v1/link", "JSON API"},
	{"POST", "/v1/unlink", "JSON API"},
	{"POST", "/v1/resolve", "JSON API"},
	{"POST", "/v1/void", "JSON API"},
	{"GET", "/openapi.yaml", "the JSON API's OpenAPI spec"},
	{"GET", "/debug/pprof/", "Go profiles, with --pprof"},
}

// Routes are the paths of Endpoints.
func Routes() []string {
	var out []string
	for _, e := range Endpoints {
		out = append(out, e.Path)
	}
	return out
}

type pageBar struct {
	X, Y, H float64
	Title   string
}

// pageSample remembers a member's request count for the next page's rate.
type pageSample struct {
	at       time.Time
	requests uint64
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

// ServeHTTP renders the page.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	d := p.data(ctx)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplate.Execute(w, d); err != nil {
		p.log.Debug("status page", "err", err)
	}
}

func (p *Page) data(ctx context.Context) *pageData {
	self := p.src.Name()
	rg := p.src.Ring()
	members := rg.Members()
	d := &pageData{
		Self:       self,
		Epoch:      fmt.Sprintf("%016x", rg.Epoch()),
		Partitions: rg.Partitions(),
		Replicas:   rg.Replicas(),
		Generated:  time.Now().UTC().Format(time.RFC3339),
		Endpoints:  Endpoints,
	}
	// Every member's status, asked concurrently (this node's directly).
	statuses := make([]*proto.Status, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == self {
			statuses[i] = p.src.Status()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], errs[i] = p.statusOf(ctx, m.Addr)
		}()
	}
	wg.Wait()

	p.mu.Lock()
	now := time.Now()
	colors := map[string]string{}
	for i, m := range members {
		pm := pageMember{Name: m.Name, Addr: m.Addr, State: m.State.String(), Color: palette[i%len(palette)], Self: m.Name == self, Rate: "-", Lag: "-", serving: noServing}
		colors[m.Name] = pm.Color
		if st := statuses[i]; st != nil {
			pm.Reachable = true
			pm.Primaries, pm.Backups = int(st.Primaries), int(st.Backups)
			pm.Keys, pm.Viewers = st.Keys, st.Viewers
			pm.JoinError = st.JoinError
			pm.fill(pm.Name, st)
			pm.Syncing, pm.UnderRepl, pm.Queue = st.Syncing, st.UnderReplicated, st.ReplicationQueue
			pm.Lag = (time.Duration(st.LagMillis) * time.Millisecond).String()
			pm.Strict, pm.NoStrict, pm.Claimed = fmt.Sprintf("yes %d/%d", st.QuorumConfirmed, st.QuorumMembers), !st.Authority, st.Claimed
			if !st.Authority {
				pm.Strict = fmt.Sprintf("NO %d/%d", st.QuorumConfirmed, st.QuorumMembers)
			}
			if prev, ok := p.last[m.Name]; ok && st.Requests >= prev.requests && now.Sub(prev.at) > 0 {
				pm.Rate = fmt.Sprintf("%.0f/s", float64(st.Requests-prev.requests)/now.Sub(prev.at).Seconds())
			}
			p.last[m.Name] = pageSample{now, st.Requests}
		} else if errs[i] != nil {
			pm.Err = errs[i].Error()
		}
		d.Members = append(d.Members, pm)
	}
	p.mu.Unlock()
	// Failed members, as this node counts them, until they return or
	// are forgotten (fcapctl forget).
	if st := p.src.Status(); st != nil {
		d.Regions = regions(st)
		for _, f := range st.Failed {
			d.Members = append(d.Members, pageMember{Name: f.Name, Addr: f.Addr, State: "failed", Color: "#dddddd", Failed: true,
				FailedFor: time.Since(time.UnixMilli(f.SinceMillis)).Round(time.Second).String(), Err: "no answer since " + time.UnixMilli(f.SinceMillis).UTC().Format(time.RFC3339)})
		}
	}
	sort.SliceStable(d.Members, func(i, j int) bool { return d.Members[i].Name < d.Members[j].Name })

	// The ring: one arc per partition, in its primary's color; the
	// legend counts them.
	const cx, cy, r0, r1 = 160.0, 160.0, 90.0, 150.0
	P := rg.Partitions()
	primaries := map[string]int{}
	for part := range P {
		owners := rg.Owners(part)
		color, title := "#dddddd", fmt.Sprintf("partition %d: no owner", part)
		if len(owners) == 0 {
			d.Unowned++
		} else {
			primaries[rg.Member(owners[0]).Name]++
			var names []string
			for _, o := range owners {
				names = append(names, rg.Member(o).Name)
			}
			color = colors[names[0]]
			title = fmt.Sprintf("partition %d: %v", part, names)
		}
		a0 := 2*math.Pi*float64(part)/float64(P) - math.Pi/2
		a1 := 2*math.Pi*float64(part+1)/float64(P) - math.Pi/2
		path := fmt.Sprintf("M%.1f,%.1f A%.0f,%.0f 0 0 1 %.1f,%.1f L%.1f,%.1f A%.0f,%.0f 0 0 0 %.1f,%.1f Z",
			cx+r1*math.Cos(a0), cy+r1*math.Sin(a0), r1, r1, cx+r1*math.Cos(a1), cy+r1*math.Sin(a1),
			cx+r0*math.Cos(a1), cy+r0*math.Sin(a1), r0, r0, cx+r0*math.Cos(a0), cy+r0*math.Sin(a0))
		d.Arcs = append(d.Arcs, pageArc{Path: path, Color: color, Title: title})
	}
	for i := range d.Members {
		m := &d.Members[i]
		m.RingPrimaries = primaries[m.Name]
		m.Share = fmt.Sprintf("%.1f%%", 100*float64(m.RingPrimaries)/float64(max(P, 1)))
	}
	c := p.src.Counters()
	d.BackupReads, d.Syncing = uint64(c.BackupReads), uint64(c.SyncRefusals)
	d.APIFailOpen, d.APICalls = c.APIFailOpen, c.APICalls
	d.recent(p.history())
	d.RingMembers = len(members)
	d.judge()
	return d
}

// recent draws the recent fail-overs: a bar per step, scaled to the
// largest.
func (d *pageData) recent(h []recentSample) {
	const width, height = 300.0, 60.0
	d.RecentSpan = (recentSteps * recentStep).String()
	if len(h) < recentSteps {
		d.RecentSpan += fmt.Sprintf(", %v recorded so far", time.Duration(len(h))*recentStep)
	}
	var top int64
	for _, s := range h {
		top = max(top, s.total())
		d.RecentTotal += s.total()
		d.RecentAPI += s.APIFailOpen
		d.RecentSR += s.SyncRefusals
		d.RecentBR += s.BackupReads
		d.RecentSF += s.StrictFailures
	}
	bw := width / recentSteps
	const tick = 2 * time.Minute
	for t := time.Duration(0); t <= recentSteps*recentStep; t += tick {
		label := "now"
		if t > 0 {
			label = "-" + strings.TrimSuffix(t.String(), "0s")
		}
		anchor := "middle"
		switch t {
		case 0:
			anchor = "end"
		case recentSteps * recentStep:
			anchor = "start"
		}
		d.Ticks = append(d.Ticks, pageTick{X: width - float64(t/recentStep)*bw, Label: label, Anchor: anchor})
	}
	for i, s := range h {
		if s.total() == 0 {
			continue
		}
		bh := height * float64(s.total()) / float64(top)
		x := width - float64(len(h)-i)*bw
		d.Bars = append(d.Bars, pageBar{X: x, Y: height - bh, H: bh,
			Title: fmt.Sprintf("%s: %d JSON API fail-open, %d refused while syncing, %d backup reads, %d strict write failures",
				s.At.UTC().Format("15:04:05"), s.APIFailOpen, s.SyncRefusals, s.BackupReads, s.StrictFailures)})
	}
}

func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for x := b / unit; x >= unit; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

var pageTemplate = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="5">
<title>fcap · {{.Self}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} .sub{color:#666;margin-bottom:16px}
table{border-collapse:collapse;margin:12px 0;font-size:13px} th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right}
th{background:#f6f6f6} td{white-space:nowrap} td.l,th.l{text-align:left} .dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:6px}
.bad{color:#c00;font-weight:600} .row{display:flex;gap:32px;align-items:flex-start;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:12px 16px}
.verdict{font-size:16px;font-weight:600;padding:8px 12px;border-radius:6px;margin:8px 0}
.verdict.ok{background:#e7f5e9;color:#1b5e20} .verdict.degraded{background:#fdecea;color:#b71c1c}
</style></head><body>
<h1>fcap cluster, seen from {{.Self}}</h1>
<div id="verdict" class="verdict {{if .Healthy}}ok{{else}}degraded{{end}}">{{.Verdict}}</div>
<div class="sub">ring epoch {{.Epoch}} · {{.Partitions}} partitions · R={{.Replicas}} · {{len .Members}} members · {{.Generated}} · reloads every 5 s</div>
<div class="row">
<div class="card"><b>Ring ownership</b> (primary of each partition)<br>
<svg id="ring" width="320" height="320" viewBox="0 0 320 320" role="img" aria-label="partition ownership">
{{range .Arcs}}<path d="{{.Path}}" fill="{{.Color}}" stroke="#fff" stroke-width="0.5"><title>{{.Title}}</title></path>
{{end}}<text x="160" y="165" text-anchor="middle" font-size="13">{{.Partitions}} partitions</text>
</svg>
<div id="legend">{{range .Members}}<div><span class="dot" style="background:{{.Color}}"></span>{{.Name}}: {{.RingPrimaries}} primaries ({{.Share}})</div>
{{end}}{{if .Unowned}}<div><span class="dot" style="background:#dddddd"></span>no owner: {{.Unowned}}</div>{{end}}<small>one slice per partition, in its primary's color; hover a slice for its owners</small></div></div>
<div class="card"><b>This node</b><br>
checks answered as a backup (stale): {{.BackupReads}}<br>
requests refused while syncing: {{.Syncing}}<br>
JSON API: {{.APICalls}} calls, <span {{if .APIFailOpen}}class="bad"{{end}}>{{.APIFailOpen}} failed open</span>
</div>
<div class="card" id="recent"><b>Recent fail-overs on this node</b> (last {{.RecentSpan}}, 10 s bars)<br>
<svg width="310" height="76" viewBox="-5 0 310 76" role="img" aria-label="recent fail-overs">
<rect x="0" y="0" width="300" height="60" fill="#fafafa" stroke="#eee"/>
{{range .Bars}}<rect x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" width="4" height="{{printf "%.1f" .H}}" fill="#d62728"><title>{{.Title}}</title></rect>
{{end}}<g class="axis" font-size="10" fill="#666">{{range .Ticks}}<line x1="{{printf "%.1f" .X}}" y1="60" x2="{{printf "%.1f" .X}}" y2="64" stroke="#999"/><text x="{{printf "%.1f" .X}}" y="74" text-anchor="{{.Anchor}}">{{.Label}}</text>
{{end}}</g></svg><br>
<span {{if .RecentTotal}}class="bad"{{end}}>{{.RecentTotal}} events</span>: {{.RecentAPI}} JSON API fail-open, {{.RecentSR}} refused while syncing,
{{.RecentBR}} backup reads, {{.RecentSF}} strict write failures<br>
<small>Go clients count their own fail-opens (fcap_client_policy_verdicts_total).</small>
</div></div>
<table id="members">
<tr><th class="l">member</th><th class="l">address</th><th class="l">state</th><th class="l">version</th><th>uptime</th><th>primaries</th><th>backups</th><th>viewers</th><th>counters</th><th title="counter state against --memory-limit">memory of limit</th><th>requests</th><th title="99th percentile of the handling time on the node of ad servers' requests over the last minute: the bound of the latency bucket holding it">p99, 1 min</th><th title="ad servers' requests answered with an error over the last minute">errors, 1 min</th><th>syncing</th><th>under-replicated</th><th>repl. queue</th><th>repl. lag</th><th>strict</th></tr>
{{range .Members}}<tr>
<td class="l"><span class="dot" style="background:{{.Color}}"></span>{{.Name}}{{if .Self}} (this node){{end}}</td>
<td class="l">{{.Addr}}</td><td class="l">{{.State}}</td>
{{if .Reachable}}<td class="l">{{.Version}}</td><td>{{.Uptime}}</td><td>{{.Primaries}}</td><td>{{.Backups}}</td><td>{{.Viewers}}</td><td>{{.Keys}}</td><td {{if .MemoryBad}}class="bad"{{end}}>{{.Memory}}</td><td>{{.Rate}}</td>
<td title="{{.Window}}" {{if .P99Bad}}class="bad"{{end}}>{{.P99}}</td><td title="{{.Window}}" {{if .ErrorsBad}}class="bad"{{end}}>{{.Errors}}</td>
<td {{if .Syncing}}class="bad"{{end}}>{{.Syncing}}</td><td {{if .UnderRepl}}class="bad"{{end}}>{{.UnderRepl}}</td><td>{{.Queue}}</td><td>{{.Lag}}</td>
<td {{if or .NoStrict .Claimed}}class="bad"{{end}}>{{.Strict}}{{if .Claimed}}, {{.Claimed}} claimed{{end}}</td>
{{else if .Failed}}<td colspan="15" class="l bad">FAILED {{.FailedFor}} ago: {{.Err}}; counts toward the majority until it returns or <code>fcapctl forget {{.Name}}</code></td>
{{else}}<td colspan="15" class="l bad">unreachable: {{.Err}}</td>{{end}}
</tr>{{end}}
</table>
{{if .Regions}}<h2>Peer regions</h2>
<table id="regions">
<tr><th class="l">region</th><th class="l">link</th><th title="age of the oldest change this node has not yet had acknowledged by the region">lag</th><th title="changed viewers waiting to be shipped">queue</th></tr>
{{range .Regions}}<tr><td class="l">{{.Name}}</td>{{if .Reachable}}<td class="l">up</td>{{else}}<td class="l bad">DOWN: soft changes queue here; a viewer may get a soft cap in each region meanwhile</td>{{end}}<td {{if .LagBad}}class="bad"{{end}}>{{.Lag}}</td><td>{{.Queue}}</td></tr>
{{end}}</table>
<div class="sub">As this node ships to them: each node ships the changes of the partitions it is primary of (fcapctl status lists every node's links).</div>{{end}}
<div class="sub" id="rules">p99 and errors: of ad servers' requests (check, allow, record, reserve, release, identity, undo, erase, void) over the last minute, on the node (the network not included); p99 is the bound of the latency bucket that holds it.
The verdict is degraded by a member that does not answer, failed or joined no cluster, fewer members than replicas, partitions syncing, under-replicated or claimed, a member without a strict majority,
errors over {{.ErrorLimit}} of a member's requests, a p99 over {{.P99Limit}}, or memory at {{.MemoryWarn}} of a member's limit.</div>
<div class="sub" id="endpoints">Served here: {{range $i, $e := .Endpoints}}{{if $i}} · {{end}}{{if eq $e.Method "GET"}}<a href="{{$e.Path}}">{{$e.Path}}</a>{{else}}{{$e.Method}} {{$e.Path}}{{end}} ({{$e.What}}){{end}}</div>
</body></html>
`))
