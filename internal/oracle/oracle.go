// Package oracle decides whether a model still answers as it did before it
// slept: a fixed probe set, generated greedily once before the first sleep
// (the reference), is replayed after every wake and compared token by token,
// ids exactly and logprobs within a tolerance. A 200 response proves only
// that an endpoint returned; the replay proves the weights, adapters and
// KV-cache scales came back. It is pure: the pool sends the probes.
package oracle

import (
	"fmt"
	"math"
	"strconv"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Probe is one fixed request of the probe set.
type Probe struct {
	Name   string // "short", "long", "lora:<adapter>"
	Model  string // the served model or the adapter's name
	Prompt string
}

// Prompts of the probe set: a short one and a longer one (≈ 210 tokens, so
// a prefill spans several KV-cache blocks).
const (
	ShortPrompt = "The capital of France is"
	LongPrompt  = "A model server that sleeps frees the memory of its weights and of its key-value cache, " +
		"keeps its CUDA context and its compiled graphs, and wakes by copying the weights back from host memory " +
		"or, at the deeper level, by reading them again from storage. Anything that lives outside the memory pool " +
		"the sleep releases must come back exactly as it was: scales of a quantised cache, the state of a hybrid " +
		"model's recurrent layers, the adapters applied on top of the base weights, buffers such as rotary tables. " +
		"When one of them does not, the server still answers every request with status 200 and plausible text, and " +
		"only a comparison with what the same model said before it slept shows that the answer changed. Continue " +
		"this explanation with the steps a careful operator takes before trusting a woken model:"
)

// Set is the probe set of a model with the given LoRA adapter names.
func Set(model string, adapters []string) []Probe {
	ps := []Probe{{"short", model, ShortPrompt}, {"long", model, LongPrompt}}
	for _, a := range adapters {
		ps = append(ps, Probe{"lora:" + a, a, LongPrompt})
	}
	return ps
}

// Basis says what a comparison could compare, from what the server returned.
const (
	BasisLogprobs = "token ids + logprobs"
	BasisIDs      = "token ids"
	BasisText     = "text" // the server returned neither ids nor logprobs
)

// Basis is what ref allows comparing.
func Basis(ref vllm.Generation) string {
	switch {
	case ref.IDs != nil && ref.Logprobs != nil:
		return BasisLogprobs
	case ref.IDs != nil:
		return BasisIDs
	}
	return BasisText
}

// Kinds of divergence.
const (
	KindToken   = "token"   // another token id than the reference's
	KindLogprob = "logprob" // the same token, its logprob off by more than the tolerance
	KindLength  = "length"  // fewer or more tokens
	KindText    = "text"    // text differs (no ids to compare)
)

// Result is one probe's replay against its reference.
type Result struct {
	Match bool
	// Position is the 1-based ordinal of the first generated token that
	// diverged (0 when none did): comparison stops there, so a later
	// token can neither hide it nor take its place.
	Position int
	Kind     string
	Detail   string // what diverged, e.g. "id 17 (logprob -0.31), reference id 4 (logprob -0.12)"
	// Tie: the replay took another token at a near-tie of the reference,
	// every token before it the same and within the tolerance (the
	// replay's token was in the reference's top-k within the tolerance of
	// the reference's choice, at the logprob the reference gave it):
	// numerics, not corruption; comparison stopped there.
	Tie      int
	MaxDelta float64 // largest |logprob − reference logprob| over compared tokens
}

// Compare judges got against ref, token by token, and stops at the first
// divergence: ids must be equal and logprobs within tol (nats). A
// different id is a tie, not a divergence, where the reference's own top-k
// held got's token within tol of the token it chose and got gave that
// token the logprob the reference did, within tol (two nearly equal
// candidates, which numerics may order either way); comparison stops
// there too, since what follows another token is another continuation.
// A tie is only reached where nothing diverged before it: a logprob off by
// more than tol is the divergence, however the replay goes on (the drift
// of reset FP8 KV-cache scales changes logprobs first, tokens later).
func Compare(ref, got vllm.Generation, tol float64) Result {
	if ref.IDs == nil || got.IDs == nil {
		if ref.Text == got.Text {
			return Result{Match: true}
		}
		pos := commonPrefix(ref.Text, got.Text)
		return Result{Kind: KindText, Position: 1, Detail: fmt.Sprintf("text differs from byte %d: %.30q, reference %.30q", pos+1, got.Text[pos:], ref.Text[pos:])}
	}
	withLP := ref.Logprobs != nil && got.Logprobs != nil && len(ref.Logprobs) == len(ref.IDs) && len(got.Logprobs) == len(got.IDs)
	var r Result
	for i := range min(len(ref.IDs), len(got.IDs)) {
		if ref.IDs[i] != got.IDs[i] {
			if withLP && i < len(ref.Top) && i < len(got.Tokens) {
				lp, ok := ref.Top[i][got.Tokens[i]]
				if d := math.Abs(got.Logprobs[i] - lp); ok && math.Abs(lp-ref.Logprobs[i]) <= tol && d <= tol {
					r.Match, r.Tie, r.MaxDelta = true, i+1, max(r.MaxDelta, d)
					return r
				}
			}
			r.Position, r.Kind = i+1, KindToken
			r.Detail = fmt.Sprintf("token %d is id %d%s, reference id %d%s", i+1, got.IDs[i], lpNote(got.Logprobs, i), ref.IDs[i], lpNote(ref.Logprobs, i))
			return r
		}
		if withLP {
			d := math.Abs(got.Logprobs[i] - ref.Logprobs[i])
			r.MaxDelta = max(r.MaxDelta, d)
			if d > tol {
				r.Position, r.Kind = i+1, KindLogprob
				r.Detail = fmt.Sprintf("token %d (id %d) has logprob %.4f, reference %.4f (|Δ| %.4f > tolerance %g)", i+1, got.IDs[i], got.Logprobs[i], ref.Logprobs[i], d, tol)
				return r
			}
		}
	}
	if len(ref.IDs) != len(got.IDs) {
		n := min(len(ref.IDs), len(got.IDs))
		return Result{Position: n + 1, Kind: KindLength, MaxDelta: r.MaxDelta,
			Detail: fmt.Sprintf("%d tokens, reference %d", len(got.IDs), len(ref.IDs))}
	}
	r.Match = true
	return r
}

func lpNote(lps []float64, i int) string {
	if i < len(lps) {
		return " (logprob " + strconv.FormatFloat(lps[i], 'f', 4, 64) + ")"
	}
	return ""
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
