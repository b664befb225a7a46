package client

import "github.com/fcap-io/fcap"

// Pod places several ads from one Check result (an ad pod, a carousel,
// a page with several slots) without another round trip: Take(i)
// consumes one impression of candidate i from every cap it is subject to,
// locally, so one pod cannot place an ad more often than its caps have
// left, even when two candidates share a campaign or advertiser cap.
//
// A Pod is not safe for concurrent use, and it changes nothing on the
// cluster: Record (or Allow) the impressions that actually play.
type Pod struct {
	res   *CheckResult
	left  []int64 // per group of equal caps: impressions left
	group []int   // table cap index -> group
	taken []bool  // per candidate, for verdicts decided by the failure policy
}

// NewPod starts a pod from a Check result. Caps that are equal are one
// budget, whichever candidates carry them.
func NewPod(res *CheckResult) *Pod {
	n := res.caps.Len()
	p := &Pod{res: res, group: make([]int, n), taken: make([]bool, len(res.Verdicts))}
	// The result keeps the caps as they were sent, in their wire form:
	// equal caps have equal encodings.
	index := map[string]int{}
	for i := range n {
		form := res.caps.Form(i)
		g, ok := index[string(form)]
		if !ok {
			g = len(p.left)
			index[string(form)] = g
			p.left = append(p.left, fcap.MaxLimit)
		}
		p.group[i] = g
	}
	if len(res.left) == n {
		for i, l := range res.left {
			p.left[p.group[i]] = min(p.left[p.group[i]], int64(l))
		}
		return p
	}
	// No per-cap figures (a failed call): a cap has at most what the
	// candidates carrying it have left.
	for i := range res.Verdicts {
		for _, ref := range p.refs(i) {
			g := p.group[ref]
			p.left[g] = min(p.left[g], res.Verdicts[i].Remaining)
		}
	}
	return p
}

// refs returns candidate i's table cap indexes.
func (p *Pod) refs(i int) []uint16 {
	t := &p.res.table
	start := uint32(0)
	if i > 0 {
		start = t.Ends[i-1]
	}
	return t.Refs[start:t.Ends[i]]
}

// Take places candidate i once if its verdict allows it and every one of
// its caps has an impression left in this pod, and reports whether it
// did. A candidate whose verdict came from the failure policy may be
// taken once at most.
func (p *Pod) Take(i int) bool {
	if i < 0 || i >= len(p.res.Verdicts) {
		return false
	}
	v := p.res.Verdicts[i]
	if !v.Allowed {
		return false
	}
	if v.Failed() {
		if p.taken[i] {
			return false
		}
		p.taken[i] = true
		return true
	}
	refs := p.refs(i)
	for _, ref := range refs {
		if p.left[p.group[ref]] <= 0 {
			return false
		}
	}
	for j, ref := range refs {
		g := p.group[ref]
		if !seenGroupBefore(p, refs[:j], g) {
			p.left[g]--
		}
	}
	p.taken[i] = true
	return true
}

// seenGroupBefore reports whether a group already appeared among refs (a
// candidate listing one cap twice consumes it once).
func seenGroupBefore(p *Pod, refs []uint16, g int) bool {
	for _, r := range refs {
		if p.group[r] == g {
			return true
		}
	}
	return false
}

// Remaining is how many more times candidate i could be taken now.
func (p *Pod) Remaining(i int) int64 {
	if i < 0 || i >= len(p.res.Verdicts) || !p.res.Verdicts[i].Allowed {
		return 0
	}
	if p.res.Verdicts[i].Failed() {
		if p.taken[i] {
			return 0
		}
		return 1
	}
	left := int64(fcap.MaxLimit)
	for _, ref := range p.refs(i) {
		left = min(left, p.left[p.group[ref]])
	}
	return max(left, 0)
}
