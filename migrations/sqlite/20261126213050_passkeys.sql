-- Create "passkeys" table
CREATE TABLE `passkeys` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `user_id` uuid NOT NULL, `credential_id` blob NOT NULL, `public_key` blob NOT NULL, `attestation_format` text NOT NULL DEFAULT (''), `aaguid` blob NULL, `transports` json NULL, `flags` integer NOT NULL, `sign_count` integer NOT NULL, `name` text NOT NULL, `last_used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "passkeys_credential_id_key" to table: "passkeys"
CREATE UNIQUE INDEX `passkeys_credential_id_key` ON `passkeys` (`credential_id`);
-- Create index "passkey_user_id_created_at" to table: "passkeys"
CREATE INDEX `passkey_user_id_created_at` ON `passkeys` (`user_id`, `created_at`);
-- Create "passkey_ceremonies" table
CREATE TABLE `passkey_ceremonies` (`id` uuid NOT NULL, `created_at` datetime NOT NULL, `updated_at` datetime NOT NULL, `purpose` text NOT NULL, `user_id` uuid NULL, `session_data` blob NOT NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL, PRIMARY KEY (`id`));
-- Create index "passkeyceremony_expires_at" to table: "passkey_ceremonies"
CREATE INDEX `passkeyceremony_expires_at` ON `passkey_ceremonies` (`expires_at`);
