-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_merchants" table
CREATE TABLE `new_merchants` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `name` text NOT NULL, `email` text NOT NULL, `email_normalized` text NOT NULL DEFAULT (''), `website` text NULL, `webhook_url` text NULL, `success_url` text NULL, `cancel_url` text NULL, `settlement_type` text NOT NULL DEFAULT ('crypto_usdc'), `settlement_address` text NULL, `settlement_chain` text NULL, `settle_held_payments` bool NOT NULL DEFAULT (false), `accepted_tokens` json NULL, `brand_color` text NULL, `webhook_secret_encrypted` blob NOT NULL, `webhook_secret_previous_encrypted` blob NULL, `webhook_secret_previous_expires_at` datetime NULL, `test_webhook_url` text NULL, `test_webhook_secret_encrypted` blob NULL, `test_webhook_secret_previous_encrypted` blob NULL, `test_webhook_secret_previous_expires_at` datetime NULL, `active` bool NOT NULL DEFAULT (true), `deactivated_at` datetime NULL, PRIMARY KEY (`id`));
-- Copy rows from old table "merchants" to new temporary table "new_merchants"
INSERT INTO `new_merchants` (`id`, `created_at`, `updated_at`, `name`, `email`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `settle_held_payments`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at`) SELECT `id`, `created_at`, `updated_at`, `name`, `email`, `website`, `webhook_url`, `success_url`, `cancel_url`, `settlement_type`, `settlement_address`, `settlement_chain`, `settle_held_payments`, `accepted_tokens`, `brand_color`, `webhook_secret_encrypted`, `webhook_secret_previous_encrypted`, `webhook_secret_previous_expires_at`, `test_webhook_url`, `test_webhook_secret_encrypted`, `test_webhook_secret_previous_encrypted`, `test_webhook_secret_previous_expires_at`, `active`, `deactivated_at` FROM `merchants`;
-- Drop "merchants" table after copying rows
DROP TABLE `merchants`;
-- Rename temporary table "new_merchants" to "merchants"
ALTER TABLE `new_merchants` RENAME TO `merchants`;
-- Create index "merchant_email_normalized" to table: "merchants"
CREATE INDEX `merchant_email_normalized` ON `merchants` (`email_normalized`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
-- Backfill: the rows written before the column get their lookup key (merchantEmailKey)
UPDATE merchants SET email_normalized = lower(email);
