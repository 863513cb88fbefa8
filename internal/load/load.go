// Package load runs rounds of streaming requests at a fixed concurrency and
// returns per-request TTFT, TPOT, token counts and errors, and per-round
// output tokens per second. It knows servers only through Completer.
package load

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wakebench/wakebench/internal/vllm"
)

// Completer sends one streaming completion (vllm.Client does).
type Completer interface {
	Complete(ctx context.Context, r vllm.CompletionRequest) (*vllm.Stream, error)
}

// Plan is rounds × requests at a concurrency.
type Plan struct {
	Concurrency      int
	Rounds           int
	RequestsPerRound int
	Request          vllm.CompletionRequest
	Timeout          time.Duration // per request
	// Validate, if set, checks each successful output (e.g. for garbage text).
	Validate func(*vllm.Stream) error
}

// Planned is the number of requests the plan sends.
func (p Plan) Planned() int { return p.Rounds * p.RequestsPerRound }

// Request is one request's outcome.
type Request struct {
	Round        int
	Sent, Done   time.Time
	TTFT         time.Duration // sent → first non-empty token
	TPOT         time.Duration // (last − first token) / (output tokens − 1)
	HasTPOT      bool
	PromptTokens int
	OutputTokens int
	Err          error
}

// Round is one round's outcome.
type Round struct {
	Start, End   time.Time // first request sent → last request finished
	OutputTokens int       // of the round's successful requests
	TPS          float64   // OutputTokens / wall time
	Success      int
	Failed       int
}

// Passed is true when every request of the round succeeded.
func (r Round) Passed() bool { return r.Failed == 0 && r.Success > 0 }

// Result is the whole plan's outcome.
type Result struct {
	Plan     Plan
	Rounds   []Round
	Requests []Request
}

// Success counts successful requests.
func (r Result) Success() int {
	n := 0
	for _, q := range r.Requests {
		if q.Err == nil {
			n++
		}
	}
	return n
}

// Run executes the plan. Rounds run one after another; inside a round at
// most Concurrency requests are in flight. A failed request is recorded,
// not fatal; ctx ending stops the plan (unsent requests count as failed).
func Run(ctx context.Context, c Completer, p Plan) Result {
	res := Result{Plan: p}
	for round := range p.Rounds {
		reqs := make([]Request, p.RequestsPerRound)
		var g errgroup.Group
		g.SetLimit(max(1, p.Concurrency))
		start := time.Now()
		for i := range reqs {
			reqs[i].Round = round
			if ctx.Err() != nil {
				reqs[i].Err = fmt.Errorf("not sent: %w", context.Cause(ctx))
				continue
			}
			g.Go(func() error {
				reqs[i] = one(ctx, c, p, round)
				return nil
			})
		}
		_ = g.Wait()
		rd := Round{Start: start, End: time.Now()}
		for _, q := range reqs {
			if q.Err != nil {
				rd.Failed++
				continue
			}
			rd.Success++
			rd.OutputTokens += q.OutputTokens
		}
		if wall := rd.End.Sub(rd.Start).Seconds(); wall > 0 {
			rd.TPS = float64(rd.OutputTokens) / wall
		}
		res.Rounds = append(res.Rounds, rd)
		res.Requests = append(res.Requests, reqs...)
	}
	return res
}

func one(ctx context.Context, c Completer, p Plan, round int) Request {
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	q := Request{Round: round}
	s, err := c.Complete(ctx, p.Request)
	q.Done = time.Now()
	if s != nil {
		q.Sent = s.Sent
		q.PromptTokens, q.OutputTokens = s.PromptTokens, s.OutputTokens
	}
	if err == nil && p.Validate != nil {
		err = p.Validate(s)
	}
	if err != nil {
		q.Err = err
		return q
	}
	q.TTFT = s.TTFT()
	q.TPOT, q.HasTPOT = s.TPOT()
	return q
}
