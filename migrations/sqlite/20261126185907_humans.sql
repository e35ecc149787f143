-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_wallets" table
CREATE TABLE `new_wallets` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `address` text NOT NULL, `encrypted_key` blob NULL, `kind` text NOT NULL DEFAULT ('custodial'), `verified` bool NOT NULL DEFAULT (false), `agent_id` uuid NULL, `user_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `wallets_agents_wallets` FOREIGN KEY (`agent_id`) REFERENCES `agents` (`id`) ON DELETE SET NULL, CONSTRAINT `wallets_users_wallets` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "wallets" to new temporary table "new_wallets"
INSERT INTO `new_wallets` (`id`, `created_at`, `updated_at`, `chain`, `address`, `encrypted_key`, `kind`, `verified`, `agent_id`) SELECT `id`, `created_at`, `updated_at`, `chain`, `address`, `encrypted_key`, `kind`, `verified`, `agent_id` FROM `wallets`;
-- Drop "wallets" table after copying rows
DROP TABLE `wallets`;
-- Rename temporary table "new_wallets" to "wallets"
ALTER TABLE `new_wallets` RENAME TO `wallets`;
-- Create index "wallet_chain_address" to table: "wallets"
CREATE UNIQUE INDEX `wallet_chain_address` ON `wallets` (`chain`, `address`);
-- Create index "wallet_agent_id_chain" to table: "wallets"
CREATE INDEX `wallet_agent_id_chain` ON `wallets` (`agent_id`, `chain`);
-- Create index "wallet_user_id_chain" to table: "wallets"
CREATE INDEX `wallet_user_id_chain` ON `wallets` (`user_id`, `chain`);
-- Create "new_transfers" table
CREATE TABLE `new_transfers` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `to_user_id` uuid NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `from_address` text NOT NULL, `to_address` text NOT NULL, `amount` integer NOT NULL, `fee` integer NOT NULL DEFAULT (0), `net` integer NOT NULL, `tx_hash` text NULL, `status` text NOT NULL DEFAULT ('pending'), `ref` blob NOT NULL, `fee_ref` blob NULL, `fee_tx_hash` text NULL, `memo` text NULL, `error` text NULL, `submitted_at` datetime NULL, `completed_at` datetime NULL, `from_agent_id` uuid NOT NULL, `to_agent_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `transfers_agents_sent_transfers` FOREIGN KEY (`from_agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `transfers_agents_received_transfers` FOREIGN KEY (`to_agent_id`) REFERENCES `agents` (`id`) ON DELETE SET NULL);
-- Copy rows from old table "transfers" to new temporary table "new_transfers"
INSERT INTO `new_transfers` (`id`, `created_at`, `updated_at`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `fee_ref`, `fee_tx_hash`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id`) SELECT `id`, `created_at`, `updated_at`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `fee_ref`, `fee_tx_hash`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id` FROM `transfers`;
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
-- Create index "transfer_to_user_id_created_at" to table: "transfers"
CREATE INDEX `transfer_to_user_id_created_at` ON `transfers` (`to_user_id`, `created_at`);
-- Create index "transfer_status_from_agent_id" to table: "transfers"
CREATE INDEX `transfer_status_from_agent_id` ON `transfers` (`status`, `from_agent_id`);
-- Create index "transfer_chain_tx_hash" to table: "transfers"
CREATE INDEX `transfer_chain_tx_hash` ON `transfers` (`chain`, `tx_hash`);
-- Create "account_events" table
CREATE TABLE `account_events` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `agent_id` uuid NULL, `user_id` uuid NULL, `kind` text NOT NULL, `data` text NOT NULL, `created_at` datetime NOT NULL);
-- Create index "accountevent_agent_id_id" to table: "account_events"
CREATE INDEX `accountevent_agent_id_id` ON `account_events` (`agent_id`, `id`);
-- Create index "accountevent_user_id_id" to table: "account_events"
CREATE INDEX `accountevent_user_id_id` ON `account_events` (`user_id`, `id`);
-- Create "browser_sessions" table
CREATE TABLE `browser_sessions` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `user_id` uuid NOT NULL, `token_hash` blob NOT NULL, `expires_at` datetime NOT NULL, `revoked_at` datetime NULL, `user_agent` text NOT NULL DEFAULT (''), PRIMARY KEY (`id`));
-- Create index "browser_sessions_token_hash_key" to table: "browser_sessions"
CREATE UNIQUE INDEX `browser_sessions_token_hash_key` ON `browser_sessions` (`token_hash`);
-- Create index "browsersession_user_id_created_at" to table: "browser_sessions"
CREATE INDEX `browsersession_user_id_created_at` ON `browser_sessions` (`user_id`, `created_at`);
-- Create "invitations" table
CREATE TABLE `invitations` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `email` text NOT NULL, `day` text NOT NULL, `token_hash` blob NOT NULL, `expires_at` datetime NOT NULL, `accepted_at` datetime NULL, `accepted_by` uuid NULL, `agent_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `invitations_agents_invitations` FOREIGN KEY (`agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION);
-- Create index "invitations_token_hash_key" to table: "invitations"
CREATE UNIQUE INDEX `invitations_token_hash_key` ON `invitations` (`token_hash`);
-- Create index "invitation_agent_id_email_day" to table: "invitations"
CREATE UNIQUE INDEX `invitation_agent_id_email_day` ON `invitations` (`agent_id`, `email`, `day`);
-- Create "login_tokens" table
CREATE TABLE `login_tokens` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `email` text NOT NULL, `token_hash` blob NOT NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "login_tokens_token_hash_key" to table: "login_tokens"
CREATE UNIQUE INDEX `login_tokens_token_hash_key` ON `login_tokens` (`token_hash`);
-- Create index "logintoken_expires_at" to table: "login_tokens"
CREATE INDEX `logintoken_expires_at` ON `login_tokens` (`expires_at`);
-- Create "pairings" table
CREATE TABLE `pairings` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `status` text NOT NULL, `message` text NOT NULL DEFAULT (''), `decided_at` datetime NULL, `expires_at` datetime NULL, `invitation_id` uuid NULL, `agent_id` uuid NOT NULL, `user_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `pairings_agents_pairings` FOREIGN KEY (`agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `pairings_users_pairings` FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE NO ACTION);
-- Create index "pairing_agent_id_created_at" to table: "pairings"
CREATE INDEX `pairing_agent_id_created_at` ON `pairings` (`agent_id`, `created_at`);
-- Create index "pairing_user_id_created_at" to table: "pairings"
CREATE INDEX `pairing_user_id_created_at` ON `pairings` (`user_id`, `created_at`);
-- Create index "pairing_agent_id_user_id_status" to table: "pairings"
CREATE INDEX `pairing_agent_id_user_id_status` ON `pairings` (`agent_id`, `user_id`, `status`);
-- Create "users" table
CREATE TABLE `users` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `username` text NOT NULL, `display_name` text NOT NULL DEFAULT (''), `email` text NOT NULL, `email_verified_at` datetime NULL, `identity_status` text NOT NULL DEFAULT ('not_started'), PRIMARY KEY (`id`));
-- Create index "users_username_key" to table: "users"
CREATE UNIQUE INDEX `users_username_key` ON `users` (`username`);
-- Create index "users_email_key" to table: "users"
CREATE UNIQUE INDEX `users_email_key` ON `users` (`email`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
