-- Create "passkeys" table
CREATE TABLE "passkeys" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "user_id" uuid NOT NULL, "credential_id" bytea NOT NULL, "public_key" bytea NOT NULL, "attestation_format" character varying NOT NULL DEFAULT '', "aaguid" bytea NULL, "transports" jsonb NULL, "flags" smallint NOT NULL, "sign_count" bigint NOT NULL, "name" character varying NOT NULL, "last_used_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "passkey_user_id_created_at" to table: "passkeys"
CREATE INDEX "passkey_user_id_created_at" ON "passkeys" ("user_id", "created_at");
-- Create index "passkeys_credential_id_key" to table: "passkeys"
CREATE UNIQUE INDEX "passkeys_credential_id_key" ON "passkeys" ("credential_id");
-- Create "passkey_ceremonies" table
CREATE TABLE "passkey_ceremonies" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "purpose" character varying NOT NULL, "user_id" uuid NULL, "session_data" bytea NOT NULL, "expires_at" timestamptz NOT NULL, "used_at" timestamptz NULL, PRIMARY KEY ("id"));
-- Create index "passkeyceremony_expires_at" to table: "passkey_ceremonies"
CREATE INDEX "passkeyceremony_expires_at" ON "passkey_ceremonies" ("expires_at");
