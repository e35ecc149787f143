// Package mail is the e-mail machinery under the outbox (agentpay's mail.go
// holds the rules: what is queued, when a message counts as sent): a Sender
// takes one message to one address, either over SMTP (NewSMTP, configured
// by SMTP_URL and MAIL_FROM) or into the dev catcher (Catcher, `agentpay
// dev` without SMTP_URL), which keeps its own copy in memory for /dev/mail:
// the outbox row keeps no body once sent, since bodies carry sign-in and
// invitation links.
//
// SMTP_URL forms (ParseURL):
//
//   - smtp://user:pass@host:587 — STARTTLS, mandatory: a server that does
//     not offer it is refused (the password never travels in clear). Port
//     587 when none is given.
//   - smtps://user:pass@host:465 — implicit TLS from the first byte. Port
//     465 when none is given.
//   - smtp://host:25 on a loopback host (127.0.0.0/8, ::1, localhost) —
//     STARTTLS when the server offers it, else plain: a local relay or a
//     catcher such as Mailpit, which usually has no certificate.
//   - smtp://host:25?tls=none — never TLS, for a relay on a trusted network;
//     refused with a user or password, which would travel in clear.
//
// User and password are percent-decoded. Certificates are checked against
// the system roots (Config.TLSConfig replaces them, in tests).
//
// Secrets: neither the URL nor the password ever appears in an error or a
// log line of this package. Errors name the host and port, and the
// server's reply with any occurrence of the password removed.
//
// Errors: Send returns a *SendError; Permanent is true only when the
// receiving side refused this message for good (a 5xx reply to RCPT TO or
// DATA): trying again cannot help. Everything else (connection refused, a
// timeout, TLS, authentication, a 4xx reply) may succeed later and is
// retried by the caller.
//
// A message is sent at least once, not exactly once: a crash after the
// server accepted it and before the outbox recorded it sends it again. Its
// Message-ID is derived from its outbox id, so both copies carry the same
// one and receivers can tell.
package mail
