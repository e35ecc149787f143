-- Modify "invitations" table
ALTER TABLE "invitations" ADD COLUMN "declined_at" timestamptz NULL;
-- Modify "mail_messages" table
ALTER TABLE "mail_messages" ADD COLUMN "expires_at" timestamptz NULL, ADD COLUMN "unsubscribe_token_hash" bytea NULL;
-- Create index "mailmessage_expires_at" to table: "mail_messages"
CREATE INDEX "mailmessage_expires_at" ON "mail_messages" ("expires_at");
-- Create index "mailmessage_unsubscribe_token_hash" to table: "mail_messages"
CREATE UNIQUE INDEX "mailmessage_unsubscribe_token_hash" ON "mail_messages" ("unsubscribe_token_hash");
-- Modify "merchants" table
ALTER TABLE "merchants" ADD COLUMN "email_verified_at" timestamptz NULL, ADD COLUMN "email_confirms_on_signin" boolean NOT NULL DEFAULT false;
-- Create "mail_opt_outs" table
CREATE TABLE "mail_opt_outs" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "email" character varying NOT NULL, "agent_id" uuid NULL, "reason" character varying NOT NULL, PRIMARY KEY ("id"));
-- Create index "mailoptout_email" to table: "mail_opt_outs"
CREATE INDEX "mailoptout_email" ON "mail_opt_outs" ("email");
-- Create "merchant_email_confirmations" table
CREATE TABLE "merchant_email_confirmations" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "merchant_id" uuid NOT NULL, "email" character varying NOT NULL, "token_hash" bytea NOT NULL, "expires_at" timestamptz NOT NULL, "used_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "merchant_email_confirmations_token_hash_key" to table: "merchant_email_confirmations"
CREATE UNIQUE INDEX "merchant_email_confirmations_token_hash_key" ON "merchant_email_confirmations" ("token_hash");
-- Create index "merchantemailconfirmation_merchant_id" to table: "merchant_email_confirmations"
CREATE INDEX "merchantemailconfirmation_merchant_id" ON "merchant_email_confirmations" ("merchant_id");
-- Backfill (docs/security.md, Identity: only a link received at an address proves it).
-- An account whose address never signed in by an e-mailed link was made from an invitation link, which the
-- inviting agent also held: its address is unverified until its next e-mailed sign-in.
UPDATE users SET email_verified_at = NULL WHERE NOT EXISTS (SELECT 1 FROM login_tokens WHERE login_tokens.email = users.email AND login_tokens.used_at IS NOT NULL);
-- Merchants registered before contact e-mails were confirmed by link: confirmed when their address has signed in by
-- an e-mailed link, else by its next e-mailed sign-in.
UPDATE merchants SET email_confirms_on_signin = true;
UPDATE merchants SET email_verified_at = (SELECT max(login_tokens.used_at) FROM login_tokens WHERE login_tokens.email = merchants.email_normalized AND login_tokens.used_at IS NOT NULL), email_confirms_on_signin = false WHERE EXISTS (SELECT 1 FROM login_tokens WHERE login_tokens.email = merchants.email_normalized AND login_tokens.used_at IS NOT NULL);
-- The contact e-mail's own memberships stay only for the current, confirmed address of an account whose address is
-- verified; invitations accepted by an account now unverified wait for its next e-mailed sign-in.
DELETE FROM merchant_members WHERE invited_by IS NULL AND (user_id IS NULL OR user_id IN (SELECT id FROM users WHERE email_verified_at IS NULL) OR merchant_id IN (SELECT id FROM merchants WHERE email_verified_at IS NULL) OR email <> (SELECT merchants.email_normalized FROM merchants WHERE merchants.id = merchant_members.merchant_id));
UPDATE merchant_members SET user_id = NULL, accepted_at = NULL WHERE invited_by IS NOT NULL AND user_id IN (SELECT id FROM users WHERE email_verified_at IS NULL);
DELETE FROM dashboard_sessions WHERE user_id IN (SELECT id FROM users WHERE email_verified_at IS NULL);
-- The outbox keeps no body of a message sent or refused (the dev catcher keeps its own copy now).
UPDATE mail_messages SET text = '', html = '' WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL;
