-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_merchants" table
CREATE TABLE `new_merchants` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `name` text NOT NULL, `email` text NOT NULL, `website` text NULL, `webhook_url` text NULL, `success_url` text NULL, `cancel_url` text NULL, `settlement_type` text NOT NULL DEFAULT ('crypto_usdc'), `settlement_address` text NULL, `settlement_chain` text NULL, `settle_held_payments` bool NOT NULL DEFAULT (false), `accepted_tokens` json NULL, `brand_color` text NULL, `webhook_secret_encrypted` blob NOT NULL, `webhook_secret_previous_encrypted` blob NULL, `webhook_secret_previous_expires_at` datetime NULL, `test_webhook_url` text NULL, `test_webhook_secret_encrypted` blob NULL, `test_webhook_secret_previous_encrypted` blob NULL, `test_webhook_secret_previous_expires_at` datetime NULL, `active` bool NOT NULL DEFAULT (true), `deactivated_at` datetime NULL, PRIMARY KEY (`id`));
-- Copy rows from old table "merchants" to new temporary table "new_merchants"
INSERT INTO `new_merchants` (`id`, `created_at`, `updated_at`, `name`, `email`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at`) SELECT `id`, `created_at`, `updated_at`, `name`, `email`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at` FROM `merchants`;
-- Drop "merchants" table after copying rows
DROP TABLE `merchants`;
-- Rename temporary table "new_merchants" to "merchants"
ALTER TABLE `new_merchants` RENAME TO `merchants`;
-- Create "new_payments" table
CREATE TABLE `new_payments` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `tx_hash` text NOT NULL, `log_index` integer NOT NULL, `from_address` text NOT NULL, `to_address` text NOT NULL, `amount_token` integer NOT NULL, `amount_usd` text NOT NULL, `block_number` integer NOT NULL, `block_hash` text NULL, `confirmations` integer NOT NULL DEFAULT (0), `status` text NOT NULL DEFAULT ('detected'), `late` bool NOT NULL DEFAULT (false), `confirmed_at` datetime NULL, `settlement_status` text NULL, `settlement_tx_hash` text NULL, `settlement_reference` text NULL, `settlement_fee` integer NULL, `settlement_net` integer NULL, `settlement_fx_rate` text NULL, `settlement_fiat_amount` text NULL, `settlement_fiat_currency` text NULL, `settlement_chain` text NULL, `settlement_address` text NULL, `settlement_error` text NULL, `settled_at` datetime NULL, `sweep_tx_hash` text NULL, `sweep_submitted_at` datetime NULL, `swept_at` datetime NULL, `refunded_token` integer NOT NULL DEFAULT (0), `session_id` uuid NOT NULL, `deposit_address_id` uuid NULL, `settlement_batch_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `payments_checkout_sessions_payments` FOREIGN KEY (`session_id`) REFERENCES `checkout_sessions` (`id`) ON DELETE NO ACTION, CONSTRAINT `payments_deposit_addresses_payments` FOREIGN KEY (`deposit_address_id`) REFERENCES `deposit_addresses` (`id`) ON DELETE SET NULL, CONSTRAINT `payments_settlement_batches_payments` FOREIGN KEY (`settlement_batch_id`) REFERENCES `settlement_batches` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "payments" to new temporary table "new_payments"
INSERT INTO `new_payments` (`id`, `created_at`, `updated_at`, `external_id`, `chain`, `token`, `tx_hash`, `log_index`, `from_address`, `to_address`, `amount_token`, `amount_usd`, `block_number`, `block_hash`, `confirmations`, `status`, `late`, `confirmed_at`, `settlement_status`, `settlement_tx_hash`, `settlement_reference`, `settlement_fee`, `settlement_net`, `settlement_fx_rate`, `settlement_fiat_amount`, `settlement_fiat_currency`, `settlement_chain`, `settlement_address`, `settlement_error`, `settled_at`, `sweep_tx_hash`, `sweep_submitted_at`, `swept_at`, `refunded_token`, `session_id`, `deposit_address_id`) SELECT `id`, `created_at`, `updated_at`, `external_id`, `chain`, `token`, `tx_hash`, `log_index`, `from_address`, `to_address`, `amount_token`, `amount_usd`, `block_number`, `block_hash`, `confirmations`, `status`, `late`, `confirmed_at`, `settlement_status`, `settlement_tx_hash`, `settlement_reference`, `settlement_fee`, `settlement_net`, `settlement_fx_rate`, `settlement_fiat_amount`, `settlement_fiat_currency`, `settlement_chain`, `settlement_address`, `settlement_error`, `settled_at`, `sweep_tx_hash`, `sweep_submitted_at`, `swept_at`, `refunded_token`, `session_id`, `deposit_address_id` FROM `payments`;
-- Drop "payments" table after copying rows
DROP TABLE `payments`;
-- Rename temporary table "new_payments" to "payments"
ALTER TABLE `new_payments` RENAME TO `payments`;
-- Create index "payments_external_id_key" to table: "payments"
CREATE UNIQUE INDEX `payments_external_id_key` ON `payments` (`external_id`);
-- Create index "payment_chain_tx_hash_log_index" to table: "payments"
CREATE UNIQUE INDEX `payment_chain_tx_hash_log_index` ON `payments` (`chain`, `tx_hash`, `log_index`);
-- Create index "payment_session_id" to table: "payments"
CREATE INDEX `payment_session_id` ON `payments` (`session_id`);
-- Create index "payment_status_chain" to table: "payments"
CREATE INDEX `payment_status_chain` ON `payments` (`status`, `chain`);
-- Create index "payment_settlement_status" to table: "payments"
CREATE INDEX `payment_settlement_status` ON `payments` (`settlement_status`);
-- Create index "payment_settlement_batch_id" to table: "payments"
CREATE INDEX `payment_settlement_batch_id` ON `payments` (`settlement_batch_id`);
-- Create "new_refunds" table
CREATE TABLE `new_refunds` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `session_id` uuid NOT NULL, `merchant_id` uuid NOT NULL, `livemode` bool NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `amount_token` integer NOT NULL, `amount_usd` text NOT NULL, `to_address` text NOT NULL, `reason` text NULL, `status` text NOT NULL DEFAULT ('pending'), `tx_hash` text NULL, `error` text NULL, `reverts` integer NOT NULL DEFAULT (0), `completed_at` datetime NULL, `idempotency_key` text NULL, `request_hash` text NULL, `after_payout` bool NOT NULL DEFAULT (false), `payment_id` uuid NOT NULL, `netted_batch_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `refunds_payments_refunds` FOREIGN KEY (`payment_id`) REFERENCES `payments` (`id`) ON DELETE NO ACTION, CONSTRAINT `refunds_settlement_batches_netted_refunds` FOREIGN KEY (`netted_batch_id`) REFERENCES `settlement_batches` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "refunds" to new temporary table "new_refunds"
INSERT INTO `new_refunds` (`id`, `created_at`, `updated_at`, `external_id`, `session_id`, `merchant_id`, `livemode`, `chain`, `token`, `amount_token`, `amount_usd`, `to_address`, `reason`, `status`, `tx_hash`, `error`, `reverts`, `completed_at`, `idempotency_key`, `request_hash`, `payment_id`) SELECT `id`, `created_at`, `updated_at`, `external_id`, `session_id`, `merchant_id`, `livemode`, `chain`, `token`, `amount_token`, `amount_usd`, `to_address`, `reason`, `status`, `tx_hash`, `error`, `reverts`, `completed_at`, `idempotency_key`, `request_hash`, `payment_id` FROM `refunds`;
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
-- Create "settlement_batches" table
CREATE TABLE `settlement_batches` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `merchant_id` uuid NOT NULL, `livemode` bool NOT NULL, `chain` text NOT NULL, `seq` integer NOT NULL, `status` text NOT NULL DEFAULT ('pending'), `gross` integer NOT NULL, `fee` integer NOT NULL, `refunds_netted` integer NOT NULL, `carried_in` integer NOT NULL, `carried_out` integer NOT NULL, `net` integer NOT NULL, `payout_chain` text NULL, `payout_address` text NULL, `tx_hash` text NULL, `reference` text NULL, `fx_rate` text NULL, `fiat_amount` text NULL, `fiat_currency` text NULL, `settlement_type` text NOT NULL, `error` text NULL, `completed_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "settlement_batches_external_id_key" to table: "settlement_batches"
CREATE UNIQUE INDEX `settlement_batches_external_id_key` ON `settlement_batches` (`external_id`);
-- Create index "settlementbatch_merchant_id_livemode_chain_seq" to table: "settlement_batches"
CREATE UNIQUE INDEX `settlementbatch_merchant_id_livemode_chain_seq` ON `settlement_batches` (`merchant_id`, `livemode`, `chain`, `seq`);
-- Create index "settlementbatch_status" to table: "settlement_batches"
CREATE INDEX `settlementbatch_status` ON `settlement_batches` (`status`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
