-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_refunds" table
CREATE TABLE `new_refunds` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `session_id` uuid NOT NULL, `merchant_id` uuid NOT NULL, `livemode` bool NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `amount_token` integer NOT NULL, `amount_usd` text NOT NULL, `to_address` text NOT NULL, `reason` text NULL, `status` text NOT NULL DEFAULT ('pending'), `tx_hash` text NULL, `error` text NULL, `reverts` integer NOT NULL DEFAULT (0), `completed_at` datetime NULL, `idempotency_key` text NULL, `request_hash` text NULL, `after_payout` bool NOT NULL DEFAULT (false), `reserved_token` integer NOT NULL DEFAULT (0), `destination` text NOT NULL DEFAULT ('payer'), `requested_with` text NULL, `merchant_key_id` uuid NULL, `dashboard_user_id` uuid NULL, `payment_id` uuid NOT NULL, `netted_batch_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `refunds_payments_refunds` FOREIGN KEY (`payment_id`) REFERENCES `payments` (`id`) ON DELETE NO ACTION, CONSTRAINT `refunds_settlement_batches_netted_refunds` FOREIGN KEY (`netted_batch_id`) REFERENCES `settlement_batches` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "refunds" to new temporary table "new_refunds"
INSERT INTO `new_refunds` (`id`, `created_at`, `updated_at`, `external_id`, `session_id`, `merchant_id`, `livemode`, `chain`, `token`, `amount_token`, `amount_usd`, `to_address`, `reason`, `status`, `tx_hash`, `error`, `reverts`, `completed_at`, `idempotency_key`, `request_hash`, `after_payout`, `payment_id`, `netted_batch_id`) SELECT `id`, `created_at`, `updated_at`, `external_id`, `session_id`, `merchant_id`, `livemode`, `chain`, `token`, `amount_token`, `amount_usd`, `to_address`, `reason`, `status`, `tx_hash`, `error`, `reverts`, `completed_at`, `idempotency_key`, `request_hash`, `after_payout`, `payment_id`, `netted_batch_id` FROM `refunds`;
-- Drop "refunds" table after copying rows
DROP TABLE `refunds`;
-- Rename temporary table "new_refunds" to "refunds"
ALTER TABLE `new_refunds` RENAME TO `refunds`;
-- Create index "refunds_external_id_key" to table: "refunds"
CREATE UNIQUE INDEX `refunds_external_id_key` ON `refunds` (`external_id`);
-- Create index "refund_merchant_id_livemode_idempotency_key" to table: "refunds"
CREATE UNIQUE INDEX `refund_merchant_id_livemode_idempotency_key` ON `refunds` (`merchant_id`, `livemode`, `idempotency_key`);
-- Create index "refund_session_id" to table: "refunds"
CREATE INDEX `refund_session_id` ON `refunds` (`session_id`);
-- Create index "refund_status" to table: "refunds"
CREATE INDEX `refund_status` ON `refunds` (`status`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
-- Refunds made after a payout before this release were advanced in full by the treasury: each reserved its whole amount, netted off the next batch as before
UPDATE refunds SET reserved_token = amount_token WHERE after_payout;
-- A refund to an address other than its payment's payer had it chosen by the merchant
UPDATE refunds SET destination = 'chosen' WHERE to_address <> COALESCE((SELECT p.from_address FROM payments p WHERE p.id = refunds.payment_id), '');
