-- Create "agents" table
CREATE TABLE `agents` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `username` text NOT NULL, `api_key_hash` blob NOT NULL, `invite_code` text NOT NULL, `trust_score` integer NOT NULL DEFAULT (0), `tier` text NOT NULL DEFAULT ('T0'), `partner_verified` bool NOT NULL DEFAULT (false), `partner_provider` text NULL, `partner_subject` text NULL, `human_verified` bool NOT NULL DEFAULT (false), `external_wallet_verified` bool NOT NULL DEFAULT (false), `tx_count` integer NOT NULL DEFAULT (0), `volume_sent` integer NOT NULL DEFAULT (0), `volume_received` integer NOT NULL DEFAULT (0), `fees_paid` integer NOT NULL DEFAULT (0), `api_key_rotated_at` datetime NULL, `primary_wallet_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `agents_wallets_primary_wallet` FOREIGN KEY (`primary_wallet_id`) REFERENCES `wallets` (`id`) ON DELETE SET NULL);
-- Create index "agents_username_key" to table: "agents"
CREATE UNIQUE INDEX `agents_username_key` ON `agents` (`username`);
-- Create index "agents_api_key_hash_key" to table: "agents"
CREATE UNIQUE INDEX `agents_api_key_hash_key` ON `agents` (`api_key_hash`);
-- Create index "agents_invite_code_key" to table: "agents"
CREATE UNIQUE INDEX `agents_invite_code_key` ON `agents` (`invite_code`);
-- Create index "agent_volume_sent" to table: "agents"
CREATE INDEX `agent_volume_sent` ON `agents` (`volume_sent`);
-- Create index "agent_tx_count" to table: "agents"
CREATE INDEX `agent_tx_count` ON `agents` (`tx_count`);
-- Create index "agent_trust_score" to table: "agents"
CREATE INDEX `agent_trust_score` ON `agents` (`trust_score`);
-- Create "chain_cursors" table
CREATE TABLE `chain_cursors` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `mode` text NOT NULL, `next_block` integer NOT NULL DEFAULT (0), `pending` json NULL, PRIMARY KEY (`id`));
-- Create index "chaincursor_chain_mode" to table: "chain_cursors"
CREATE UNIQUE INDEX `chaincursor_chain_mode` ON `chain_cursors` (`chain`, `mode`);
-- Create "checkout_sessions" table
CREATE TABLE `checkout_sessions` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `livemode` bool NOT NULL, `amount_usd` text NOT NULL, `currency` text NOT NULL DEFAULT ('USD'), `description` text NULL, `success_url` text NULL, `cancel_url` text NULL, `metadata` json NULL, `idempotency_key` text NULL, `status` text NOT NULL DEFAULT ('pending'), `chain` text NULL, `token` text NULL, `expires_at` datetime NOT NULL, `confirmed_at` datetime NULL, `cancelled_at` datetime NULL, `expired_at` datetime NULL, `merchant_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `checkout_sessions_merchants_sessions` FOREIGN KEY (`merchant_id`) REFERENCES `merchants` (`id`) ON DELETE NO ACTION);
-- Create index "checkout_sessions_external_id_key" to table: "checkout_sessions"
CREATE UNIQUE INDEX `checkout_sessions_external_id_key` ON `checkout_sessions` (`external_id`);
-- Create index "checkoutsession_merchant_id_livemode_idempotency_key" to table: "checkout_sessions"
CREATE UNIQUE INDEX `checkoutsession_merchant_id_livemode_idempotency_key` ON `checkout_sessions` (`merchant_id`, `livemode`, `idempotency_key`);
-- Create index "checkoutsession_merchant_id_livemode_created_at" to table: "checkout_sessions"
CREATE INDEX `checkoutsession_merchant_id_livemode_created_at` ON `checkout_sessions` (`merchant_id`, `livemode`, `created_at`);
-- Create index "checkoutsession_status_expires_at" to table: "checkout_sessions"
CREATE INDEX `checkoutsession_status_expires_at` ON `checkout_sessions` (`status`, `expires_at`);
-- Create "deposit_addresses" table
CREATE TABLE `deposit_addresses` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `chain_family` text NOT NULL, `address` text NOT NULL, `derivation_index` integer NOT NULL, `swept` bool NOT NULL DEFAULT (false), `sweep_tx_hash` text NULL, `session_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `deposit_addresses_checkout_sessions_deposit_addresses` FOREIGN KEY (`session_id`) REFERENCES `checkout_sessions` (`id`) ON DELETE NO ACTION);
-- Create index "depositaddress_chain_family_derivation_index" to table: "deposit_addresses"
CREATE UNIQUE INDEX `depositaddress_chain_family_derivation_index` ON `deposit_addresses` (`chain_family`, `derivation_index`);
-- Create index "depositaddress_chain_address" to table: "deposit_addresses"
CREATE UNIQUE INDEX `depositaddress_chain_address` ON `deposit_addresses` (`chain`, `address`);
-- Create index "depositaddress_session_id" to table: "deposit_addresses"
CREATE INDEX `depositaddress_session_id` ON `deposit_addresses` (`session_id`);
-- Create "merchants" table
CREATE TABLE `merchants` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `name` text NOT NULL, `email` text NOT NULL, `website` text NULL, `webhook_url` text NULL, `success_url` text NULL, `cancel_url` text NULL, `settlement_type` text NOT NULL DEFAULT ('crypto_usdc'), `settlement_address` text NULL, `settlement_chain` text NULL, `accepted_tokens` json NULL, `brand_color` text NULL, `webhook_secret_encrypted` blob NOT NULL, `active` bool NOT NULL DEFAULT (true), `deactivated_at` datetime NULL, PRIMARY KEY (`id`));
-- Create "merchant_keys" table
CREATE TABLE `merchant_keys` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `kind` text NOT NULL, `public_key` text NOT NULL, `secret_key_hash` blob NOT NULL, `revoked_at` datetime NULL, `merchant_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `merchant_keys_merchants_keys` FOREIGN KEY (`merchant_id`) REFERENCES `merchants` (`id`) ON DELETE NO ACTION);
-- Create index "merchant_keys_public_key_key" to table: "merchant_keys"
CREATE UNIQUE INDEX `merchant_keys_public_key_key` ON `merchant_keys` (`public_key`);
-- Create index "merchant_keys_secret_key_hash_key" to table: "merchant_keys"
CREATE UNIQUE INDEX `merchant_keys_secret_key_hash_key` ON `merchant_keys` (`secret_key_hash`);
-- Create index "merchantkey_merchant_id_kind_revoked_at" to table: "merchant_keys"
CREATE INDEX `merchantkey_merchant_id_kind_revoked_at` ON `merchant_keys` (`merchant_id`, `kind`, `revoked_at`);
-- Create "payments" table
CREATE TABLE `payments` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `external_id` text NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `tx_hash` text NOT NULL, `log_index` integer NOT NULL, `from_address` text NOT NULL, `to_address` text NOT NULL, `amount_token` integer NOT NULL, `amount_usd` text NOT NULL, `block_number` integer NOT NULL, `block_hash` text NULL, `confirmations` integer NOT NULL DEFAULT (0), `status` text NOT NULL DEFAULT ('detected'), `late` bool NOT NULL DEFAULT (false), `confirmed_at` datetime NULL, `settlement_status` text NULL, `settlement_tx_hash` text NULL, `settlement_reference` text NULL, `settlement_fee` integer NULL, `settlement_net` integer NULL, `settlement_fx_rate` text NULL, `settled_at` datetime NULL, `sweep_tx_hash` text NULL, `session_id` uuid NOT NULL, `deposit_address_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `payments_checkout_sessions_payments` FOREIGN KEY (`session_id`) REFERENCES `checkout_sessions` (`id`) ON DELETE NO ACTION, CONSTRAINT `payments_deposit_addresses_payments` FOREIGN KEY (`deposit_address_id`) REFERENCES `deposit_addresses` (`id`) ON DELETE SET NULL);
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
-- Create "transfers" table
CREATE TABLE `transfers` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `token` text NOT NULL DEFAULT ('USDC'), `from_address` text NOT NULL, `to_address` text NOT NULL, `amount` integer NOT NULL, `fee` integer NOT NULL DEFAULT (0), `net` integer NOT NULL, `tx_hash` text NULL, `status` text NOT NULL DEFAULT ('pending'), `ref` blob NOT NULL, `memo` text NULL, `error` text NULL, `submitted_at` datetime NULL, `completed_at` datetime NULL, `from_agent_id` uuid NOT NULL, `to_agent_id` uuid NULL, PRIMARY KEY (`id`), CONSTRAINT `transfers_agents_sent_transfers` FOREIGN KEY (`from_agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION, CONSTRAINT `transfers_agents_received_transfers` FOREIGN KEY (`to_agent_id`) REFERENCES `agents` (`id`) ON DELETE SET NULL);
-- Create index "transfers_ref_key" to table: "transfers"
CREATE UNIQUE INDEX `transfers_ref_key` ON `transfers` (`ref`);
-- Create index "transfer_from_agent_id_created_at" to table: "transfers"
CREATE INDEX `transfer_from_agent_id_created_at` ON `transfers` (`from_agent_id`, `created_at`);
-- Create index "transfer_to_agent_id_created_at" to table: "transfers"
CREATE INDEX `transfer_to_agent_id_created_at` ON `transfers` (`to_agent_id`, `created_at`);
-- Create index "transfer_status_from_agent_id" to table: "transfers"
CREATE INDEX `transfer_status_from_agent_id` ON `transfers` (`status`, `from_agent_id`);
-- Create index "transfer_chain_tx_hash" to table: "transfers"
CREATE INDEX `transfer_chain_tx_hash` ON `transfers` (`chain`, `tx_hash`);
-- Create "wallets" table
CREATE TABLE `wallets` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `chain` text NOT NULL, `address` text NOT NULL, `encrypted_key` blob NULL, `kind` text NOT NULL DEFAULT ('custodial'), `verified` bool NOT NULL DEFAULT (false), `agent_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `wallets_agents_wallets` FOREIGN KEY (`agent_id`) REFERENCES `agents` (`id`) ON DELETE NO ACTION);
-- Create index "wallet_chain_address" to table: "wallets"
CREATE UNIQUE INDEX `wallet_chain_address` ON `wallets` (`chain`, `address`);
-- Create index "wallet_agent_id_chain" to table: "wallets"
CREATE INDEX `wallet_agent_id_chain` ON `wallets` (`agent_id`, `chain`);
-- Create "webhook_attempts" table
CREATE TABLE `webhook_attempts` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `status_code` integer NOT NULL DEFAULT (0), `duration_ms` integer NOT NULL, `error` text NULL, `at` datetime NOT NULL, `delivery_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `webhook_attempts_webhook_deliveries_attempt_log` FOREIGN KEY (`delivery_id`) REFERENCES `webhook_deliveries` (`id`) ON DELETE NO ACTION);
-- Create index "webhookattempt_delivery_id_at" to table: "webhook_attempts"
CREATE INDEX `webhookattempt_delivery_id_at` ON `webhook_attempts` (`delivery_id`, `at`);
-- Create "webhook_deliveries" table
CREATE TABLE `webhook_deliveries` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `url` text NOT NULL, `status` text NOT NULL DEFAULT ('pending'), `attempts` integer NOT NULL DEFAULT (0), `next_attempt_at` datetime NULL, `last_attempt_at` datetime NULL, `completed_at` datetime NULL, `event_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `webhook_deliveries_webhook_events_deliveries` FOREIGN KEY (`event_id`) REFERENCES `webhook_events` (`id`) ON DELETE NO ACTION);
-- Create index "webhookdelivery_event_id" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_event_id` ON `webhook_deliveries` (`event_id`);
-- Create index "webhookdelivery_status_next_attempt_at" to table: "webhook_deliveries"
CREATE INDEX `webhookdelivery_status_next_attempt_at` ON `webhook_deliveries` (`status`, `next_attempt_at`);
-- Create "webhook_events" table
CREATE TABLE `webhook_events` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `event_type` text NOT NULL, `payload` blob NOT NULL, `livemode` bool NOT NULL, `session_id` uuid NULL, `merchant_id` uuid NOT NULL, PRIMARY KEY (`id`), CONSTRAINT `webhook_events_checkout_sessions_webhook_events` FOREIGN KEY (`session_id`) REFERENCES `checkout_sessions` (`id`) ON DELETE SET NULL, CONSTRAINT `webhook_events_merchants_webhook_events` FOREIGN KEY (`merchant_id`) REFERENCES `merchants` (`id`) ON DELETE NO ACTION);
-- Create index "webhookevent_merchant_id_livemode_created_at" to table: "webhook_events"
CREATE INDEX `webhookevent_merchant_id_livemode_created_at` ON `webhook_events` (`merchant_id`, `livemode`, `created_at`);
-- Create index "webhookevent_session_id" to table: "webhook_events"
CREATE INDEX `webhookevent_session_id` ON `webhook_events` (`session_id`);
