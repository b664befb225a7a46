package deploy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// runbookURL is where every alert's runbook_url points: a section of
// docs/runbook.md.
const runbookURL = "https://github.com/fcap-io/fcap/blob/main/docs/runbook.md#"

// alertRule is one rule of the alerts file, as far as these tests read it.
type alertRule struct {
	name, expr, runbook string
}

// alertRules reads the rules of prometheus/fcap-alerts.yaml line by line
// (the file is a flat list of rules; promtool checks its syntax): each
// "- alert:" starts a rule, its expr and runbook_url follow.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var rules []alertRule
	for _, line := range strings.Split(readFile(t, "prometheus/fcap-alerts.yaml"), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "- alert:"); ok {
			rules = append(rules, alertRule{name: strings.TrimSpace(name)})
			continue
		}
		if len(rules) == 0 {
			continue
		}
		r := &rules[len(rules)-1]
		if v, ok := strings.CutPrefix(line, "expr:"); ok {
			r.expr = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "runbook_url:"); ok {
			r.runbook = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if len(rules) < 20 {
		t.Fatalf("read %d alert rules from prometheus/fcap-alerts.yaml", len(rules))
	}
	return rules
}

// headingAnchors returns the anchors GitHub gives a Markdown file's
// headings: the heading's text in lower case, every character that is
// not a letter, digit, space, hyphen or underscore removed, spaces made
// hyphens; a repeated anchor gets -1, -2, ... Headings inside fenced
// code blocks are not headings.
func headingAnchors(markdown string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || len(line) > level && line[level] != ' ' {
			continue
		}
		a := githubAnchor(line[level:])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGitHubAnchors(t *testing.T) {
	md := "# fcap runbook\n\n## FcapNodeDown\ntext\n```sh\n# not a heading\n```\n## What to do: `fcapctl drain`\n## Durability: --data-dir\n## FcapNodeDown\n#hashtag\n"
	got := headingAnchors(md)
	for _, want := range []string{"fcap-runbook", "fcapnodedown", "what-to-do-fcapctl-drain", "durability---data-dir", "fcapnodedown-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] || got["hashtag"] || len(got) != 5 {
		t.Errorf("anchors %v: want only the five headings", got)
	}
}

// TestEveryAlertHasARunbookSection: every alert's runbook_url is a
// section of docs/runbook.md that exists, and every alert section of the
// runbook belongs to an alert.
func TestEveryAlertHasARunbookSection(t *testing.T) {
	runbook := readFile(t, "../docs/runbook.md")
	anchors := headingAnchors(runbook)
	alerts := map[string]bool{}
	for _, r := range alertRules(t) {
		alerts[r.name] = true
		anchor, ok := strings.CutPrefix(r.runbook, runbookURL)
		switch {
		case r.runbook == "":
			t.Errorf("%s has no runbook_url annotation", r.name)
		case !ok || anchor == "":
			t.Errorf("%s: runbook_url %q is not a section of %s", r.name, r.runbook, strings.TrimSuffix(runbookURL, "#"))
		case !anchors[anchor]:
			t.Errorf("%s: runbook_url %q: docs/runbook.md has no heading with anchor #%s", r.name, r.runbook, anchor)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## (Fcap\w+)\s*$`).FindAllStringSubmatch(runbook, -1) {
		if !alerts[m[1]] {
			t.Errorf("docs/runbook.md has a section for %s, which is no alert", m[1])
		}
	}
}
