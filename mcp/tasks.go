package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/internal/httpx"
)

// A task (the Tasks extension) is an operation waiting for a human, read
// from where the service stores it, so it survives restarts and any
// instance answers it: a held operation (its spend approval) or a card
// request. Its id is the stored row's; each source below answers
// ErrNotFound for an id that is not one of its own for this agent.

// waitAnswer is a tool answer that may wait for a human: waitsFor is the
// task's id then, "" when the call is done.
type waitAnswer interface{ waitsFor() string }

func (o orHeld[T]) waitsFor() string {
	if o.held == nil {
		return ""
	}
	return o.held.ApprovalID
}

// cardAnswer is request_card_purchase's answer: a request waits for its
// human until decided.
type cardAnswer struct{ req httpx.CardRequest }

func (c cardAnswer) waitsFor() string {
	if c.req.Status != string(cardrequest.StatusPendingApproval) {
		return ""
	}
	return c.req.RequestID
}

func (c cardAnswer) MarshalJSON() ([]byte, error) { return json.Marshal(c.req) }

func (cardAnswer) outputSchema() (*jsonschema.Schema, error) {
	return jsonschema.For[httpx.CardRequest](schemaOptions)
}

// taskSource reads one kind of task; reveal allows a read that spends
// something shown once (a card's details): tasks/get, never a cancel.
type taskSource func(ctx context.Context, t *toolset, a *ent.Agent, id string, reveal bool, now time.Time) (map[string]any, error)

var taskSources = []taskSource{approvalTask, cardTask}

// task is the agent's task id, from whichever source holds it.
func (t *toolset) task(ctx context.Context, a *ent.Agent, id string, reveal bool) (map[string]any, error) {
	for _, read := range taskSources {
		task, err := read(ctx, t, a, id, reveal, time.Now())
		if errors.Is(err, agentpay.ErrNotFound) {
			continue
		}
		return task, err
	}
	return nil, fmt.Errorf("%w: no task %q", agentpay.ErrNotFound, id)
}

// newTask is a task's common fields; endTask ends it, completed with the
// tool's answer or failed with why.
func newTask(id string, created time.Time, updated *time.Time, expires time.Time) map[string]any {
	last := created
	if updated != nil {
		last = *updated
	}
	return map[string]any{
		"taskId": id, "createdAt": created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": last.UTC().Format(time.RFC3339Nano),
		"ttlMs": expires.Sub(created).Milliseconds(), "pollIntervalMs": taskPollInterval.Milliseconds(),
	}
}

func endTask(task map[string]any, status, msg string, answer any) {
	task["status"], task["statusMessage"] = status, msg
	if status == "completed" {
		task["result"] = toolResult(answer, nil)
		delete(task["result"].(map[string]any), "_meta")
		return
	}
	task["error"] = rpcError{Code: codeOperationRefused, Message: msg, Data: answer}
}

// approvalTask is a held operation's task: awaiting a decision it is
// working; approved it is completed with the tool's result (the approval
// with its transfer); denied, expired or refused when approved it failed,
// with why. An approval past its expiry that the sweeper has not moved
// yet is expired already: nobody can approve it.
func approvalTask(ctx context.Context, t *toolset, a *ent.Agent, id string, _ bool, now time.Time) (map[string]any, error) {
	v, err := t.svc.AgentSpendApproval(ctx, a, id)
	if err != nil {
		return nil, err
	}
	r := v.Approval
	answer := httpx.ApprovalOf(v, "")
	task := newTask(r.ID.String(), r.CreatedAt, r.DecidedAt, r.ExpiresAt)
	switch st := v.Status(); {
	case st == "approved":
		endTask(task, "completed", "approved", answer)
	case st == "denied":
		endTask(task, "failed", "denied: a paired human denied this "+string(r.Operation)+" (held because "+r.Reason+")", answer)
	case st == "failed":
		endTask(task, "failed", "failed: approved, but refused when it ran: "+r.Error, answer)
	case st == "expired" || (st == "awaiting_approval" && !now.Before(r.ExpiresAt)):
		endTask(task, "failed", "expired: no human decided before "+r.ExpiresAt.UTC().Format(time.RFC3339), answer)
	default:
		task["status"], task["statusMessage"] = "working", "awaiting approval by "+joinNames(v.Deciders)+": "+r.Reason
	}
	return task, nil
}

// cardTask is a card request's task: working while its human decides and
// while the approved amount's reservation reaches the chain; completed
// once the card is issued, with the request (the card's details in the
// first read that reveals them, as REST's GET: the client keeps them);
// failed when denied, expired undecided, or ended without a card.
func cardTask(ctx context.Context, t *toolset, a *ent.Agent, id string, reveal bool, now time.Time) (map[string]any, error) {
	read := t.svc.PeekAgentCardRequest
	if reveal {
		read = t.svc.AgentCardRequest
	}
	v, err := read(ctx, a, id)
	if err != nil {
		return nil, err
	}
	r := v.Request
	answer := httpx.CardRequestOf(v)
	task := newTask(r.ID.String(), r.CreatedAt, r.DecidedAt, r.ExpiresAt)
	switch {
	case r.CardToken != nil:
		endTask(task, "completed", "approved: the card is issued", answer)
	case r.Status == cardrequest.StatusDenied:
		endTask(task, "failed", "denied: a paired human denied this card purchase", answer)
	case r.Status == cardrequest.StatusExpired || (r.Status == cardrequest.StatusPendingApproval && !now.Before(r.ExpiresAt)):
		endTask(task, "failed", "expired: no human decided before "+r.ExpiresAt.UTC().Format(time.RFC3339), answer)
	case r.Status == cardrequest.StatusPendingApproval:
		task["status"], task["statusMessage"] = "working", fmt.Sprintf("awaiting approval by %s: a card of up to %s USD at %s",
			joinNames(v.Deciders), v.Amount().StringFixed(2), r.MerchantName)
	case r.Status == cardrequest.StatusApproved:
		task["status"], task["statusMessage"] = "working", "approved: the card follows once the reserved amount is on chain"
	default: // failed, or ended before a card was issued
		endTask(task, "failed", "failed: approved, but no card was issued: "+r.Error, answer)
	}
	return task, nil
}

func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return "a paired human"
	case 1:
		return names[0]
	}
	out := names[0]
	for _, n := range names[1:] {
		out += " and " + n
	}
	return out
}
