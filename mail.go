package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	netmail "net/mail"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/internal/jobs"
	"agentpay/internal/mail"
)

// E-mail goes through an outbox. A change that mails someone writes the
// message (an ent MailMessage) and its send_mail job in its own transaction
// (queueMail), so a rolled-back change sends nothing, and a committed one
// is sent even when the SMTP server is down when it commits: the job is
// retried with River's backoff until the server takes the message
// (SendMail). A sent message is never sent again; two workers running the
// same message take turns through a claim on its row. A crash after the
// server accepted a message and before the row recorded it sends it a
// second time, with the same Message-ID (internal/mail): at least once,
// never silently lost.
//
// Config.Mailer sends: SMTP (SMTP_URL), or under `agentpay dev` without
// SMTP_URL the catcher (internal/mail.Catcher), which keeps its own copy;
// DevMail lists what it caught. Without a Mailer (serve or worker without
// SMTP_URL) messages stay unsent in the outbox, their jobs retrying, until a
// worker with SMTP_URL runs them.
//
// The outbox keeps no link longer than it must: sign-in, invitation and
// confirmation links are bearer secrets, so a message's bodies are erased
// from its row when it is sent (any transport), when it is refused for good
// or given up on (GiveUpMail, the job's last try), and when the link it
// carries expires unsent (Mail.ExpiresAt; EraseExpiredMail, and SendMail
// refuses to send it). The row keeps who, what subject, when, how many
// tries.

// Mail is one message to one address (text and HTML parts).
type Mail struct {
	To, Subject, Text, HTML string
	// ExpiresAt is when the link the message carries stops working (zero:
	// it carries none that does): unsent by then, it is not sent and its
	// bodies are erased.
	ExpiresAt time.Time
	// unsubscribeHash is the SHA-256 of its unsubscribe link's token
	// (queueAgentMail).
	unsubscribeHash []byte
}

// mailExpiredError is the last_error of a message whose link expired
// before it was sent.
const mailExpiredError = "not sent: the link it carries expired first"

// ErrNoMailer is SendMail's error when the process has no Mailer
// (SMTP_URL unset outside `agentpay dev`): the message stays in the outbox
// and its job is retried.
var ErrNoMailer = errors.New("no mailer: SMTP_URL is not set, the message stays in the outbox")

// errMailBusy: another try holds the message's claim; the job comes back
// later and finds it sent, or the claim expired.
var errMailBusy = errors.New("the message is being sent by another try")

// MailSendTimeout bounds one try of SendMail's transport; the worker's
// job timeout leaves room for it.
const MailSendTimeout = time.Minute

// mailClaimTTL is how long a try holds a message: past MailSendTimeout,
// so a live try never loses its claim, and a try whose process died frees
// the message this long after it began.
const mailClaimTTL = MailSendTimeout + 30*time.Second

// mailErrorMax is how much of a failed try's error the row keeps.
const mailErrorMax = 280 // plus the ellipsis, within the column's 300

// devMailMax is how many messages DevMail returns.
const devMailMax = 50

// queueMail writes m to the outbox in the caller's transaction and inserts
// its send_mail job in the same transaction (jobs.SendMailArgs), so nothing
// is sent for a rolled-back change and nothing is lost when SMTP is down.
// m.To must be one bare address and the subject one line: a bad one is a
// validation error on "email" or "subject", and nothing is queued.
func (s *Service) queueMail(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, m Mail) (*ent.MailMessage, error) {
	if err := checkMail(m); err != nil {
		return nil, err
	}
	if s.cfg.Jobs == nil {
		return nil, errors.New("agentpay: Config.Jobs is required to send e-mail")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	c := tx.MailMessage.Create().
		SetID(id).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		SetTo(m.To).
		SetSubject(m.Subject).
		SetText(m.Text).
		SetHTML(m.HTML)
	if !m.ExpiresAt.IsZero() {
		c.SetExpiresAt(m.ExpiresAt.UTC())
	}
	if m.unsubscribeHash != nil {
		c.SetUnsubscribeTokenHash(m.unsubscribeHash)
	}
	msg, err := c.Save(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.cfg.Jobs.InsertTx(ctx, sqlTx, jobs.SendMailArgs{MessageID: id}, nil); err != nil {
		return nil, fmt.Errorf("agentpay: enqueueing mail: %w", err)
	}
	return msg, nil
}

// checkMail refuses what could not be sent as one message to one address:
// a list or a display name in To, a header break in the subject.
func checkMail(m Mail) error {
	a, err := netmail.ParseAddress(m.To)
	if err != nil || a.Name != "" || a.Address != m.To || len(m.To) > 320 {
		return Invalid("email", "must be one e-mail address")
	}
	if strings.TrimSpace(m.Subject) == "" || strings.ContainsAny(m.Subject, "\r\n") || len(m.Subject) > 998 {
		return Invalid("subject", "must be one non-empty line")
	}
	if m.Text == "" {
		return Invalid("text", "is required")
	}
	return nil
}

// SendMail sends one outbox message (the send_mail job). A message already
// sent, or refused for good, is left alone (nil). A try that fails for a
// reason that may pass (the server down, a 4xx reply, no Mailer) records
// the error on the row and returns it, so River retries; a permanent
// refusal (a 5xx reply to RCPT TO or DATA) marks the message failed and
// returns nil, and so does a message whose link expired before it could be
// sent (it is not sent). Sent or failed, the row's bodies are erased. An
// unknown id is ErrNotFound.
func (s *Service) SendMail(ctx context.Context, id uuid.UUID) error {
	db := s.cfg.DB.Ent
	msg, err := db.MailMessage.Get(ctx, id)
	if ent.IsNotFound(err) {
		return fmt.Errorf("%w: mail %s", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	if msg.SentAt != nil || msg.FailedAt != nil {
		return nil
	}
	if s.cfg.Mailer == nil {
		s.logger.WarnContext(ctx, "mail not sent: SMTP_URL is not set", "mail", id)
		return ErrNoMailer
	}

	// Claim: attempts fences the claim, locked_until keeps other tries off
	// while it runs.
	now := s.now().UTC()
	n, err := db.MailMessage.Update().
		Where(mailmessage.ID(id), mailmessage.AttemptsEQ(msg.Attempts),
			mailmessage.SentAtIsNil(), mailmessage.FailedAtIsNil(),
			mailmessage.Or(mailmessage.LockedUntilIsNil(), mailmessage.LockedUntilLT(now))).
		AddAttempts(1).
		SetLockedUntil(now.Add(mailClaimTTL)).
		Save(ctx)
	if err != nil {
		return err
	}
	if n == 0 {
		cur, err := db.MailMessage.Get(ctx, id)
		if err != nil {
			return err
		}
		if cur.SentAt != nil || cur.FailedAt != nil {
			return nil
		}
		return errMailBusy
	}
	fence := msg.Attempts + 1
	if msg.ExpiresAt != nil && !now.Before(*msg.ExpiresAt) {
		// The link is dead: sending it would only put a used-up secret in
		// a mailbox.
		if _, err := db.MailMessage.Update().
			Where(mailmessage.ID(id), mailmessage.AttemptsEQ(fence), mailmessage.SentAtIsNil()).
			SetFailedAt(now).
			SetLastError(mailExpiredError).
			SetText("").SetHTML("").
			ClearLockedUntil().
			Save(ctx); err != nil {
			return err
		}
		return nil
	}

	sendCtx, cancel := context.WithTimeout(ctx, MailSendTimeout)
	sendErr := s.cfg.Mailer.Send(sendCtx, mail.Message{
		ID: id.String(), To: msg.To, Subject: msg.Subject, Text: msg.Text, HTML: msg.HTML,
	})
	cancel()

	// What happened is recorded even when ctx ended meanwhile (a worker
	// stopping): a message the server took must be marked sent.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	done := s.now().UTC()
	transport := s.cfg.Mailer.Transport()
	switch {
	case sendErr == nil:
		// Sent: the bodies (their links are bearer secrets) are not kept;
		// the dev catcher keeps its own copy.
		if _, err := db.MailMessage.Update().
			Where(mailmessage.ID(id), mailmessage.SentAtIsNil()).
			SetSentAt(done).
			SetTransport(transport).
			SetLastError("").
			SetText("").SetHTML("").
			ClearLockedUntil().
			Save(rctx); err != nil {
			return fmt.Errorf("agentpay: recording mail %s as sent: %w", id, err)
		}
		return nil
	case mail.IsPermanent(sendErr):
		errText := truncateUTF8(sendErr.Error(), mailErrorMax)
		if _, err := db.MailMessage.Update().
			Where(mailmessage.ID(id), mailmessage.AttemptsEQ(fence), mailmessage.SentAtIsNil()).
			SetFailedAt(done).
			SetTransport(transport).
			SetLastError(errText).
			SetText("").SetHTML("").
			ClearLockedUntil().
			Save(rctx); err != nil {
			return err
		}
		s.logger.WarnContext(ctx, "mail refused for good", "mail", id, "try", fence, "err", errText)
		return nil
	default:
		errText := truncateUTF8(sendErr.Error(), mailErrorMax)
		if _, err := db.MailMessage.Update().
			Where(mailmessage.ID(id), mailmessage.AttemptsEQ(fence), mailmessage.SentAtIsNil()).
			SetLastError(errText).
			ClearLockedUntil().
			Save(rctx); err != nil {
			return errors.Join(sendErr, err)
		}
		s.logger.InfoContext(ctx, "mail try failed", "mail", id, "try", fence, "err", errText)
		return fmt.Errorf("agentpay: sending mail %s: %w", id, sendErr)
	}
}

// GiveUpMail ends a message whose send_mail job made its last try (the
// worker calls it when River will not retry): unless it was sent meanwhile
// it is marked failed with cause and its bodies are erased, so a message
// that can never leave does not keep its link in the outbox. A try holding
// the message's claim is left to finish. An unknown id is ErrNotFound.
func (s *Service) GiveUpMail(ctx context.Context, id uuid.UUID, cause error) error {
	now := s.now().UTC()
	errText := "given up: "
	if cause != nil {
		errText += cause.Error()
	}
	n, err := s.cfg.DB.Ent.MailMessage.Update().
		Where(mailmessage.ID(id), mailmessage.SentAtIsNil(), mailmessage.FailedAtIsNil(),
			mailmessage.Or(mailmessage.LockedUntilIsNil(), mailmessage.LockedUntilLT(now))).
		SetFailedAt(now).
		SetLastError(truncateUTF8(errText, mailErrorMax)).
		SetText("").SetHTML("").
		Save(ctx)
	if err != nil {
		return fmt.Errorf("giving up mail %s: %w", id, err)
	}
	if n == 0 {
		if _, err := s.cfg.DB.Ent.MailMessage.Get(ctx, id); ent.IsNotFound(err) {
			return fmt.Errorf("%w: mail %s", ErrNotFound, id)
		}
	}
	return nil
}

// EraseExpiredMail ends the unsent messages whose link expired (the
// erase_expired_mail job, every minute): marked failed, bodies erased, so
// they are never sent. A try holding a message's claim is left to finish
// (SendMail refuses an expired message itself). It answers how many.
func (s *Service) EraseExpiredMail(ctx context.Context) (int, error) {
	now := s.now().UTC()
	n, err := s.cfg.DB.Ent.MailMessage.Update().
		Where(mailmessage.ExpiresAtLTE(now), mailmessage.SentAtIsNil(), mailmessage.FailedAtIsNil(),
			mailmessage.Or(mailmessage.LockedUntilIsNil(), mailmessage.LockedUntilLT(now))).
		SetFailedAt(now).
		SetLastError(mailExpiredError).
		SetText("").SetHTML("").
		Save(ctx)
	if err != nil {
		return 0, fmt.Errorf("erasing expired mail: %w", err)
	}
	return n, nil
}

// DevMail lists the messages the dev catcher caught for an address, newest
// first, at most devMailMax, for GET /dev/mail. The address matches
// whatever its case. Only the catcher's messages are listed (its own copy:
// the outbox keeps no body once sent), and nothing when Config.Mailer is
// not the catcher (SMTP). Only `agentpay dev` serves it (rest mounts
// /dev/mail there only): the bodies it shows carry sign-in links.
func (s *Service) DevMail(ctx context.Context, to string) ([]mail.Caught, error) {
	to = strings.TrimSpace(to)
	if to == "" {
		return nil, Invalid("to", "is required")
	}
	c, ok := s.cfg.Mailer.(*mail.Catcher)
	if !ok {
		return []mail.Caught{}, nil
	}
	return c.To(to, devMailMax), nil
}

// mailLinkPattern finds http(s) URLs in a text part.
var mailLinkPattern = regexp.MustCompile(`https?://[^\s<>"'()\[\]]+`)

// MailLinks are the http(s) URLs in a message's text part, in order, each
// once, without the punctuation that ends a sentence: what a person (or a
// test) reading /dev/mail would follow.
func MailLinks(text string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range mailLinkPattern.FindAllString(text, -1) {
		l = strings.TrimRight(l, ".,;:!?")
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
