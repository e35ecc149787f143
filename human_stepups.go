package agentpay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/stepup"
	"agentpay/internal/vault"
)

// Step-up (docs/security.md, "Step-up"): a fresh proof a signed-in human
// gives right before a sensitive action, on top of the browser session,
// so that a stolen or left-open session cookie is not enough for it. One
// mechanism for every such action: approving a held spend or a card
// request, withdrawing, adding a passkey when the account has one,
// removing a passkey.
//
//   - The proof is a passkey assertion when the account has a passkey (and
//     the server takes passkeys); otherwise, for the actions that need one
//     without a passkey (withdrawing), a single-use link e-mailed to the
//     account's address. Approvals of an account without a passkey, and
//     adding its first passkey, need the session only (stepUpMethod).
//   - It is bound to the user, the action and its subject: the approval's
//     or card request's id, the passkey's id, the withdrawal's exact fields
//     (their SHA-256). A step-up begun for one approval cannot approve
//     another; one begun for a withdrawal of 10 to an address cannot
//     withdraw 11, or to another.
//   - It is a StepUp row, so begin and finish may reach different
//     processes; spent by a conditional update before the assertion is
//     checked, so it is used once whatever the outcome; a passkey's lives
//     PasskeyCeremonyTTL (5 minutes), an e-mailed link's StepUpLinkTTL (15
//     minutes). Following the link only confirms it (an account event
//     tells the page that waits); the action then spends it.
//
// BeginStepUp answers what the app must do; the action's service call
// takes the StepUpProof and spends it (spendStepUp).

// ApprovalWait is how long the last yes of an approval (a held spend, a
// card request) waits for the operation's transfer to be included before
// it answers with the transfer still pending: half of DefaultSendWait, so
// the human's page answers well inside an HTTP client's patience while the
// chain finishes in the background (the account events tell the page).
const ApprovalWait = DefaultSendWait / 2

// StepUpLinkTTL is how long an e-mailed confirmation link works.
const StepUpLinkTTL = 15 * time.Minute

// MaxStepUpMailsPerHour bounds the confirmation e-mails one account is
// sent an hour (each begin without a passkey mails one).
const MaxStepUpMailsPerHour = 5

// EventStepUpConfirmed tells the user's pages that an e-mailed link was
// followed: {step_up_id, action}.
const EventStepUpConfirmed = "step_up.confirmed"

// The actions a step-up guards.
const (
	StepUpApproveSpend  = stepup.ActionApproveSpend
	StepUpApproveCard   = stepup.ActionApproveCard
	StepUpWithdraw      = stepup.ActionWithdraw
	StepUpAddPasskey    = stepup.ActionAddPasskey
	StepUpRemovePasskey = stepup.ActionRemovePasskey
)

// stepUpTarget is what a step-up is for.
type stepUpTarget struct {
	action  stepup.Action
	subject string
	// summary says it in words (the e-mail and the link's page).
	summary string
}

// StepUp is a begun step-up as the app reads it. Method is empty when the
// action needs none (the session is enough).
type StepUp struct {
	ID     uuid.UUID
	Method string
	// Options are the passkey assertion's (navigator.credentials.get).
	Options json.RawMessage
	// SentTo is where the link was e-mailed.
	SentTo    string
	ExpiresAt time.Time
	// Confirmed: an e-mailed link was followed (a passkey's is always
	// false until the action spends it).
	Confirmed bool
	Used      bool
	Summary   string
}

// StepUpProof is what an action carries: the step-up's id (the
// ceremonyId of the API) and, for a passkey, the browser's assertion (the
// PublicKeyCredential as JSON).
type StepUpProof struct {
	ID         string
	Credential []byte
}

var (
	// ErrStepUpInvalid is a step-up that is unknown, another account's,
	// used, expired or begun for another action or subject: one answer
	// for all.
	ErrStepUpInvalid = fmt.Errorf("%w: this confirmation is unknown, used, expired or was begun for another operation: start again", ErrForbidden)
	// ErrStepUpUnconfirmed is an e-mailed confirmation whose link was not
	// followed yet.
	ErrStepUpUnconfirmed = fmt.Errorf("%w: the confirmation link e-mailed to you has not been followed yet", ErrForbidden)
)

// errStepUpRequired is an action sent without the step-up it needs.
func errStepUpRequired(method string) error {
	if method == string(stepup.MethodEmail) {
		return fmt.Errorf("%w: this needs the confirmation link e-mailed to you: start again to have it sent", ErrForbidden)
	}
	return fmt.Errorf("%w: this needs a fresh confirmation with your passkey: start again", ErrForbidden)
}

// stepUpMethod is what the action needs of the user now: a passkey
// assertion when they have a passkey the server can check, an e-mailed
// link when they have none and the action needs one anyway (withdrawing;
// adding or removing a passkey while passkeys are off), nothing otherwise.
func (s *Service) stepUpMethod(ctx context.Context, u *ent.User, action stepup.Action) (string, []*ent.Passkey, error) {
	pks, err := s.UserPasskeys(ctx, u)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(pks) > 0 && s.PasskeysOn():
		return string(stepup.MethodPasskey), pks, nil
	case action == stepup.ActionWithdraw,
		len(pks) > 0 && (action == stepup.ActionAddPasskey || action == stepup.ActionRemovePasskey):
		return string(stepup.MethodEmail), nil, nil
	}
	return "", nil, nil
}

// beginStepUp starts the step-up target needs of the user: nothing, a
// passkey assertion's options, or an e-mailed link.
func (s *Service) beginStepUp(ctx context.Context, u *ent.User, t stepUpTarget) (*StepUp, error) {
	method, pks, err := s.stepUpMethod(ctx, u, t.action)
	if err != nil || method == "" {
		return &StepUp{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	create := func(db *ent.Client) *ent.StepUpCreate {
		return db.StepUp.Create().SetUserID(u.ID).SetAction(t.action).SetSubject(t.subject).
			SetSummary(truncate(t.summary, 500)).SetCreatedAt(now).SetUpdatedAt(now)
	}
	if method == string(stepup.MethodPasskey) {
		wa, err := s.relyingParty()
		if err != nil {
			return nil, err
		}
		pu := &passkeyUser{u: u}
		for _, pk := range pks {
			pu.creds = append(pu.creds, credentialOf(pk))
		}
		assertion, sd, err := wa.BeginLogin(pu, webauthn.WithUserVerification(protocol.VerificationRequired))
		if err != nil {
			return nil, fmt.Errorf("beginning passkey assertion: %w", err)
		}
		data, err := json.Marshal(sd)
		if err != nil {
			return nil, fmt.Errorf("encoding passkey assertion: %w", err)
		}
		opts, err := json.Marshal(assertion)
		if err != nil {
			return nil, fmt.Errorf("encoding passkey options: %w", err)
		}
		row, err := create(s.cfg.DB.Ent).SetMethod(stepup.MethodPasskey).SetSessionData(data).SetExpiresAt(now.Add(PasskeyCeremonyTTL)).Save(ctx)
		if err != nil {
			return nil, fmt.Errorf("recording step-up: %w", err)
		}
		return &StepUp{ID: row.ID, Method: method, Options: opts, ExpiresAt: row.ExpiresAt, Summary: row.Summary}, nil
	}
	token := vault.StepUpToken.New()
	var row *ent.StepUp
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		sent, err := tx.StepUp.Query().Where(stepup.UserID(u.ID), stepup.MethodEQ(stepup.MethodEmail),
			stepup.CreatedAtGT(now.Add(-time.Hour))).Count(ctx)
		if err != nil {
			return fmt.Errorf("counting confirmation e-mails: %w", err)
		}
		if sent >= MaxStepUpMailsPerHour {
			return fmt.Errorf("%w: at most %d confirmation e-mails an hour: use one already sent, or try again later",
				ErrRateLimited, MaxStepUpMailsPerHour)
		}
		row, err = create(tx.Client()).SetMethod(stepup.MethodEmail).SetTokenHash(vault.HashSecret(token)).
			SetExpiresAt(now.Add(StepUpLinkTTL)).Save(ctx)
		if err != nil {
			return fmt.Errorf("recording step-up: %w", err)
		}
		_, err = s.queueMail(ctx, tx, sqlTx, s.stepUpMail(u, t.summary, s.appURL("/step-up/"+token)))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &StepUp{ID: row.ID, Method: method, SentTo: u.Email, ExpiresAt: row.ExpiresAt, Summary: row.Summary}, nil
}

func (s *Service) stepUpMail(u *ent.User, summary, link string) Mail {
	return Mail{
		To:      u.Email,
		Subject: "Confirm: " + truncate(summary, 120),
		Text: fmt.Sprintf("You asked to %s.\n\nConfirm it: %s\n\nThe link works once, for 15 minutes, for this and nothing else. "+
			"If you did not ask for it, do not follow it: someone may be using your signed-in browser; sign out everywhere in settings.\n",
			summary, link),
		HTML: fmt.Sprintf(`<p>You asked to %s.</p><p><a href="%s">Confirm it</a></p><p>The link works once, for 15 minutes, for this and nothing else. `+
			`If you did not ask for it, do not follow it: someone may be using your signed-in browser; sign out everywhere in settings.</p>`,
			html.EscapeString(summary), html.EscapeString(link)),
	}
}

// spendStepUp spends the proof of target's step-up, when the user needs
// one: unknown, used, expired, another user's or another target's is
// ErrStepUpInvalid; an e-mailed one not yet followed ErrStepUpUnconfirmed
// (not spent); a passkey assertion that does not check out the passkey
// errors (spent all the same).
func (s *Service) spendStepUp(ctx context.Context, u *ent.User, t stepUpTarget, proof StepUpProof) error {
	method, pks, err := s.stepUpMethod(ctx, u, t.action)
	if err != nil || method == "" {
		return err
	}
	if proof.ID == "" {
		return errStepUpRequired(method)
	}
	id, err := uuid.Parse(proof.ID)
	if err != nil {
		return ErrStepUpInvalid
	}
	var parsed *protocol.ParsedCredentialAssertionData
	if method == string(stepup.MethodPasskey) {
		if len(proof.Credential) == 0 {
			return errStepUpRequired(method)
		}
		if err := checkPasskeyResponse(proof.Credential); err != nil {
			return err
		}
		if parsed, err = protocol.ParseCredentialRequestResponseBytes(proof.Credential); err != nil {
			return Invalid("credential", "is not a WebAuthn assertion: %s", protocolDetail(err))
		}
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	q := s.cfg.DB.Ent.StepUp.Update().Where(stepup.ID(id), stepup.UserID(u.ID), stepup.ActionEQ(t.action),
		stepup.Subject(t.subject), stepup.MethodEQ(stepup.Method(method)), stepup.UsedAtIsNil(), stepup.ExpiresAtGT(now))
	if method == string(stepup.MethodEmail) {
		q = q.Where(stepup.ConfirmedAtNotNil())
	}
	n, err := q.SetUsedAt(now).SetUpdatedAt(now).Save(ctx)
	if err != nil {
		return fmt.Errorf("spending step-up: %w", err)
	}
	if n == 0 {
		if method == string(stepup.MethodEmail) {
			unconfirmed, err := s.cfg.DB.Ent.StepUp.Query().Where(stepup.ID(id), stepup.UserID(u.ID), stepup.ActionEQ(t.action),
				stepup.Subject(t.subject), stepup.UsedAtIsNil(), stepup.ExpiresAtGT(now), stepup.ConfirmedAtIsNil()).Exist(ctx)
			if err != nil {
				return fmt.Errorf("reading step-up: %w", err)
			}
			if unconfirmed {
				return ErrStepUpUnconfirmed
			}
		}
		return ErrStepUpInvalid
	}
	if method == string(stepup.MethodEmail) {
		return nil
	}
	row, err := s.cfg.DB.Ent.StepUp.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("reading step-up: %w", err)
	}
	var sd webauthn.SessionData
	if err := json.Unmarshal(row.SessionData, &sd); err != nil {
		return fmt.Errorf("decoding step-up: %w", err)
	}
	return s.checkUserAssertion(ctx, u, pks, sd, parsed)
}

// StepUpOf reads one of the user's step-ups (the app polls an e-mailed
// one until its link is followed). Another's, or unknown: ErrNotFound.
func (s *Service) StepUpOf(ctx context.Context, v *Viewer, id string) (*StepUp, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	sid, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("%w: no step-up %q", ErrNotFound, id)
	}
	row, err := s.cfg.DB.Ent.StepUp.Query().Where(stepup.ID(sid), stepup.UserID(v.User.ID)).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no step-up %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading step-up: %w", err)
	}
	out := &StepUp{ID: row.ID, Method: string(row.Method), ExpiresAt: row.ExpiresAt, Confirmed: row.ConfirmedAt != nil,
		Used: row.UsedAt != nil, Summary: row.Summary}
	if row.Method == stepup.MethodEmail {
		out.SentTo = v.User.Email
	}
	return out, nil
}

// StepUpRequest is what a step-up is begun for: the action and its
// subject (ID: the approval's, card request's or passkey's id; Withdrawal:
// the withdrawal's fields, exactly as it will be sent).
type StepUpRequest struct {
	Action     stepup.Action
	ID         string
	Withdrawal *WithdrawRequest
}

// BeginStepUp starts the step-up the viewer's action needs (StepUp.Method
// empty: none, go ahead). The action must be one the viewer may take now:
// an approval awaiting their decision, a card request awaiting theirs, a
// passkey of theirs, a withdrawal whose fields check out; otherwise its
// refusal, as the action itself would answer it.
func (s *Service) BeginStepUp(ctx context.Context, v *Viewer, req StepUpRequest) (*StepUp, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	var t stepUpTarget
	var err error
	switch req.Action {
	case stepup.ActionApproveSpend:
		t, err = s.spendApprovalTarget(ctx, v.User, req.ID)
	case stepup.ActionApproveCard:
		t, err = s.cardApprovalTarget(ctx, v.User, req.ID)
	case stepup.ActionWithdraw:
		if req.Withdrawal == nil {
			return nil, Invalid("withdrawal", "is required to confirm a withdrawal")
		}
		t, err = s.withdrawalTarget(ctx, v.User, *req.Withdrawal)
	case stepup.ActionAddPasskey:
		if _, err := s.relyingParty(); err != nil {
			return nil, err
		}
		t = stepUpTarget{action: stepup.ActionAddPasskey, summary: "add a passkey to your agentpay account " + v.User.Username}
	case stepup.ActionRemovePasskey:
		t, err = s.removePasskeyTarget(ctx, v.User, req.ID)
	default:
		return nil, Invalid("action", "must be approve_spend, approve_card, withdraw, add_passkey or remove_passkey")
	}
	if err != nil {
		return nil, err
	}
	return s.beginStepUp(ctx, v.User, t)
}

// StepUpLink is what a confirmation link's page shows before it is used.
type StepUpLink struct {
	Summary   string
	ExpiresAt time.Time
}

// ErrStepUpLinkInvalid is a confirmation link that is unknown, followed,
// used or expired: one answer for all.
var ErrStepUpLinkInvalid = fmt.Errorf("%w: this confirmation link is invalid, used or expired; start again from the page you were on", ErrNotFound)

func (s *Service) liveStepUpLink(ctx context.Context, token string) (*ent.StepUp, error) {
	if !vault.StepUpToken.Valid(token) {
		return nil, ErrStepUpLinkInvalid
	}
	row, err := s.cfg.DB.Ent.StepUp.Query().Where(stepup.TokenHash(vault.HashSecret(token)),
		stepup.ConfirmedAtIsNil(), stepup.UsedAtIsNil(), stepup.ExpiresAtGT(s.now().UTC())).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, ErrStepUpLinkInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("reading confirmation link: %w", err)
	}
	return row, nil
}

// CheckStepUpLink reads a confirmation link without following it (the
// GET page: a mail scanner opening it confirms nothing).
func (s *Service) CheckStepUpLink(ctx context.Context, token string) (*StepUpLink, error) {
	row, err := s.liveStepUpLink(ctx, token)
	if err != nil {
		return nil, err
	}
	return &StepUpLink{Summary: row.Summary, ExpiresAt: row.ExpiresAt}, nil
}

// ConfirmStepUpLink follows a confirmation link (the page's form): the
// step-up is confirmed, and the user's pages are told
// (EventStepUpConfirmed) in the same transaction. Following it needs no
// session: the link, sent to the address, is the proof; it confirms only
// the one action it was made for, which the signed-in page then takes.
func (s *Service) ConfirmStepUpLink(ctx context.Context, token string) (*StepUpLink, error) {
	row, err := s.liveStepUpLink(ctx, token)
	if err != nil {
		return nil, err
	}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.StepUp.Update().Where(stepup.ID(row.ID), stepup.ConfirmedAtIsNil(), stepup.UsedAtIsNil(),
			stepup.ExpiresAtGT(now)).SetConfirmedAt(now).SetUpdatedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("confirming: %w", err)
		}
		if n == 0 {
			return ErrStepUpLinkInvalid
		}
		return s.recordAccountEvent(ctx, tx, sqlTx, UserParty(row.UserID), EventStepUpConfirmed, map[string]string{
			"step_up_id": row.ID.String(), "action": string(row.Action),
		})
	})
	if err != nil {
		return nil, err
	}
	return &StepUpLink{Summary: row.Summary, ExpiresAt: row.ExpiresAt}, nil
}

// pruneStepUps deletes the step-ups that expired more than an hour ago
// (PrunePasskeyCeremonies runs it); it returns how many.
func (s *Service) pruneStepUps(ctx context.Context) (int, error) {
	n, err := s.cfg.DB.Ent.StepUp.Delete().Where(stepup.ExpiresAtLT(s.now().UTC().Add(-time.Hour))).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("pruning step-ups: %w", err)
	}
	return n, nil
}

// withdrawalSubject is the SHA-256 of a withdrawal's fields as the
// service acts on them, the subject its step-up is bound to.
func withdrawalSubject(req WithdrawRequest) string {
	b, _ := json.Marshal(withdrawFingerprinted{
		ToAddress: strings.TrimSpace(req.ToAddress), AmountUSD: req.AmountUSD.String(), Memo: req.Memo,
		Chain: strings.ToLower(strings.TrimSpace(req.Chain)),
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Human approvals (a card request, a held operation, any later one) take
// one step-up: beginApproval answers the ceremony approving needs, and the
// approval's service call spends its proof with proveApproval, both bound
// to the approval's target (what is approved, whose it is to approve).

// ApprovalStart is what approving needs from the app: a passkey assertion
// when the human has passkeys (Ceremony set), nothing more otherwise.
type ApprovalStart struct {
	Ceremony *PasskeyCeremony
}

// approvalTarget is the step-up target of approving id as u, or why u may
// not approve it.
type approvalTarget func(ctx context.Context, u *ent.User, id string) (stepUpTarget, error)

// beginApproval starts the step-up approving id needs: a passkey
// assertion bound to it when the human has passkeys, none otherwise.
func (s *Service) beginApproval(ctx context.Context, v *Viewer, target approvalTarget, id string) (*ApprovalStart, error) {
	if v == nil || v.User == nil {
		return nil, ErrNotSignedIn
	}
	t, err := target(ctx, v.User, id)
	if err != nil {
		return nil, err
	}
	up, err := s.beginStepUp(ctx, v.User, t)
	if err != nil || up.Method == "" {
		return &ApprovalStart{}, err
	}
	return &ApprovalStart{Ceremony: &PasskeyCeremony{ID: up.ID, Options: up.Options, ExpiresAt: up.ExpiresAt}}, nil
}

// proveApproval spends the approval's step-up proof (ceremonyID and the
// browser's assertion) for t.
func (s *Service) proveApproval(ctx context.Context, u *ent.User, t stepUpTarget, ceremonyID string, assertion []byte) error {
	return s.spendStepUp(ctx, u, t, StepUpProof{ID: ceremonyID, Credential: assertion})
}
