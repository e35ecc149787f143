-- Create "relays" table
CREATE TABLE `relays` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `livemode` bool NOT NULL, `chain` text NOT NULL, `payer` text NOT NULL, `nonce` text NOT NULL, `value` integer NOT NULL, `merchant_id` uuid NOT NULL, `session_id` uuid NOT NULL, `status` text NOT NULL DEFAULT ('pending'), `tx_hash` text NULL, `in_flight_until` datetime NOT NULL, `finished_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "relay_livemode_chain_payer_status" to table: "relays"
CREATE INDEX `relay_livemode_chain_payer_status` ON `relays` (`livemode`, `chain`, `payer`, `status`);
-- Create index "relay_livemode_payer_status_finished_at" to table: "relays"
CREATE INDEX `relay_livemode_payer_status_finished_at` ON `relays` (`livemode`, `payer`, `status`, `finished_at`);
-- Create index "relay_livemode_chain_payer_nonce" to table: "relays"
CREATE INDEX `relay_livemode_chain_payer_nonce` ON `relays` (`livemode`, `chain`, `payer`, `nonce`);
