-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_mail_messages" table
CREATE TABLE `new_mail_messages` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `to` text NOT NULL, `subject` text NOT NULL, `text` text NOT NULL, `html` text NOT NULL, `expires_at` datetime NULL, `unsubscribe_token_hash` blob NULL, `attempts` integer NOT NULL DEFAULT (0), `locked_until` datetime NULL, `sent_at` datetime NULL, `failed_at` datetime NULL, `last_error` text NOT NULL DEFAULT (''), `transport` text NOT NULL DEFAULT (''), PRIMARY KEY (`id`));
-- Copy rows from old table "mail_messages" to new temporary table "new_mail_messages"
INSERT INTO `new_mail_messages` (`id`, `created_at`, `updated_at`, `to`, `subject`, `text`, `html`, `attempts`, `locked_until`, `sent_at`, `failed_at`, `last_error`, `transport`) SELECT `id`, `created_at`, `updated_at`, `to`, `subject`, `text`, `html`, `attempts`, `locked_until`, `sent_at`, `failed_at`, `last_error`, `transport` FROM `mail_messages`;
-- Drop "mail_messages" table after copying rows
DROP TABLE `mail_messages`;
-- Rename temporary table "new_mail_messages" to "mail_messages"
ALTER TABLE `new_mail_messages` RENAME TO `mail_messages`;
-- Create index "mailmessage_to_created_at" to table: "mail_messages"
CREATE INDEX `mailmessage_to_created_at` ON `mail_messages` (`to`, `created_at`);
-- Create index "mailmessage_expires_at" to table: "mail_messages"
CREATE INDEX `mailmessage_expires_at` ON `mail_messages` (`expires_at`);
-- Create index "mailmessage_unsubscribe_token_hash" to table: "mail_messages"
CREATE UNIQUE INDEX `mailmessage_unsubscribe_token_hash` ON `mail_messages` (`unsubscribe_token_hash`);
-- Add column "declined_at" to table: "invitations"
ALTER TABLE `invitations` ADD COLUMN `declined_at` datetime NULL;
-- Create "new_merchants" table
CREATE TABLE `new_merchants` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `name` text NOT NULL, `email` text NOT NULL, `email_normalized` text NOT NULL DEFAULT (''), `email_verified_at` datetime NULL, `email_confirms_on_signin` bool NOT NULL DEFAULT (false), `website` text NULL, `webhook_url` text NULL, `success_url` text NULL, `cancel_url` text NULL, `settlement_type` text NOT NULL DEFAULT ('crypto_usdc'), `settlement_address` text NULL, `settlement_chain` text NULL, `settle_held_payments` bool NOT NULL DEFAULT (false), `accepted_tokens` json NULL, `brand_color` text NULL, `webhook_secret_encrypted` blob NOT NULL, `webhook_secret_previous_encrypted` blob NULL, `webhook_secret_previous_expires_at` datetime NULL, `test_webhook_url` text NULL, `test_webhook_secret_encrypted` blob NULL, `test_webhook_secret_previous_encrypted` blob NULL, `test_webhook_secret_previous_expires_at` datetime NULL, `active` bool NOT NULL DEFAULT (true), `deactivated_at` datetime NULL, PRIMARY KEY (`id`));
-- Copy rows from old table "merchants" to new temporary table "new_merchants"
INSERT INTO `new_merchants` (`id`, `created_at`, `updated_at`, `name`, `email`, `email_normalized`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `settle_held_payments`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at`) SELECT `id`, `created_at`, `updated_at`, `name`, `email`, `email_normalized`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `settle_held_payments`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at` FROM `merchants`;
-- Drop "merchants" table after copying rows
DROP TABLE `merchants`;
-- Rename temporary table "new_merchants" to "merchants"
ALTER TABLE `new_merchants` RENAME TO `merchants`;
-- Create index "merchant_email_normalized" to table: "merchants"
CREATE INDEX `merchant_email_normalized` ON `merchants` (`email_normalized`);
-- Create "mail_opt_outs" table
CREATE TABLE `mail_opt_outs` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `email` text NOT NULL, `agent_id` uuid NULL, `reason` text NOT NULL, PRIMARY KEY (`id`));
-- Create index "mailoptout_email" to table: "mail_opt_outs"
CREATE INDEX `mailoptout_email` ON `mail_opt_outs` (`email`);
-- Create "merchant_email_confirmations" table
CREATE TABLE `merchant_email_confirmations` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `merchant_id` uuid NOT NULL, `email` text NOT NULL, `token_hash` blob NOT NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "merchant_email_confirmations_token_hash_key" to table: "merchant_email_confirmations"
CREATE UNIQUE INDEX `merchant_email_confirmations_token_hash_key` ON `merchant_email_confirmations` (`token_hash`);
-- Create index "merchantemailconfirmation_merchant_id" to table: "merchant_email_confirmations"
CREATE INDEX `merchantemailconfirmation_merchant_id` ON `merchant_email_confirmations` (`merchant_id`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
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
