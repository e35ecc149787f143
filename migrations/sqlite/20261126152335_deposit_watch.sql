-- Disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- Create index "checkoutsession_merchant_id_livemode_status_expires_at" to table: "checkout_sessions"
CREATE INDEX `checkoutsession_merchant_id_livemode_status_expires_at` ON `checkout_sessions` (`merchant_id`, `livemode`, `status`, `expires_at`);
-- Create "new_deposit_addresses" table
CREATE TABLE `new_deposit_addresses` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `chain_family` text NOT NULL, `address` text NOT NULL, `derivation_index` integer NOT NULL, `swept` bool NOT NULL DEFAULT (false), `sweep_tx_hash` text NULL, `session_ended_at` datetime NULL, `session_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `deposit_addresses_checkout_sessions_deposit_addresses` FOREIGN KEY (`session_id`) REFERENCES `checkout_sessions` (`id`) ON DELETE NO ACTION);
-- Copy rows from old table "deposit_addresses" to new temporary table "new_deposit_addresses"
INSERT INTO `new_deposit_addresses` (`id`, `created_at`, `updated_at`, `chain`, `chain_family`, `address`, `derivation_index`, `swept`, `sweep_tx_hash`, `session_id`) SELECT `id`, `created_at`, `updated_at`, `chain`, `chain_family`, `address`, `derivation_index`, `swept`, `sweep_tx_hash`, `session_id` FROM `deposit_addresses`;
-- Drop "deposit_addresses" table after copying rows
DROP TABLE `deposit_addresses`;
-- Rename temporary table "new_deposit_addresses" to "deposit_addresses"
ALTER TABLE `new_deposit_addresses` RENAME TO `deposit_addresses`;
-- Create index "depositaddress_chain_family_derivation_index" to table: "deposit_addresses"
CREATE UNIQUE INDEX `depositaddress_chain_family_derivation_index` ON `deposit_addresses` (`chain_family`, `derivation_index`);
-- Create index "depositaddress_chain_address" to table: "deposit_addresses"
CREATE UNIQUE INDEX `depositaddress_chain_address` ON `deposit_addresses` (`chain`, `address`);
-- Create index "depositaddress_session_id" to table: "deposit_addresses"
CREATE INDEX `depositaddress_session_id` ON `deposit_addresses` (`session_id`);
-- Create index "depositaddress_chain_session_ended_at" to table: "deposit_addresses"
CREATE INDEX `depositaddress_chain_session_ended_at` ON `deposit_addresses` (`chain`, `session_ended_at`);
-- Enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;
