-- Create "idempotency_keys" table
CREATE TABLE "idempotency_keys" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "scope" character varying NOT NULL, "key" character varying NOT NULL, "operation" character varying NOT NULL, "fingerprint" bytea NOT NULL, "state" character varying NOT NULL DEFAULT 'in_flight', "attempt" bigint NOT NULL DEFAULT 1, "locked_until" timestamptz NOT NULL, "expires_at" timestamptz NOT NULL, "outcome" text NULL, "transfer_id" uuid NULL, PRIMARY KEY ("id"), CONSTRAINT "idempotency_keys_transfers_transfer" FOREIGN KEY ("transfer_id") REFERENCES "transfers" ("id") ON UPDATE NO ACTION ON DELETE SET NULL);
-- Create index "idempotencykey_expires_at" to table: "idempotency_keys"
CREATE INDEX "idempotencykey_expires_at" ON "idempotency_keys" ("expires_at");
-- Create index "idempotencykey_scope_key" to table: "idempotency_keys"
CREATE UNIQUE INDEX "idempotencykey_scope_key" ON "idempotency_keys" ("scope", "key");
