-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create "new_transfers" table
CREATE TABLE `new_transfers` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `kind` text NOT NULL, `from_user_id` uuid NULL, `to_user_id` uuid NULL, `checkout_session_id` uuid NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `from_address` text NOT NULL, `to_address` text NOT NULL, `amount` integer NOT NULL, `fee` integer NOT NULL DEFAULT (0), `net` integer NOT NULL, `tx_hash` text NULL, `status` text NOT NULL DEFAULT ('pending'), `ref` blob NOT NULL, `fee_ref` blob NULL, `fee_tx_hash` text NULL, `memo` text NULL, `error` text NULL, `submitted_at` datetime NULL, `completed_at` datetime NULL, `from_agent_id` uuid NULL, `to_agent_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `transfers_agents_sent_transfers` FOREIGN KEY (`from_agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `transfers_agents_received_transfers` FOREIGN KEY (`to_agent_id`) REFERENCES `agents` (`id`) ON DELETE SET NULL, CONSTRAINT `transfer_one_sender` CHECK ((from_agent_id IS NULL) <> (from_user_id IS NULL)));
-- Copy rows from old table "transfers" to new temporary table "new_transfers"
INSERT INTO `new_transfers` (`id`, `created_at`, `updated_at`, `kind`, `from_user_id`, `to_user_id`, `checkout_session_id`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `fee_ref`, `fee_tx_hash`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id`) SELECT `id`, `created_at`, `updated_at`, `kind`, `from_user_id`, `to_user_id`, `checkout_session_id`, `chain`, `token`, `from_address`, `to_address`, `amount`, `fee`, `net`, `tx_hash`, `status`, `ref`, `fee_ref`, `fee_tx_hash`, `memo`, `error`, `submitted_at`, `completed_at`, `from_agent_id`, `to_agent_id` FROM `transfers`;
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
-- Create index "transfer_from_user_id_created_at" to table: "transfers"
CREATE INDEX `transfer_from_user_id_created_at` ON `transfers` (`from_user_id`, `created_at`);
-- Create index "transfer_status_from_agent_id" to table: "transfers"
CREATE INDEX `transfer_status_from_agent_id` ON `transfers` (`status`, `from_agent_id`);
-- Create index "transfer_chain_tx_hash" to table: "transfers"
CREATE INDEX `transfer_chain_tx_hash` ON `transfers` (`chain`, `tx_hash`);
-- Create index "transfer_checkout_session_id" to table: "transfers"
CREATE INDEX `transfer_checkout_session_id` ON `transfers` (`checkout_session_id`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
