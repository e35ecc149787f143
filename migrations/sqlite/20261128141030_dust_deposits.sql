-- Create "dust_deposits" table
CREATE TABLE `dust_deposits` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `deposit_address_id` uuid NOT NULL, `chain` text NOT NULL, `livemode` bool NOT NULL, `tx_hash` text NOT NULL, `log_index` integer NOT NULL, `from_address` text NULL, `amount` integer NOT NULL, `block_number` integer NOT NULL, `sweep_id` uuid NULL, `sweep_submitted_at` datetime NULL, `sweep_tx_hash` text NULL, `swept_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "dustdeposit_chain_tx_hash_log_index" to table: "dust_deposits"
CREATE UNIQUE INDEX `dustdeposit_chain_tx_hash_log_index` ON `dust_deposits` (`chain`, `tx_hash`, `log_index`);
-- Create index "dustdeposit_deposit_address_id_swept_at" to table: "dust_deposits"
CREATE INDEX `dustdeposit_deposit_address_id_swept_at` ON `dust_deposits` (`deposit_address_id`, `swept_at`);
-- Create index "dustdeposit_sweep_id" to table: "dust_deposits"
CREATE INDEX `dustdeposit_sweep_id` ON `dust_deposits` (`sweep_id`);
