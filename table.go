package fcap

// CheckTable is a Check request in table form: every distinct cap once,
// and each candidate as a list of indexes into Caps. An ad request's
// candidates share most caps (one advertiser cap across ten creatives),
// so the table is how the wire carries a check and how the engine counts
// each counter once.
type CheckTable struct {
	Caps []Cap
	// Refs holds every candidate's cap indexes, candidate after
	// candidate.
	Refs []uint16
	// Ends[i] is where candidate i's indexes end in Refs; candidate i
	// holds Refs[Ends[i-1]:Ends[i]] (from 0 for the first).
	Ends []uint32
}

// Candidates returns the number of candidates.
func (t *CheckTable) Candidates() int { return len(t.Ends) }

// Reset empties the table, keeping its storage.
func (t *CheckTable) Reset() {
	t.Caps, t.Refs, t.Ends = t.Caps[:0], t.Refs[:0], t.Ends[:0]
}
