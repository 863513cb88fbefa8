package report

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/record"
)

// Cause is one entry of What failed: a root cause with every failure it
// explains (First is set), or a threshold check that failed on its own
// (Check is set).
type Cause struct {
	// First is the cause's first failure: where it was met first, and its error.
	First record.Failure
	// Failures counts the failures of this cause; Phases (in the order
	// they were met) and Models (sorted) say where they were.
	Failures int
	Phases   []string
	Models   []string
	// Fix is what to change, where wakebench knows the cause ("" where not).
	Fix string
	// Checks are the failed checks of the phases (and models) this cause
	// failed: they follow from it, so they are listed with it.
	Checks []record.Check
	// Check is a check that failed with no failure of its phase and model
	// behind it (a threshold missed on its own).
	Check *record.Check

	rank    int
	key     string           // the error with what varies between its places taken out
	members []record.Failure // every failure of the cause
}

// The order of What failed: what stops the run itself, then the servers,
// then the phases, then the thresholds missed on their own, then go test
// saying that a test failed (what the lines above already say).
const (
	rankRun = iota
	rankServer
	rankPhase
	rankCheck
	rankEcho
)

// WhatFailed is rep's failures grouped by their cause and its checks that
// fail the run, in the order to read them: each cause once, with how often
// and where it was met, the fix where it is known, and the checks it made
// fail; the checks that failed on their own after the failures (go
// test's own "test … failed" lines last). A
// failure's cause is its error with its model labels and names and every
// number taken out; one whose error ends with another's (a step that met
// the same error deeper, "make room for B: sleep A level 1: …") has that
// one's cause. The order is the record's within each rank, so it is the
// same for the same record.
func WhatFailed(rep Report) []Cause {
	names := namesOf(rep)
	var causes []*Cause
	for _, f := range rep.Failures {
		key, rank := names.key(f.Error), failureRank(f)
		c := findCause(causes, key, rank)
		if c == nil {
			c = &Cause{First: f, rank: rank, key: key}
			causes = append(causes, c)
		}
		if len(key) < len(c.key) {
			c.key = key // the innermost error the cause's failures share
		}
		c.Failures++
		c.members = append(c.members, f)
		if f.Phase != "" && !slices.Contains(c.Phases, f.Phase) {
			c.Phases = append(c.Phases, f.Phase)
		}
		if f.Model != "" && !slices.Contains(c.Models, f.Model) {
			c.Models = append(c.Models, f.Model)
		}
		if fix := fixOf(f.Error); fix != "" && !strings.Contains(c.Fix, fix) {
			c.Fix = strings.TrimPrefix(c.Fix+"; "+fix, "; ")
		}
	}
	slices.SortStableFunc(causes, func(a, b *Cause) int { return a.rank - b.rank })
	out := make([]Cause, 0, len(causes))
	for _, c := range causes {
		slices.Sort(c.Models)
		out = append(out, *c)
	}
	// Only the failures' causes can explain a check: a check's own cause
	// has no members. Searching those alone keeps this linear in the
	// checks (a soak's 30000 failed checks took 13 s against every cause).
	failures := len(out)
	for _, ch := range rep.Checks {
		if !ch.Fails() {
			continue
		}
		if i := slices.IndexFunc(out[:failures], func(c Cause) bool { return c.explains(ch) }); i >= 0 {
			out[i].Checks = append(out[i].Checks, ch)
			continue
		}
		out = append(out, Cause{Check: &ch, rank: rankCheck})
	}
	slices.SortStableFunc(out, func(a, b Cause) int { return a.rank - b.rank })
	return out
}

// explains reports whether ch failed because of c: a failure of c's was
// met in ch's phase, for ch's model (or for none, or ch is of none).
func (c Cause) explains(ch record.Check) bool {
	if c.rank == rankEcho || ch.Phase == "" {
		return false
	}
	return slices.ContainsFunc(c.members, func(f record.Failure) bool {
		return f.Phase == ch.Phase && (f.Model == "" || ch.Model == "" || f.Model == ch.Model)
	})
}

// String is the cause as What failed's line says it: where it was met
// first and its error, then how often and where else; or the check.
func (c Cause) String() string {
	if c.Check != nil {
		return "check " + c.Check.String()
	}
	s := c.First.Where(" / ") + ": " + c.First.Error
	if c.Failures < 2 {
		return s
	}
	s += fmt.Sprintf(" — the same cause %d times", c.Failures)
	switch len(c.Phases) {
	case 0:
	case 1:
		s += ", in " + c.Phases[0]
	default:
		s += fmt.Sprintf(", in %d phases (%s)", len(c.Phases), strings.Join(c.Phases, ", "))
	}
	switch len(c.Models) {
	case 0:
	case 1:
		s += ", model " + c.Models[0]
	default:
		s += ", models " + strings.Join(c.Models, ", ")
	}
	return s
}

// Consequences says the checks that follow from c in one line ("" for none).
func (c Cause) Consequences() string {
	if len(c.Checks) == 0 {
		return ""
	}
	cs := make([]string, len(c.Checks))
	for i, ch := range c.Checks {
		cs[i] = ch.String()
	}
	what, of := "check", "that phase"
	if len(c.Checks) > 1 {
		what = "checks"
	}
	if len(c.Phases) > 1 {
		of = "those phases"
	}
	return fmt.Sprintf("and %d %s of %s: %s", len(c.Checks), what, of, strings.Join(cs, "; "))
}

// findCause is the cause of rank that key shares, or nil.
func findCause(causes []*Cause, key string, rank int) *Cause {
	for _, c := range causes {
		if c.rank == rank && sameCause(key, c.key) {
			return c
		}
	}
	return nil
}

// sameCause reports whether two errors (their keys) have one cause: they
// are the same, or one ends with the other, whole from a ": ", and that
// one says more than a single clause ("context deadline exceeded" alone
// ends too many errors to be one cause).
func sameCause(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	return a == b || (strings.Contains(b, ": ") && strings.HasSuffix(a, ": "+b))
}

var (
	// echoRE: the failures go test's own run records when a test failed,
	// whose cause the lines above name (main_test.go).
	echoRE = regexp.MustCompile(`^(test \S+ failed \(see the go test output\)|go test exits \d+: a test failed \(see its output\))$`)
	// serverRE: a server that exited (package server's ExitErr), one that
	// never became ready (the pool's start error, which names its log),
	// and a port in use (the pool's).
	serverRE = regexp.MustCompile(`\bserver \S+ exited: |; server log: |\bis already in use\b`)
	digitsRE = regexp.MustCompile(`[0-9]+`)
)

// failureRank is where f stands in What failed.
func failureRank(f record.Failure) int {
	switch {
	case echoRE.MatchString(f.Error):
		return rankEcho
	case f.Phase == "config" || f.Phase == "setup" || f.Phase == "run" || strings.HasPrefix(f.Step, "run stopped during"):
		return rankRun
	case serverRE.MatchString(f.Error):
		return rankServer
	}
	return rankPhase
}

// causeNames takes the run's model labels and names out of an error.
type causeNames struct{ re *regexp.Regexp }

func namesOf(rep Report) causeNames {
	var words []string
	for _, l := range slices.Sorted(maps.Keys(rep.Models)) {
		words = append(words, l)
		if m := rep.Models[l]; m != nil && m.Name != "" {
			words = append(words, m.Name)
		}
	}
	for _, f := range rep.Failures {
		if f.Model != "" && !slices.Contains(words, f.Model) {
			words = append(words, f.Model)
		}
	}
	if len(words) == 0 {
		return causeNames{}
	}
	// The longest first, so that a name holding a label is taken whole.
	slices.SortStableFunc(words, func(a, b string) int { return len(b) - len(a) })
	alts := make([]string, len(words))
	for i, w := range words {
		alts[i] = regexp.QuoteMeta(w)
	}
	return causeNames{regexp.MustCompile(`(^|[^\w.-])(` + strings.Join(alts, "|") + `)($|[^\w-])`)}
}

// key is err with the model labels and names, and every number (a level,
// a duration, a port, a PID), taken out.
func (n causeNames) key(err string) string {
	if n.re != nil {
		// Twice: adjacent names share the character between them ("A→B").
		err = n.re.ReplaceAllString(n.re.ReplaceAllString(err, "$1<m>$3"), "$1<m>$3")
	}
	return digitsRE.ReplaceAllString(err, "#")
}

// fixes are the causes wakebench knows and what to change for each, matched
// on the words wakebench's own code writes for them (package vllm's sleep
// endpoint errors, the pool's, the backend's), never on a server's prose.
var fixes = []struct {
	re  *regexp.Regexp
	fix string
}{
	// vllm.ErrNoDevMode: a 404 or 405 on /sleep, /wake_up or /is_sleeping.
	{regexp.MustCompile(`the server has no sleep endpoints`),
		"start vLLM with VLLM_SERVER_DEV_MODE=1 in its environment (and --enable-sleep-mode): vLLM has /sleep, /wake_up and /is_sleeping only then. wakebench sets it for the servers it starts, so a wrapper script that drops the environment, or a vLLM older than 0.7.3, has none"},
	// vllm.ErrSleepModeOff: vLLM refused /sleep, sleep mode being off.
	{regexp.MustCompile(`the server runs without sleep mode`),
		"start vLLM with --enable-sleep-mode: wakebench passes it (and refuses extra_args that turn it off), so a wrapper script that drops flags, or a vLLM config file of its own, turned it off"},
	// The pool's confirmation of a sleep (pool.Transition.Verify).
	{regexp.MustCompile(`/sleep\?level=\d+ answered 200 but (/is_sleeping is false|the server did not sleep)`),
		"the server stayed awake after /sleep: start vLLM with --enable-sleep-mode (wakebench passes it and refuses extra_args that turn it off, so a wrapper script that drops flags, or a vLLM that ignores the flag, kept it off)"},
	// The pool's start on a configured port another process holds.
	{regexp.MustCompile(`port (\d+), config (models\[\d+\]\.port), is already in use`),
		"another process holds port $1: stop it, or set $2 to a free port (0: wakebench picks one)"},
	// The backend's search for the server program.
	{regexp.MustCompile(`config command ("[^"]*"): `),
		"install vLLM where PATH finds it, or set the config key command to the vllm executable's path (it is $1)"},
}

// fixOf is what to change for the cause of err, "" where it is not known.
func fixOf(err string) string {
	for _, k := range fixes {
		if m := k.re.FindStringSubmatchIndex(err); m != nil {
			return string(k.re.ExpandString(nil, k.fix, err, m))
		}
	}
	return ""
}
