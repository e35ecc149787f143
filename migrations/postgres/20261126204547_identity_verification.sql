-- Create "identity_callbacks" table
CREATE TABLE "identity_callbacks" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "provider" character varying NOT NULL, "event_id" character varying NOT NULL, "reference" character varying NOT NULL, "state" character varying NOT NULL, PRIMARY KEY ("id"));
-- Create index "identitycallback_provider_event_id" to table: "identity_callbacks"
CREATE UNIQUE INDEX "identitycallback_provider_event_id" ON "identity_callbacks" ("provider", "event_id");
-- Create "identity_verifications" table
CREATE TABLE "identity_verifications" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "provider" character varying NOT NULL, "reference" character varying NOT NULL, "state" character varying NOT NULL DEFAULT 'pending', "state_at" timestamptz NULL, "completed_at" timestamptz NULL, "user_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "identity_verifications_users_identity_verifications" FOREIGN KEY ("user_id") REFERENCES "users" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- Create index "identityverification_provider_reference" to table: "identity_verifications"
CREATE UNIQUE INDEX "identityverification_provider_reference" ON "identity_verifications" ("provider", "reference");
-- Create index "identityverification_user_id_created_at" to table: "identity_verifications"
CREATE INDEX "identityverification_user_id_created_at" ON "identity_verifications" ("user_id", "created_at");
