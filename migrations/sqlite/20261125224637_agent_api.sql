-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_transfers" table
CREATE TABLE `new_transfers` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `from_address` text NOT NULL, `to_address` text NOT NULL, `amount` integer NOT NULL, `fee` integer NOT NULL DEFAULT (0), `net` integer NOT NULL, `tx_hash` text NULL, `status` text NOT NULL DEFAULT ('pending'), `ref` blob NOT NULL, `fee_ref` blob NULL, `fee_tx_hash` text NULL, `memo` text NULL, `error` text NULL, `submitted_at` datetime NULL, `completed_at` datetime NULL, `from_agent_id` uuid NOT NULL, `to_agent_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `transfers_agents_sent_transfers` FOREIGN KEY (`from_agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `transfers_agents_received_transfers` FOREIGN KEY (`to_agent_id`) REFERENCES `agents` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "transfers" to new temporary table "new_transfers"
INSERT INTO `new_transfers` (`id`, `created_at`, `updated_at`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id`) SELECT `id`, `created_at`, `updated_at`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id` FROM `transfers`;
-- Drop "transfers" table after copying rows
DROP TABLE `transfers`;
-- Rename temporary table "new_transfers" to "transfers"
ALTER TABLE `new_transfers` RENAME TO `transfers`;
-- Create index "transfers_ref_key" to table: "transfers"
CREATE UNIQUE INDEX `transfers_ref_key` ON `transfers` (`ref`);
-- Create index "transfers_fee_ref_key" to table: "transfers"
CREATE UNIQUE INDEX `transfers_fee_ref_key` ON `transfers` (`fee_ref`);
-- Create index "transfer_from_agent_id_created_at" to table: "transfers"
CREATE INDEX `transfer_from_agent_id_created_at` ON `transfers` (`from_agent_id`, `created_at`);
-- Create index "transfer_to_agent_id_created_at" to table: "transfers"
CREATE INDEX `transfer_to_agent_id_created_at` ON `transfers` (`to_agent_id`, `created_at`);
-- Create index "transfer_status_from_agent_id" to table: "transfers"
CREATE INDEX `transfer_status_from_agent_id` ON `transfers` (`status`, `from_agent_id`);
-- Create index "transfer_chain_tx_hash" to table: "transfers"
CREATE INDEX `transfer_chain_tx_hash` ON `transfers` (`chain`, `tx_hash`);
-- Create "rate_limit_counters" table
CREATE TABLE `rate_limit_counters` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `key` text NOT NULL, `window_start` integer NOT NULL, `count` integer NOT NULL DEFAULT (0), `expires_at` integer NOT NULL);
-- Create index "ratelimitcounter_key_window_start" to table: "rate_limit_counters"
CREATE UNIQUE INDEX `ratelimitcounter_key_window_start` ON `rate_limit_counters` (`key`, `window_start`);
-- Create index "ratelimitcounter_expires_at" to table: "rate_limit_counters"
CREATE INDEX `ratelimitcounter_expires_at` ON `rate_limit_counters` (`expires_at`);
-- Create "signature_challenges" table
CREATE TABLE `signature_challenges` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `purpose` text NOT NULL, `nonce` text NOT NULL, `username` text NULL, `agent_id` uuid NULL, `wallet_address` text NOT NULL, `chain` text NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "signature_challenges_nonce_key" to table: "signature_challenges"
CREATE UNIQUE INDEX `signature_challenges_nonce_key` ON `signature_challenges` (`nonce`);
-- Create index "signaturechallenge_wallet_address_purpose" to table: "signature_challenges"
CREATE INDEX `signaturechallenge_wallet_address_purpose` ON `signature_challenges` (`wallet_address`, `purpose`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
